/// One queue: its engine, its clock, its long-poll waiters and one timer
/// (the shared `EngineHost` machinery).
///
/// Every operation is synchronous and isolated: it applies the clock's `now`,
/// wakes the waiters of every visitor whose status changed (once, with the
/// state after the whole operation), and re-arms the single timer at the
/// engine's next deadline. The actor runs on a `ResourceExecutor`, so the
/// HTTP layer can call these operations from its own thread through
/// `withIsolation { }` without a task; only the waits are async.
///
/// Lifecycle: `close()` (the queue was deleted) answers parked waiters with
/// `QueueError.gone` and makes every later operation throw it;
/// `shutdown()` answers parked waiters with `QueueError.shuttingDown` and
/// refuses new waits, while plain operations keep working so in-flight
/// requests can finish.
package actor VisitorQueue: EngineHost {
    /// The executor the actor runs on; `withIsolation` takes its lock.
    package nonisolated let executor: ResourceExecutor
    /// Runs the actor's jobs on `executor`.
    package nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    /// The queue's name.
    package nonisolated let name: String

    let clock: any UsherClock
    /// Where state changes are emitted (nil: nowhere).
    package nonisolated let events: EventLog?
    static let eventKind = "queue"
    /// Events: `enqueued` for a visitor posted just now that has to wait (or
    /// is delayed), else its new status (`waiting`, `granted`, `completed`, …).
    func event(for v: VisitorView) -> (type: String, subject: EventSubject) {
        let posted = v.status.isWaiting && v.enqueuedAt.micros == engine.operationTime
        return (posted ? "enqueued" : v.status.rawValue, .visitor(v))
    }
    var engine: QueueEngine
    var host = HostState()

    /// A new queue whose fences start at the clock's current time in µs.
    package init(
        name: String, config: QueueConfig, clock: any UsherClock, events: EventLog? = nil,
        budget: StorageBudget = StorageBudget()
    ) {
        self.name = name
        self.events = events
        self.clock = clock
        self.executor = ResourceExecutor(label: "usher.queue.\(name)")
        self.engine = QueueEngine(name: name, config: config, createdAt: clock.now(), budget: budget)
    }

    deinit { host.timer?.cancel() }

    /// A queue has nothing of its own to update when visitors change.
    func engineDidChange(_ ids: [String]) {}

    /// The current config.
    package var config: QueueConfig { engine.config }

    /// Counts and totals, after applying `now` (the last ones once closed).
    package var counts: QueueCounts {
        if host.phase != .closed {
            engine.advance(to: clock.now())
            afterOperation()
        }
        return engine.counts
    }

    /// When the oldest visitor still waiting entered the line (for metrics).
    package var oldestWaitingSince: Timestamp? { engine.oldestWaitingSince }

    /// `POST …/visitors`: see `QueueEngine.enqueue`.
    package func enqueue(_ r: VisitorRequest) throws(QueueError) -> (view: VisitorView, created: Bool) {
        try perform { (e, now) throws(QueueError) in try e.enqueue(r, now: now) }
    }

    /// `POST …/visitors?on_timeout=cancel` without a wait (Redisson
    /// `tryLock()`): as `enqueue`, and a visitor not granted at once is
    /// cancelled (reason `timeout`) in the same step, so its only event is
    /// the cancellation.
    func enqueueOrTimeOut(_ r: VisitorRequest) throws(QueueError) -> (view: VisitorView, created: Bool) {
        try perform { (e, now) throws(QueueError) in try e.enqueueOrTimeOut(r, now: now) }
    }

    /// The wait of a try-acquire on `id` ended: see `QueueEngine.timeOut`.
    func timeOut(id: String) throws(QueueError) -> VisitorView {
        try perform { (e, now) throws(QueueError) in try e.timeOut(id: id, now: now) }
    }

    /// `POST …/complete`.
    package func complete(id: String) throws(QueueError) -> VisitorView {
        try perform { (e, now) throws(QueueError) in try e.complete(id: id, now: now) }
    }

    /// `POST …/extend`.
    func extend(id: String, holdSeconds: Double?) throws(QueueError) -> VisitorView {
        try perform { (e, now) throws(QueueError) in try e.extend(id: id, holdSeconds: holdSeconds, now: now) }
    }

    /// `DELETE …/visitors/{id}`.
    package func remove(id: String) throws(QueueError) -> VisitorView {
        try perform { (e, now) throws(QueueError) in try e.remove(id: id, byClient: true, now: now) }
    }

    /// The answer that granted `id` its grant `fence` never reached its
    /// client: the visitor is `released`, reason `undelivered`, and its slot
    /// passes on. Nil, changing nothing, when it no longer holds that grant.
    @discardableResult
    func undoGrant(id: String, fence: Int64) throws(QueueError) -> VisitorView? {
        try perform { (e, now) in e.undoGrant(id: id, fence: fence, now: now) }
    }

    /// `GET …/visitors/{id}`.
    package func visitor(id: String) throws(QueueError) -> VisitorView {
        try perform { (e, now) throws(QueueError) in try e.visitor(id: id, now: now) }
    }

    /// `GET /v1/queues/{q}`: at most `limit` holders and waiting visitors,
    /// resuming after `cursor`.
    package func state(limit: Int, after cursor: QueueCursor? = nil) throws(QueueError) -> QueueState {
        try perform { (e, now) in e.state(limit: limit, after: cursor, now: now) }
    }

    /// `PATCH`: the config after the change.
    package func apply(_ patch: QueuePatch) throws(QueueError) -> QueueConfig {
        let before = engine.config
        let after = try perform { (e, now) in e.apply(patch, now: now) }
        let changes = QueueConfig.changes(from: before, to: after)
        events?.emitUpdated(kind: Self.eventKind, name: name, changes)
        return after
    }

    /// The queue was deleted: parked waiters get `gone`, timers stop, and
    /// every later operation throws `gone`.
    package func close() { closeHost() }

    /// The server is stopping: parked waiters get `shuttingDown`, and so do new waits.
    package func shutdown() { shutdownHost() }

    /// Parked long-polls (for tests and metrics).
    var waiterCount: Int { parkedCount }
}
