/// A running machine: one instance of a definition whose events are
/// transactions. The actor serializes them, so no two events (or an event and
/// a timeout) ever interleave; an event applies only from a state that allows it.
/// A client can also hold a transition open (`open`, then `commit` or
/// `abort`): meanwhile the machine stays in its state and refuses other events,
/// and a state timeout that falls due waits for the transaction's end.
///
/// It runs on its own `ResourceExecutor`: async callers `await` it, and an HTTP
/// thread that needs no waiting runs isolated to it with `withIsolation { }`.
/// Timeouts and long-poll deadlines go through the injected clock.
package actor StateMachine: LockIsolatedActor {
    /// The executor the actor's jobs run on, also taken by `withIsolation`.
    package nonisolated let executor: ResourceExecutor
    package nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// The machine's name.
    package nonisolated let name: String
    /// The configured definition's name, or nil for an inline definition.
    package nonisolated let definitionName: String?
    /// The definition the machine runs.
    package nonisolated let definition: MachineDefinition

    private enum Lifecycle { case open, closed, shuttingDown }

    /// What a parked `waitForVersion` gets.
    typealias WaitAnswer = UsherCore.WaitAnswer<MachineSnapshot, MachineError>

    private let clock: any UsherClock
    /// Where transitions are emitted (nil: nowhere).
    package nonisolated let events: EventLog?
    private var engine: MachineEngine
    private var lifecycle = Lifecycle.open
    /// The current state entry's timeout timers.
    private var timers: [any ScheduledTimer] = []
    /// The open transaction's expiry timer.
    private var transactionTimer: (any ScheduledTimer)?
    /// Parked `waitForVersion` calls.
    private var waiters: [UInt64: ParkedCall<WaitAnswer>] = [:]
    private var nextWaiterID: UInt64 = 0

    /// Creates a machine in the definition's initial state and starts that
    /// state's timeouts. Its version starts at the clock's time in microseconds.
    package init(
        name: String, definitionName: String?, definition: MachineDefinition, clock: any UsherClock,
        events: EventLog? = nil, budget: StorageBudget = StorageBudget()
    ) {
        executor = ResourceExecutor(label: "usher.machine.\(name)")
        self.name = name
        self.events = events
        self.definitionName = definitionName
        self.definition = definition
        self.clock = clock
        engine = MachineEngine(definition: definition, createdAt: clock.now(), budget: budget)
        withIsolation { $0.scheduleTimeouts() }
    }

    deinit {
        for timer in timers { timer.cancel() }
        transactionTimer?.cancel()
    }

    /// Applies `event` as one transaction and wakes every waiter.
    ///
    /// - Throws: `.unknownEvent` when the definition does not know the event;
    ///   `.versionMismatch` when `expectedVersion` is given and differs;
    ///   `.transactionOpen` while a transaction is open; `.invalidTransition`
    ///   when the current state does not allow it (checked in that order);
    ///   `.gone` after `close()`; `.shuttingDown` after `shutdown()`.
    @discardableResult
    package func fire(event: String, expectedVersion: Int64? = nil, data: JSONValue? = nil)
        throws(MachineError) -> TransitionResult
    {
        try checkOpen()
        let transition = try engine.fire(event, expectedVersion: expectedVersion, data: data, at: clock.now())
        didTransition(transition)
        wakeWaiters()
        return TransitionResult(transition)
    }

    /// Opens a transaction for `event`, checked as `fire` checks it (a
    /// transaction already open is `.transactionOpen`). The machine stays in
    /// its state, refusing other events, until `commit`, `abort`, or
    /// `seconds` pass (then it expires). Wakes every waiter: the version moved.
    @discardableResult
    func open(event: String, expectedVersion: Int64? = nil, data: JSONValue? = nil, seconds: Double)
        throws(MachineError) -> MachineTransaction
    {
        try checkOpen()
        let opened = try engine.open(
            event, expectedVersion: expectedVersion, data: data, seconds: seconds, at: clock.now())
        let id = opened.id
        transactionTimer = clock.schedule(at: opened.expiresAt) { [weak self] in
            self?.withIsolation { $0.transactionExpired(id) }
        }
        emitTransaction(opened)
        wakeWaiters()
        return opened
    }

    /// Commits the open transaction `id`: its transition happens exactly as
    /// `fire` makes one (history, event, version, the new state's timeouts).
    ///
    /// - Throws: `.unknownTransaction`, `.transactionEnded`, `.gone`, `.shuttingDown`.
    @discardableResult
    func commit(transaction id: String) throws(MachineError) -> TransitionResult {
        try checkOpen()
        let (committed, transition) = try engine.commit(id, at: clock.now())
        stopTransactionTimer()
        didTransition(transition)
        emitTransaction(committed)
        wakeWaiters()
        return TransitionResult(transition)
    }

    /// Aborts the open transaction `id`: the state stays, the history records
    /// the attempt (`cause: aborted`).
    ///
    /// - Throws: `.unknownTransaction`, `.transactionEnded`, `.gone`, `.shuttingDown`.
    @discardableResult
    func abort(transaction id: String) throws(MachineError) -> MachineTransaction {
        try checkOpen()
        return try endTransaction(id, as: .aborted)
    }

    /// The expiry timer of transaction `id` fired; stale once it ended.
    func transactionExpired(_ id: String) {
        guard lifecycle == .open else { return }
        _ = try? endTransaction(id, as: .expired)
    }

    /// Ends a transaction without a transition, then fires the state
    /// timeouts that fell due while it was open, then wakes every waiter once.
    private func endTransaction(_ id: String, as outcome: MachineTransaction.Status) throws(MachineError)
        -> MachineTransaction
    {
        let now = clock.now()
        let (ended, deferred) = try engine.end(id, as: outcome, at: now)
        stopTransactionTimer()
        emitTransaction(ended)
        for token in deferred {
            if let transition = engine.fire(timeout: token, at: now) { didTransition(transition) }
        }
        wakeWaiters()
        return ended
    }

    /// Transactions ended so far, by outcome.
    package var transactionCounts: TransactionCounts { engine.transactionCounts }

    /// The machine as it is now (also after `close()` or `shutdown()`).
    package func snapshot() -> MachineSnapshot {
        engine.snapshot(name: name, definitionName: definitionName)
    }

    /// How many `waitForVersion` calls are parked.
    var waitingCount: Int { waiters.count }

    /// Returns the snapshot as soon as the version differs from `version`:
    /// at once if it already does (or `deadline` has passed), otherwise at the
    /// next change (a transition, a transaction opened or ended) or at
    /// `deadline`, whichever comes first. A cancelled
    /// task gets the current snapshot back.
    ///
    /// - Throws: `.gone` if the machine is or gets deleted, `.shuttingDown` at shutdown.
    func waitForVersion(other version: Int64, until deadline: Timestamp) async throws(MachineError)
        -> MachineSnapshot
    {
        try await park(other: version, until: deadline).get()
    }

    /// `waitForVersion`'s answer, boxed, errors included: this frame and the
    /// caller's stay on the heap while the request waits, so they hold only a
    /// reference, not a snapshot.
    private func park(other version: Int64, until deadline: Timestamp) async -> WaitAnswer {
        if let early = earlyAnswer(other: version, until: deadline) { return early }
        let id = nextWaiterID
        nextWaiterID &+= 1
        return await parkCall {
            $0.register($1, id: id, other: version, until: deadline)
        } onCancel: {
            $0.resumeWaiter(id)
        }
    }

    /// The answer when there is nothing to wait for (closed, the version
    /// differs, the deadline passed, the task is cancelled), or nil.
    @inline(never)
    private func earlyAnswer(other version: Int64, until deadline: Timestamp) -> WaitAnswer? {
        if lifecycle != .open { return WaitAnswer(.failure(closedError)) }
        if engine.version != version || clock.now() >= deadline || Task.isCancelled {
            return WaitAnswer(.success(snapshot()))
        }
        return nil
    }

    /// Parks `call` unless there is nothing to wait for any more, checking
    /// again in the same isolated step, so a waiter never parks on a stale version.
    @inline(never)
    private func register(_ call: ParkedCall<WaitAnswer>, id: UInt64, other version: Int64, until deadline: Timestamp) {
        if let early = earlyAnswer(other: version, until: deadline) {
            call.answer(early)
            return
        }
        var call = call
        call.timer = clock.schedule(at: deadline) { [weak self] in
            self?.withIsolation { $0.resumeWaiter(id) }
        }
        waiters[id] = call
    }

    /// Deletes the machine: parked waiters get `.gone`, timers stop, and every
    /// later call throws `.gone`.
    package func close() {
        end(.closed, error: .gone)
        engine.releaseStorage()
    }

    /// Shutdown: parked waiters get `.shuttingDown`, timers stop, and later
    /// calls throw `.shuttingDown` (or `.gone` once closed).
    package func shutdown() {
        guard lifecycle == .open else { return }
        end(.shuttingDown, error: .shuttingDown)
    }

    /// A timeout timer fired. Stale timers (the state was left or re-entered,
    /// or the machine closed) and events not allowed from the current state do nothing.
    func timeoutFired(_ token: TimeoutToken) {
        guard lifecycle == .open, let transition = engine.fire(timeout: token, at: clock.now()) else { return }
        didTransition(transition)
        wakeWaiters()
    }

    /// A `transition` event, when someone listens.
    private func emitTransition(_ transition: MachineTransition) {
        guard let events, events.isRecording else { return }
        events.emit(
            ResourceEvent.Draft(kind: "machine", name: name, type: "transition", subject: .transition(transition)))
    }

    /// The one place transaction events are made: `transaction-opened`,
    /// `transaction-committed`, or `transaction-aborted` (aborted or expired,
    /// as `status` says), when someone listens.
    private func emitTransaction(_ transaction: MachineTransaction) {
        guard let events, events.isRecording else { return }
        let type: String
        switch transaction.status {
        case .open: type = "transaction-opened"
        case .committed: type = "transaction-committed"
        case .aborted, .expired: type = "transaction-aborted"
        }
        events.emit(ResourceEvent.Draft(kind: "machine", name: name, type: type, subject: .transaction(transaction)))
    }

    private func checkOpen() throws(MachineError) {
        if lifecycle != .open { throw closedError }
    }

    /// What a call gets once the machine is closed or shutting down.
    private var closedError: MachineError {
        lifecycle == .closed ? .gone : .shuttingDown
    }

    /// After every transition, whatever made it (an event, a commit, a
    /// timeout): its event, then the old state's timers stop (a
    /// self-transition included) and the new entry's start.
    private func didTransition(_ transition: MachineTransition) {
        emitTransition(transition)
        cancelTimeouts()
        scheduleTimeouts()
    }

    /// After every change of the version: every waiter sees the new one.
    private func wakeWaiters() {
        guard !waiters.isEmpty else { return }
        // One answer for all of them.
        let answer = WaitAnswer(.success(snapshot()))
        let woken = waiters
        waiters = [:]
        for call in woken.values { call.answer(answer) }
    }

    private func scheduleTimeouts() {
        timers = engine.plannedTimeouts().map { plan in
            clock.schedule(at: plan.deadline) { [weak self] in
                self?.withIsolation { $0.timeoutFired(plan.token) }
            }
        }
    }

    private func cancelTimeouts() {
        for timer in timers { timer.cancel() }
        timers = []
    }

    private func stopTransactionTimer() {
        transactionTimer?.cancel()
        transactionTimer = nil
    }

    /// Answers one waiter with the current snapshot (its deadline passed or its task was cancelled).
    private func resumeWaiter(_ id: UInt64) {
        guard let call = waiters.removeValue(forKey: id) else { return }
        call.answer(WaitAnswer(.success(snapshot())))
    }

    private func end(_ next: Lifecycle, error: MachineError) {
        lifecycle = next
        cancelTimeouts()
        stopTransactionTimer()
        let answer = WaitAnswer(.failure(error))
        let parked = waiters
        waiters = [:]
        for call in parked.values { call.answer(answer) }
    }
}
