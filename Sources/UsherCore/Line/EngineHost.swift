/// Where a manager built on the queue engine is in its life.
enum HostPhase: Sendable {
    /// Serving.
    case open
    /// The server is stopping: plain operations still work, waits are refused.
    case shuttingDown
    /// The resource was deleted: everything throws `gone`.
    case closed
}

/// The actor side of a `QueueEngine`, shared by every manager that runs on
/// it (`VisitorQueue`, `WindowSlot`, `LeasePool`), so that none of them
/// copies it: the operation frame (apply the clock's `now`, run one engine
/// operation, wake the long-polls whose condition now holds, each once, with
/// the state after the whole operation), one clock timer at the engine's
/// next deadline, and close/shutdown.
///
/// A host adds its own vocabulary on top, and may react to what an operation
/// changed before any waiter sees it (`engineDidChange`: a pool hands the
/// freed element to the fetcher granted in the same step).
protocol EngineHost: LockIsolatedActor {
    /// The source of `now` and of the timers.
    var clock: any UsherClock { get }
    /// The engine: all of the resource's state except the host's own.
    var engine: QueueEngine { get set }
    /// Phase, timer and parked long-polls.
    var host: HostState { get set }
    /// Called after every engine operation (also a timer's) with the ids
    /// whose status changed, before waiters are woken and the timer re-armed.
    func engineDidChange(_ ids: [String])
    /// The resource's name (in events).
    var name: String { get }
    /// Where state changes are emitted (nil: nowhere).
    var events: EventLog? { get }
    /// The event kind: `queue`, `window` or `pool`.
    static var eventKind: String { get }
    /// The event for a visitor that changed: its type in the kind's words
    /// (`granted` is a pool's `leased`, a window's `shown`) and the kind's object.
    func event(for v: VisitorView) -> (type: String, subject: EventSubject)
    /// Takes back the visitor `id` whose waiting client hung up (see
    /// `park`'s `withdrawing`); by default it is cancelled, reason `disconnected`.
    static func withdrawWaiting(_ id: String, in engine: inout QueueEngine, now: Timestamp) throws(QueueError)
}

/// The state every `EngineHost` keeps besides its engine.
struct HostState: Sendable {
    var phase = HostPhase.open
    /// The one timer for the engine's deadlines, and when it is set for.
    var timer: (any ScheduledTimer)?
    var timerDeadline: Timestamp?
    /// Parked long-polls by subject, and the subject of each token.
    var waiters: [WaitSubject: [Waiter]] = [:]
    var subjects: [UInt64: WaitSubject] = [:]
    var nextToken: UInt64 = 0
}

extension EngineHost {
    static func withdrawWaiting(_ id: String, in engine: inout QueueEngine, now: Timestamp) throws(QueueError) {
        _ = try engine.disconnect(id: id, now: now)
    }

    /// Runs one engine operation at `now`, then reacts, wakes and re-arms,
    /// also when it throws (applying `now` may have changed things before the
    /// operation failed).
    func perform<T>(_ body: (inout QueueEngine, Timestamp) throws(QueueError) -> T) throws(QueueError) -> T {
        guard host.phase != .closed else { throw .gone }
        let result: Result<T, QueueError>
        do {
            result = .success(try body(&engine, clock.now()))
        } catch {
            result = .failure(error)
        }
        afterOperation()
        return try result.get()
    }

    /// Applies everything due by now (deadlines the timer has not run yet).
    func catchUp() throws(QueueError) {
        try perform { (e, now) in e.advance(to: now) }
    }

    func afterOperation() {
        let changes = engine.drainChanges()
        if !changes.isEmpty {
            engineDidChange(changes)
            emitEvents(changes)
        }
        wakeWaiters(changes)
        rearm()
    }

    /// Emits one event per changed visitor, when someone listens; a visitor
    /// withdrawn from the line (a pool's fetch that gave up) is `cancelled`,
    /// shown as it last was.
    func emitEvents(_ ids: [String]) {
        guard let events, events.isRecording else { return }
        for id in ids {
            if let v = engine.currentView(id: id) {
                let (type, subject) = event(for: v)
                events.emit(ResourceEvent.Draft(kind: Self.eventKind, name: name, type: type, subject: subject))
            } else if let v = engine.withdrawnViews[id] {
                let subject = event(for: v).subject
                events.emit(ResourceEvent.Draft(kind: Self.eventKind, name: name, type: "cancelled", subject: subject))
            }
        }
    }

    /// Keeps one timer at or before the engine's next deadline. An armed
    /// timer that is earlier than needed stays (it fires, finds nothing due,
    /// and re-arms), which saves a cancel and a schedule on most grants and
    /// completes.
    func rearm() {
        guard host.phase != .closed, let next = engine.nextDeadline else { return }
        if let armed = host.timerDeadline, armed <= next { return }
        host.timer?.cancel()
        host.timerDeadline = next
        host.timer = clock.schedule(at: next) { [weak self] in
            self?.withIsolation { $0.tick() }
        }
    }

    /// The timer fired: apply what is due. (A timer that fires early, or a
    /// cancelled one that already started, just re-arms.)
    func tick() {
        host.timer?.cancel()
        host.timer = nil
        host.timerDeadline = nil
        guard host.phase != .closed else { return }
        engine.advance(to: clock.now())
        afterOperation()
    }

    /// The resource was deleted: its holders end (`released`, reason
    /// `deleted`: an event each, when someone listens), parked waiters get
    /// `gone`, the timer stops, and every later operation throws `gone`.
    func closeHost() {
        guard host.phase != .closed else { return }
        if events?.isRecording == true {
            engine.releaseHoldersForDeletion(now: clock.now())
            emitEvents(engine.drainChanges())
        }
        host.phase = .closed
        engine.releaseStorage()
        host.timer?.cancel()
        host.timer = nil
        host.timerDeadline = nil
        failAllWaiters(.gone)
    }

    /// The server is stopping: parked waiters get `shuttingDown`, and so do new waits.
    func shutdownHost() {
        guard host.phase == .open else { return }
        host.phase = .shuttingDown
        failAllWaiters(.shuttingDown)
    }
}
