/// One window (docs/api.md, Windows; the seed's alert-window manager): one item shown at a
/// time, the rest queued behind it.
///
/// A window is a queue with capacity 1 in its own words, and runs on the
/// queue engine rather than a copy of it: `show` enqueues a visitor, the
/// visitor holding the one slot is the item shown, `dismiss` frees the slot
/// and the engine shows the next item in the same step. So ordering
/// (priority, then arrival), dedup by `key`, delays, `max_waiting`, fences
/// and counts are the queue's; `display_seconds` is the hold, and its expiry
/// is the auto-dismiss. One difference is the engine's `.ownOverrides` hold
/// policy: an item's own `display_seconds` replaces the window's, and 0 pins
/// it until dismissed (the login screen that blocks every alert).
///
/// The actor, its timer and its long-polls are the shared `EngineHost`; the
/// showing long-poll parks on the engine's first holder.
package actor WindowSlot: EngineHost {
    /// Finished items kept visible (and their client ids remembered).
    package static let history = 1000

    /// The executor the actor runs on; `withIsolation` takes its lock.
    package nonisolated let executor: ResourceExecutor
    /// Runs the actor's jobs on `executor`.
    package nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    /// The window's name.
    package nonisolated let name: String

    let clock: any UsherClock
    /// Where state changes are emitted (nil: nowhere).
    package nonisolated let events: EventLog?
    package static let eventKind = "window"
    /// Events carry the item; their type is its new status (`queued`,
    /// `dismissed`, `expired`, `merged`), `shown` when it is showing.
    func event(for v: VisitorView) -> (type: String, subject: EventSubject) {
        let item = item(v)
        return (item.status == .showing ? "shown" : item.status.rawValue, .windowItem(item))
    }
    var engine: QueueEngine
    var host = HostState()
    /// The config in the window's words (the engine holds it in the queue's).
    package private(set) var config: WindowConfig

    /// A new, empty window whose fences start at the clock's current time in µs.
    package init(
        name: String, config: WindowConfig, clock: any UsherClock, events: EventLog? = nil,
        budget: StorageBudget = StorageBudget()
    ) {
        self.name = name
        self.events = events
        self.clock = clock
        self.config = config
        self.executor = ResourceExecutor(label: "usher.window.\(name)")
        self.engine = QueueEngine(
            name: name, config: config.queueConfig, createdAt: clock.now(), holdPolicy: .ownOverrides,
            budget: budget)
    }

    deinit { host.timer?.cancel() }

    /// A window keeps nothing beside the engine.
    func engineDidChange(_ ids: [String]) {}

    /// Counts and totals, after applying `now` (the last ones once closed).
    package var counts: WindowCounts {
        if host.phase != .closed {
            engine.advance(to: clock.now())
            afterOperation()
        }
        return WindowCounts(engine.counts)
    }

    /// `POST …/show`: shown at once when nothing is, else queued (or delayed,
    /// or merged into a queued item with the same key). An `id` that already
    /// exists returns that item with `created == false`.
    package func show(_ r: ShowRequest) throws(WindowError) -> (item: WindowItem, created: Bool) {
        let (view, created) = try run(r.id) { (e, now) throws(QueueError) in try e.enqueue(r.visitorRequest, now: now) }
        return (item(view), created)
    }

    /// `POST …/dismiss`: without `id`, the item shown (409 `nothing_showing`
    /// when there is none); with `id`, that item, queued or shown; an item
    /// that already finished is returned as it is. The next item is shown in
    /// the same step.
    package func dismiss(id: String? = nil) throws(WindowError) -> Dismissal {
        let dismissed = try run(id) { (e, now) throws(QueueError) -> VisitorView? in
            if let id { return try e.remove(id: id, now: now) }
            return e.removeFirstHolder(now: now)
        }
        guard let dismissed else { throw .nothingShowing }
        return Dismissal(dismissed: item(dismissed), showing: engine.firstHolderView.map(item))
    }

    /// The item shown now, or nil.
    package func showing() throws(WindowError) -> WindowItem? {
        try run(nil) { (e, now) in
            e.advance(to: now)
            return e.firstHolderView
        }.map(item)
    }

    /// One item, live or remembered.
    package func item(id: String) throws(WindowError) -> WindowItem {
        item(try run(id) { (e, now) throws(QueueError) in try e.visitor(id: id, now: now) })
    }

    /// `GET /v1/windows/{w}`: the item shown and the first `limit` queued
    /// after `cursor` (a waiting-line cursor).
    package func state(limit: Int, after cursor: QueueCursor? = nil) throws(WindowError) -> WindowState {
        // Before the first place in any line: the page starts at the front.
        let from = cursor ?? .waiting(priority: .max, seq: .min)
        let s = try run(nil) { (e, now) in e.state(limit: limit, after: from, now: now) }
        var state = WindowState(
            name: name, config: config, showing: engine.firstHolderView.map(item), queued: s.waiting.map(item),
            counts: WindowCounts(s.counts))
        state.cursors = s.cursors.map(\.text)
        state.more = s.more
        return state
    }

    /// `PATCH`: effective at once for what happens next (a new
    /// `display_seconds` applies to items shown from now on).
    package func apply(_ patch: WindowPatch) throws(WindowError) -> WindowConfig {
        _ = try run(nil) { (e, now) in e.apply(patch.queuePatch, now: now) }
        let before = config
        config = patch.applied(to: config)
        events?.emitUpdated(kind: Self.eventKind, name: name, WindowConfig.changes(from: before, to: config))
        return config
    }

    /// `GET …/showing?after=&wait=`: the item shown as soon as it is not
    /// `after` (at once if it already is not; without `after`, as soon as
    /// anything is shown), or what is shown at `deadline`. A dismiss and the
    /// showing of the next item are one step, so a waiter never sees the
    /// window empty in between.
    func waitForShowing(after: String?, until deadline: Timestamp) async throws(WindowError) -> WindowItem? {
        try await parkForShowing(after: after, until: deadline).item()
    }

    /// `waitForShowing`, boxed (see `ShowingWait`).
    func parkForShowing(after: String?, until deadline: Timestamp) async -> ShowingWait {
        ShowingWait(await park(.firstHolder, until: .holderDiffers(after), deadline: deadline), window: name)
    }

    /// `GET …/items/{id}?wait`: the item as soon as its status is not
    /// `status` (at once if it already differs, or is final), or as it is at
    /// `deadline`; as `VisitorQueue.parkForChange` does for a visitor.
    func parkForChange(id: String, from status: WindowItemStatus, until deadline: Timestamp) async -> ItemWait {
        // A finished item never changes again: any status differs from `delayed`, so it answers at once.
        let from = status.liveStatus ?? .delayed
        return ItemWait(await park(.visitor(id), until: .statusDiffers(from), deadline: deadline), id: id, window: name)
    }

    /// The window was deleted: parked waiters get `gone`, and so does every later call.
    package func close() { closeHost() }

    /// The server is stopping: parked waiters get `shuttingDown`, and so do new waits.
    package func shutdown() { shutdownHost() }

    /// Parked long-polls (for tests).
    var waiterCount: Int { parkedCount }

    // MARK: - Helpers

    func item(_ v: VisitorView) -> WindowItem { WindowItem(v, window: name) }

    /// One engine operation through the host's frame, its errors in the window's words.
    func run<T>(_ id: String?, _ body: (inout QueueEngine, Timestamp) throws(QueueError) -> T) throws(WindowError) -> T
    {
        do throws(QueueError) { return try perform(body) } catch { throw WindowError(error, item: id) }
    }
}

