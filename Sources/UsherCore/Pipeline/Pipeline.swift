/// A bounded producer-consumer buffer with acknowledgement, redelivery,
/// filters and a pull source (docs/api.md, Pipelines; seed 002).
///
/// The actor owns a `PipelineEngine`, the clock, one timer at the engine's
/// next deadline (or the source's next retry), the parked consumers and
/// producers, and the source pump. After every operation it settles: parked
/// producers get room first (FIFO), then parked consumers get items (FIFO),
/// then the source is pulled if it runs low, then the timer is re-armed.
///
/// It runs on its own `ResourceExecutor`: async callers `await` it, and an
/// HTTP thread that needs no waiting runs isolated to it with
/// `withIsolation { }`.
package actor Pipeline: LockIsolatedActor {
    /// The executor the actor's jobs run on, also taken by `withIsolation`.
    package nonisolated let executor: ResourceExecutor
    /// Runs the actor's jobs on `executor`.
    package nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// The pipeline's name.
    package nonisolated let name: String
    /// Parked consumers, and parked producers, allowed at once; beyond it a
    /// consumer gets `[]` and a producer `.full` at once.
    static let maxWaiters = 10_000

    enum Lifecycle { case open, closed, shuttingDown }

    /// What a parked `takeWaiting` gets.
    typealias TakeAnswer = WaitAnswer<[PipelineDelivery], PipelineError>
    /// What a parked `pushWaiting` gets.
    typealias PushAnswer = WaitAnswer<PipelinePushResult, PipelineError>
    /// What a parked `waitForChange` gets.
    typealias ItemAnswer = WaitAnswer<PipelineItem, PipelineError>

    /// A parked `takeWaiting`.
    struct Consumer {
        let call: ParkedCall<TakeAnswer>
        let max: Int
        let ackSeconds: Double?
    }

    /// A parked `pushWaiting`.
    struct Producer {
        let call: ParkedCall<PushAnswer>
        let request: PipelinePushRequest
    }

    /// The source and its pull state.
    struct SourcePump {
        var status: PipelineSourceStatus
        var reader: (any PipelineSourceReader)?
        /// A pull is running (one at a time).
        var pulling = false
        /// The next back-off, in seconds (0 until a pull comes back empty or fails).
        var backoff = 0.0
        /// A pulled payload that found the pipeline full; pushed when room appears.
        var pending: JSONValue?
        /// `status.lastError` is a source failure (not a skipped record): the next good pull clears it.
        var failing = false
    }

    /// The first back-off after an empty or failed pull, and the longest.
    static let backoffRange = 0.1...5.0

    let clock: any UsherClock
    /// Where state changes are emitted (nil: nowhere).
    package nonisolated let events: EventLog?
    var engine: PipelineEngine
    var lifecycle = Lifecycle.open
    /// The one timer, and the deadline it is armed for.
    var timer: (any ScheduledTimer)?
    var timerDeadline: Timestamp?
    var consumers = WaitLine<Consumer>()
    var producers = WaitLine<Producer>()
    var itemWatchers = ItemWatchers()
    var source: SourcePump?
    let sourceFactory: SourceReaderFactory?
    var pullTask: Task<Void, Never>?

    /// Creates an empty pipeline whose fences start at the clock's time in
    /// microseconds, and starts pulling its source (if any) through `sourceFactory`.
    package init(
        name: String, config: PipelineConfig, clock: any UsherClock, sourceFactory: SourceReaderFactory? = nil,
        events: EventLog? = nil, budget: StorageBudget = StorageBudget(), maxTakeBytes: Int = .max
    ) {
        executor = ResourceExecutor(label: "usher.pipeline.\(name)")
        self.name = name
        self.events = events
        self.clock = clock
        self.sourceFactory = sourceFactory
        engine = PipelineEngine(config: config, createdAt: clock.now(), budget: budget)
        engine.maxTakeBytes = maxTakeBytes
        source = config.source.map { SourcePump(status: PipelineSourceStatus(config: $0)) }
        withIsolation { $0.settle() }
    }

    deinit {
        timer?.cancel()
        pullTask?.cancel()
    }

    // MARK: - Operations that never wait

    /// Adds an item (see `PipelineEngine.push`).
    ///
    /// - Throws: `.full` when there is no room; `.invalid`; `.gone`; `.shuttingDown`.
    package func push(_ request: PipelinePushRequest) throws(PipelineError) -> PipelinePushResult {
        try checkOpen()
        defer { settle() }
        return emitPushed(try engine.push(request, now: clock.now()))
    }

    /// Adds every item or none (see `PipelineEngine.pushBatch`).
    func pushBatch(_ requests: [PipelinePushRequest]) throws(PipelineError) -> [PipelinePushResult] {
        try checkOpen()
        defer { settle() }
        return try engine.pushBatch(requests, now: clock.now()).map(emitPushed)
    }

    /// Hands out what can be handed out now; `[]` when nothing can.
    package func take(max: Int, ackSeconds: Double? = nil) throws(PipelineError) -> [PipelineDelivery] {
        try checkOpen()
        defer { settle() }
        return emitDelivered(try engine.take(max: max, ackSeconds: ackSeconds, now: clock.now()))
    }

    /// Finishes an in-flight item.
    ///
    /// - Throws: `.notFound`; `.notInFlight(current:)`.
    @discardableResult
    package func consume(_ id: String, fence: Int64? = nil) throws(PipelineError) -> PipelineItem {
        try checkOpen()
        defer { settle() }
        return emit("consumed", try engine.consume(id, fence: fence, now: clock.now()))
    }

    /// Puts an in-flight item back at the front (after `delaySeconds`), or on
    /// the dead list when it has had `max_deliveries` hand-outs.
    @discardableResult
    func release(_ id: String, delaySeconds: Double? = nil, fence: Int64? = nil) throws(PipelineError)
        -> PipelineItem
    {
        try checkOpen()
        defer { settle() }
        let item = try engine.release(id, delaySeconds: delaySeconds, fence: fence, now: clock.now())
        return emit(item.status == .dead ? "dead-lettered" : "released", item)
    }

    /// Moves an in-flight item's ack deadline later (never earlier; see
    /// `PipelineEngine.extend`) and emits `extended`.
    ///
    /// - Throws: `.notFound`; `.notInFlight(current:)`; `.invalid`.
    @discardableResult
    func extend(_ id: String, ackSeconds: Double? = nil, fence: Int64? = nil) throws(PipelineError)
        -> PipelineItem
    {
        try checkOpen()
        defer { settle() }
        return emit("extended", try engine.extend(id, ackSeconds: ackSeconds, fence: fence, now: clock.now()))
    }

    /// The answer that handed out `deliveries` never reached its consumer:
    /// each item still in flight under its fence goes back to the front
    /// without counting the hand-out (`released` events, reason
    /// `undelivered`); returns those items.
    @discardableResult
    func undeliver(_ deliveries: [(id: String, fence: Int64)]) -> [PipelineItem] {
        guard lifecycle == .open else { return [] }
        defer { settle() }
        let now = clock.now()
        return deliveries.compactMap { d in
            engine.undeliver(d.id, fence: d.fence, now: now).map { emit("released", $0, reason: "undelivered") }
        }
    }

    /// Removes a ready, delayed or dead item; a remembered finished item is
    /// returned as it is, with no event.
    ///
    /// - Throws: `.notFound`; `.inFlight`.
    @discardableResult
    func cancel(_ id: String) throws(PipelineError) -> PipelineItem {
        try checkOpen()
        defer { settle() }
        if let item = engine.item(id), item.status.isFinished { return item }
        return emit("cancelled", try engine.cancel(id, now: clock.now()))
    }

    /// The item with this id: live, dead, or remembered as finished.
    package func item(_ id: String) throws(PipelineError) -> PipelineItem {
        try checkOpen()
        settle()
        guard let item = engine.item(id) else { throw .notFound(id) }
        return item
    }

    /// The oldest `limit` dead items, oldest first.
    package func dead(limit: Int = 100) -> [PipelineItem] {
        engine.deadItems(limit: limit)
    }

    /// Moves dead items back, oldest first, while there is room; how many moved.
    func redrive() throws(PipelineError) -> Int {
        try checkOpen()
        defer { settle() }
        return engine.redrive(now: clock.now())
    }

    /// The state, with the first `limit` ready items after `cursor` (also
    /// after `close()`).
    package func state(limit: Int = 100, after cursor: PipelineCursor? = nil) -> PipelineSnapshot {
        settle()
        let page = engine.readyPage(limit: limit, after: cursor)
        var snapshot = PipelineSnapshot(
            name: name, config: engine.config, capacity: engine.config.capacity, ready: engine.readyCount,
            inFlight: engine.inFlightCount, delayed: engine.delayedCount, dead: engine.deadCount, fence: engine.fence,
            waitingConsumers: consumers.count, waitingProducers: producers.count, filters: engine.filters,
            items: page.items, counts: engine.counts, source: source?.status)
        snapshot.paused = engine.paused
        snapshot.cursors = page.cursors
        snapshot.more = page.more
        return snapshot
    }

    /// Up to `limit` dead items after `cursor`, oldest first, each with its
    /// cursor, and whether more follow.
    func deadPage(limit: Int, after cursor: PipelineCursor?) -> (
        items: [PipelineItem], cursors: [String], more: Bool
    ) {
        engine.deadPage(limit: limit, after: cursor)
    }

    /// The config: creation filters, patches applied. `PUT` compares against it.
    package var config: PipelineConfig { engine.config }

    /// Changes the mutable config and `paused`; takes effect at once (a
    /// larger capacity lets parked producers in, resuming wakes parked
    /// consumers) and emits `updated` with what changed. Returns the new config.
    @discardableResult
    package func apply(_ patch: PipelinePatch) throws(PipelineError) -> PipelineConfig {
        try checkOpen()
        defer { settle() }
        let (before, wasPaused) = (engine.config, engine.paused)
        engine.apply(patch, now: clock.now())
        emitUpdated(from: before, paused: wasPaused)
        return engine.config
    }

    /// Adds or replaces a filter; true when it is new (201 rather than 200).
    @discardableResult
    func putFilter(name: String, _ filter: PipelineFilter) throws(PipelineError) -> Bool {
        try checkOpen()
        return try engine.putFilter(name: name, filter)
    }

    /// Removes a filter.
    ///
    /// - Throws: `.notFound(name)`.
    func removeFilter(name: String) throws(PipelineError) {
        try checkOpen()
        try engine.removeFilter(name: name)
    }

    /// Parked consumers.
    package var waitingConsumers: Int { consumers.count }
    /// Parked producers.
    package var waitingProducers: Int { producers.count }

    // MARK: - Settling

    func checkOpen() throws(PipelineError) {
        switch lifecycle {
        case .open: return
        case .closed: throw .gone
        case .shuttingDown: throw .shuttingDown
        }
    }

    /// Applies passed deadlines, serves parked producers then consumers while
    /// they can make progress, pumps the source, and re-arms the timer.
    func settle() {
        guard lifecycle == .open else { return }
        let now = clock.now()
        let before = events?.isRecording == true ? engine.counts : nil
        engine.expire(now: now)
        if let before { emitExpiries(since: before) }
        var changes = engine.takeChanges()
        while !changes.isEmpty {
            if changes.contains(.roomAvailable) { serveProducers(now: now) }
            if changes.contains(.itemsAvailable) { serveConsumers(now: now) }
            changes = engine.takeChanges()
        }
        wakeItemWatchers()
        pumpSource(now: now)
        rearm(now: now)
    }

    private func serveProducers(now: Timestamp) {
        while engine.hasRoom(), let (id, _) = producers.first() {
            guard let p = producers.remove(id) else { continue }
            let result: Result<PipelinePushResult, PipelineError>
            do throws(PipelineError) {
                result = .success(emitPushed(try engine.push(p.request, now: now)))
            } catch {
                result = .failure(error)
            }
            p.call.answer(PushAnswer(result))
        }
    }

    private func serveConsumers(now: Timestamp) {
        while engine.canDeliver, let (id, c) = consumers.first() {
            let result: Result<[PipelineDelivery], PipelineError>
            do throws(PipelineError) {
                let items = try engine.take(max: c.max, ackSeconds: c.ackSeconds, now: now)
                // Every ready item was filtered out: stay parked.
                if items.isEmpty { return }
                result = .success(emitDelivered(items))
            } catch {
                result = .failure(error)
            }
            consumers.remove(id)
            c.call.answer(TakeAnswer(result))
        }
    }

    /// Keeps one timer at the earliest of the engine's next deadline and the
    /// source's next retry. An armed timer that is earlier than needed stays
    /// (it fires, finds nothing, and re-arms), which saves a cancel and a
    /// schedule on most operations.
    private func rearm(now: Timestamp) {
        var next = engine.nextDeadline()
        if let retry = sourceRetryAt(), next.map({ retry < $0 }) ?? true { next = retry }
        guard let next else { return }
        if let armed = timerDeadline, armed <= next { return }
        timer?.cancel()
        timerDeadline = next
        timer = clock.schedule(at: next) { [weak self] in
            self?.withIsolation { $0.tick() }
        }
    }

    /// The one timer went off.
    func tick() {
        timer = nil
        timerDeadline = nil
        settle()
    }
}

