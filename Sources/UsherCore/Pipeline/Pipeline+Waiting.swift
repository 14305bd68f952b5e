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
    }
}