/// A finished long-poll on a window: the item shown then, or why there is none.
///
/// The route awaits this box, not the item, for the reason `VisitorWait`
/// gives: a parked frame that receives a large value holds a temporary for it.
package final class ShowingWait: Sendable {
    private let answer: QueueWaitAnswer
    private let window: String

    init(_ answer: QueueWaitAnswer, window: String) {
        self.answer = answer
        self.window = window
    }

    /// The item shown (nil: nothing); throws what ended the wait (`gone`, `shuttingDown`).
    @inline(never)
    package func item() throws(WindowError) -> WindowItem? {
        do throws(QueueError) {
            return try answer.get().map { WindowItem($0, window: window) }
        } catch {
            throw WindowError(error, item: nil)
        }
    }
}

/// A finished long-poll on one window item: the item, or why there is none
/// (boxed for the reason `VisitorWait` gives).
package final class ItemWait: Sendable {
    private let answer: QueueWaitAnswer
    private let id: String
    private let window: String

    init(_ answer: QueueWaitAnswer, id: String, window: String) {
        self.answer = answer
        self.id = id
        self.window = window
    }

    /// The item; throws what ended the wait (`notFound` when the item was
    /// forgotten meanwhile, `gone`, `shuttingDown`).
    @inline(never)
    package func item() throws(WindowError) -> WindowItem {
        do throws(QueueError) {
            return WindowItem(try answer.visitor(id), window: window)
        } catch {
            throw WindowError(error, item: id)
        }
    }
}