// MARK: - Events

extension Pipeline {
    static let eventKind = "pipeline"

    /// Emits `type` for `item` when someone listens, with `reason` after its
    /// members when given; returns `item`.
    func emit(_ type: String, _ item: PipelineItem, reason: String? = nil) -> PipelineItem {
        if let events, events.isRecording {
            events.emit(
                ResourceEvent.Draft(
                    kind: Self.eventKind, name: name, type: type, subject: .pipelineItem(item, reason: reason)))
        }
        return item
    }

    /// `updated` with the new value of each config field and of `paused`
    /// that differs from before a `PATCH`; nothing when none does.
    func emitUpdated(from before: PipelineConfig, paused wasPaused: Bool) {
        guard let events, events.isRecording else { return }
        let changes = Self.configChanges(from: before, paused: wasPaused, to: engine.config, paused: engine.paused)
        events.emitUpdated(kind: Self.eventKind, name: name, changes)
    }

    /// What an `updated` event lists: each config field and `paused` that changed, with its new value.
    package static func configChanges(
        from before: PipelineConfig, paused wasPaused: Bool, to after: PipelineConfig, paused: Bool
    ) -> ConfigChanges {
        var changes = ConfigChanges()
        changes.compare("capacity", before.capacity, after.capacity, JSONValue.int)
        changes.compare("max_in_flight", before.maxInFlight, after.maxInFlight, JSONValue.int)
        changes.compare("ack_seconds", before.ackSeconds, after.ackSeconds, ConfigChanges.seconds)
        changes.compare("max_deliveries", before.maxDeliveries, after.maxDeliveries, JSONValue.int)
        changes.compare("history", before.history, after.history, JSONValue.int)
        changes.compare("dedup_seconds", before.dedupSeconds, after.dedupSeconds, ConfigChanges.seconds)
        changes.compare("paused", wasPaused, paused, JSONValue.bool)
        return changes
    }

    /// `pushed` for a push that added an item (not one whose id was there).
    func emitPushed(_ result: PipelinePushResult) -> PipelinePushResult {
        if result.created { _ = emit("pushed", result.item) }
        return result
    }

    /// `delivered` for each hand-out.
    func emitDelivered(_ deliveries: [PipelineDelivery]) -> [PipelineDelivery] {
        if let events, events.isRecording {
            for d in deliveries {
                events.emit(
                    ResourceEvent.Draft(kind: Self.eventKind, name: name, type: "delivered", subject: .delivery(d)))
            }
        }
        return deliveries
    }

    /// Expiries the clock caused (ack deadlines that ran out): one
    /// `redelivered` / `dead-lettered` event carrying the count.
    func emitExpiries(since before: PipelineCounts) {
        guard let events else { return }
        let after = engine.counts
        for (type, n) in [
            ("redelivered", after.redeliveredTotal - before.redeliveredTotal),
            ("dead-lettered", after.deadTotal - before.deadTotal),
        ] where n > 0 {
            events.emit(
                ResourceEvent.Draft(kind: Self.eventKind, name: name, type: type, subject: .count(n)))
        }
    }
}
