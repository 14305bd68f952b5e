extension Pipeline {
    /// Takes items, waiting until `deadline` when there are none: parked
    /// consumers are served first come, first served, woken by anything that
    /// makes an item deliverable (a push, a release, a redelivery, a delay
    /// ending, a source pull, a consume freeing an in-flight slot). Returns
    /// `[]` at the deadline (the API answers 204), when the task is cancelled
    /// (also before it took anything: a consumer that hung up takes nothing),
    /// or at once when `maxWaiters` consumers are already parked.
    ///
    /// - Throws: `.invalid` for a bad `ackSeconds`; `.gone` if the pipeline is
    ///   or gets deleted; `.shuttingDown` at shutdown.
    func takeWaiting(max: Int, ackSeconds: Double? = nil, until deadline: Timestamp) async throws(PipelineError)
        -> [PipelineDelivery]
    {
        try checkOpen()
        if Task.isCancelled { return [] }
        let now = clock.now()
        let items = try engine.take(max: max, ackSeconds: ackSeconds, now: now)
        if !items.isEmpty || max <= 0 || now >= deadline || consumers.count >= Self.maxWaiters {
            settle()
            return emitDelivered(items)
        }
        let id = consumers.reserveID()
        return try await parkCall {
            $0.registerConsumer($1, id: id, max: max, ackSeconds: ackSeconds, until: deadline)
        } onCancel: {
            $0.consumerLeft(id)
        }.get()
    }

    /// Parks a consumer (its task is not cancelled yet), then settles: the
    /// take before it may have dropped filtered items and let a producer in,
    /// whose item is the consumer's.
    private func registerConsumer(
        _ call: ParkedCall<TakeAnswer>, id: UInt64, max: Int, ackSeconds: Double?, until deadline: Timestamp
    ) {
        if Task.isCancelled {
            call.answer(TakeAnswer(.success([])))
            settle()
            return
        }
        var call = call
        call.timer = clock.schedule(at: deadline) { [weak self] in
            self?.withIsolation { $0.consumerLeft(id) }
        }
        consumers.insert(Consumer(call: call, max: max, ackSeconds: ackSeconds), id: id)
        settle()
    }

    /// Pushes an item, waiting until `deadline` for room (back-pressure);
    /// parked producers get room first come, first served.
    ///
    /// - Throws: `.full` at the deadline, when the task is cancelled (also
    ///   before it pushed: a producer that hung up pushes nothing), or at once
    ///   when `maxWaiters` producers are already parked; `.invalid`; `.gone`;
    ///   `.shuttingDown`.
    func pushWaiting(_ request: PipelinePushRequest, until deadline: Timestamp) async throws(PipelineError)
        -> PipelinePushResult
    {
        try checkOpen()
        if Task.isCancelled { throw .full(retryAfterSeconds: 1) }
        do throws(PipelineError) {
            defer { settle() }
            return emitPushed(try engine.push(request, now: clock.now()))
        } catch .full {
            guard clock.now() < deadline, producers.count < Self.maxWaiters else { throw .full(retryAfterSeconds: 1) }
        }
        let id = producers.reserveID()
        return try await parkCall {
            $0.registerProducer($1, id: id, request: request, until: deadline)
        } onCancel: {
            $0.producerLeft(id)
        }.get()
    }

    /// Parks a producer (its task is not cancelled yet), then settles.
    private func registerProducer(
        _ call: ParkedCall<PushAnswer>, id: UInt64, request: PipelinePushRequest, until deadline: Timestamp
    ) {
        if Task.isCancelled {
            call.answer(PushAnswer(.failure(.full(retryAfterSeconds: 1))))
            return
        }
        var call = call
        call.timer = clock.schedule(at: deadline) { [weak self] in
            self?.withIsolation { $0.producerLeft(id) }
        }
        producers.insert(Producer(call: call, request: request), id: id)
        settle()
    }

    /// `GET …/items/{id}?wait`: the item once it has moved from `earlier`'s
    /// status and delivery (`PipelineItem.hasMoved`), or as it is
    /// at `deadline`, when the task is cancelled, or at once when `maxWaiters`
    /// waits are parked.
    ///
    /// - Throws: `.notFound` when the item is not known (or is forgotten
    ///   meanwhile); `.gone`; `.shuttingDown`.
    func waitForChange(id: String, from earlier: PipelineItem, until deadline: Timestamp) async throws(PipelineError)
        -> PipelineItem
    {
        try checkOpen()
        let watch = itemWatchers.reserveID()
        return try await parkCall {
            $0.registerItemWatcher($1, watch: watch, item: id, from: earlier, until: deadline)
        } onCancel: {
            $0.itemWatcherLeft(watch, item: id)
        }.get()
    }

    /// Parks a wait on one item unless it has moved already (or there is no
    /// reason to wait): reaching here may have taken a hop.
    private func registerItemWatcher(
        _ call: ParkedCall<ItemAnswer>, watch: UInt64, item id: String, from earlier: PipelineItem,
        until deadline: Timestamp
    ) {
        settle()
        guard let current = engine.item(id) else { return call.answer(ItemAnswer(.failure(.notFound(id)))) }
        if current.hasMoved(from: earlier.status, fence: earlier.fence) || Task.isCancelled || clock.now() >= deadline
            || itemWatchers.count >= Self.maxWaiters
        {
            return call.answer(ItemAnswer(.success(current)))
        }
        var call = call
        call.timer = clock.schedule(at: deadline) { [weak self] in
            self?.withIsolation { $0.itemWatcherLeft(watch, item: id) }
        }
        itemWatchers.insert(
            ItemWatchers.Watch(call: call, status: current.status, fence: current.fence), item: id, id: watch)
        engine.tracksMoves = true
    }

    /// A wait on an item passed its deadline or its task was cancelled: it gets the item as it is.
    func itemWatcherLeft(_ watch: UInt64, item id: String) {
        guard let w = itemWatchers.remove(watch, item: id) else { return }
        engine.tracksMoves = !itemWatchers.isEmpty
        w.call.answer(ItemAnswer(engine.item(id).map { .success($0) } ?? .failure(.notFound(id))))
    }

    /// Answers the waits on items that moved since the last settle.
    func wakeItemWatchers() {
        let moved = engine.takeMoves()
        guard !itemWatchers.isEmpty else { return }
        for id in Set(moved) {
            let current = engine.item(id)
            let woken = itemWatchers.removeAll(of: id) { w in
                current?.hasMoved(from: w.status, fence: w.fence) ?? true
            }
            let answer = ItemAnswer(current.map { .success($0) } ?? .failure(.notFound(id)))
            for w in woken { w.call.answer(answer) }
        }
        engine.tracksMoves = !itemWatchers.isEmpty
    }

    /// Deletes the pipeline: parked callers get `.gone`, the timer and the
    /// source stop, and every later call throws `.gone`.
    package func close() {
        end(.closed, error: .gone)
        engine.releaseStorage()
    }

    /// Shutdown: parked callers get `.shuttingDown`, the timer and the source
    /// stop, and later calls throw `.shuttingDown` (or `.gone` once closed).
    package func shutdown() {
        guard lifecycle == .open else { return }
        end(.shuttingDown, error: .shuttingDown)
    }

    /// A parked consumer's deadline passed or its task was cancelled: it gets `[]`.
    func consumerLeft(_ id: UInt64) {
        guard let c = consumers.remove(id) else { return }
        c.call.answer(TakeAnswer(.success([])))
    }

    /// A parked producer's deadline passed or its task was cancelled: it gets `.full`.
    func producerLeft(_ id: UInt64) {
        guard let p = producers.remove(id) else { return }
        p.call.answer(PushAnswer(.failure(.full(retryAfterSeconds: 1))))
    }

    private func end(_ next: Lifecycle, error: PipelineError) {
        lifecycle = next
        timer?.cancel()
        timer = nil
        timerDeadline = nil
        pullTask?.cancel()
        pullTask = nil
        source?.reader = nil
        let taken = TakeAnswer(.failure(error))
        for c in consumers.removeAll() { c.call.answer(taken) }
        let pushed = PushAnswer(.failure(error))
        for p in producers.removeAll() { p.call.answer(pushed) }
        let watched = ItemAnswer(.failure(error))
        for w in itemWatchers.removeAll() { w.call.answer(watched) }
        engine.tracksMoves = false
    }
}

/// Parked waits on single items (`GET …/items/{id}?wait`), by item id.
struct ItemWatchers {
    /// One wait, and the item's status and delivery when it parked.
    struct Watch {
        let call: ParkedCall<Pipeline.ItemAnswer>
        let status: PipelineItemStatus
        let fence: Int64?
    }

    private var byItem: [String: [UInt64: Watch]] = [:]
    private var lastID: UInt64 = 0
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// A fresh id for `insert`, known before the caller parks.
    mutating func reserveID() -> UInt64 {
        lastID &+= 1
        return lastID
    }

    mutating func insert(_ watch: Watch, item: String, id: UInt64) {
        byItem[item, default: [:]][id] = watch
        count += 1
    }

    /// Removes one wait; nil when it already left.
    mutating func remove(_ id: UInt64, item: String) -> Watch? {
        guard let w = byItem[item]?.removeValue(forKey: id) else { return nil }
        if byItem[item]?.isEmpty == true { byItem[item] = nil }
        count -= 1
        return w
    }

    /// Removes and returns the waits on `item` that `shouldWake` picks.
    mutating func removeAll(of item: String, where shouldWake: (Watch) -> Bool) -> [Watch] {
        guard let waits = byItem[item] else { return [] }
        let woken = waits.filter { shouldWake($0.value) }
        guard !woken.isEmpty else { return [] }
        let left = waits.filter { woken[$0.key] == nil }
        byItem[item] = left.isEmpty ? nil : left
        count -= woken.count
        return Array(woken.values)
    }

    /// Removes every wait.
    mutating func removeAll() -> [Watch] {
        defer {
            byItem = [:]
            count = 0
        }
        return byItem.values.flatMap(\.values)
    }
}
