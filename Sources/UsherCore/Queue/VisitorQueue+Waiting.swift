// Long-polls: parked continuations, answered exactly once.

extension VisitorQueue {
    /// What a parked long-poll waits for.
    enum WaitCondition: Sendable {
        /// `GET …?wait`: any status other than this one.
        case statusDiffers(VisitorStatus)
        /// `POST …?wait`: the visitor is no longer delayed or waiting.
        case leftLine

        func isMet(by view: VisitorView) -> Bool {
            switch self {
            case .statusDiffers(let status): view.status != status
            case .leftLine: !view.status.isWaiting
            }
        }
    }

    struct Waiter {
        let token: UInt64
        let condition: WaitCondition
        let continuation: CheckedContinuation<Result<VisitorView, QueueError>, Never>
        let timer: any ScheduledTimer
    }

    /// `GET …/visitors/{id}?wait`: the visitor as soon as its status is not
    /// `status` (at once if it already differs), or as it is at `deadline`.
    /// A change made in one step is seen once, in its final state.
    public func waitForChange(
        id: String, from status: VisitorStatus, until deadline: Timestamp
    ) async throws(QueueError) -> VisitorView {
        try await park(id: id, until: .statusDiffers(status), deadline: deadline)
    }

    /// `POST …/visitors?wait`: the visitor once it is no longer `delayed` or
    /// `waiting` (granted, merged, cancelled…), or as it is at `deadline`.
    public func waitWhileWaiting(id: String, until deadline: Timestamp) async throws(QueueError) -> VisitorView {
        try await park(id: id, until: .leftLine, deadline: deadline)
    }

    /// Parks the caller. Every way out (a change, the deadline timer, task
    /// cancellation, close, shutdown) runs isolated and first removes the
    /// waiter from `waiters`/`waiterIDs`, so the continuation is resumed once.
    /// Cancellation answers like the deadline: with the current view.
    func park(id: String, until condition: WaitCondition, deadline: Timestamp) async throws(QueueError) -> VisitorView {
        let current = try visitor(id: id)
        if condition.isMet(by: current) { return current }
        if phase == .shuttingDown { throw .shuttingDown }
        if deadline <= clock.now() { return current }
        let token = nextToken
        nextToken += 1
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Result<VisitorView, QueueError>, Never>) in
                let timer = clock.schedule(at: deadline) { [weak self] in
                    self?.withIsolation { $0.answerNow(token) }
                }
                waiterIDs[token] = id
                waiters[id, default: []].append(Waiter(token: token, condition: condition, continuation: c, timer: timer))
            }
        } onCancel: {
            Task { await self.answerNow(token) }
        }
        return try result.get()
    }

    /// Answers one waiter with the visitor as it is now (deadline or cancellation).
    func answerNow(_ token: UInt64) {
        guard let id = waiterIDs[token] else { return }
        let result: Result<VisitorView, QueueError>
        do {
            result = .success(try visitor(id: id))
        } catch {
            result = .failure(error)
        }
        // Applying `now` above may already have answered it.
        guard waiterIDs[token] != nil, let w = takeWaiter(token, id: id) else { return }
        resume(w, with: result)
    }

    /// Answers the waiters of `id` whose condition the current view meets.
    func wake(_ id: String) {
        guard let list = waiters[id] else { return }
        guard let view = engine.currentView(id: id) else {
            waiters[id] = nil
            for w in list { resume(w, with: .failure(.notFound("visitor \"\(id)\""))) }
            return
        }
        var keep: [Waiter] = []
        for w in list {
            if w.condition.isMet(by: view) {
                resume(w, with: .success(view))
            } else {
                keep.append(w)
            }
        }
        waiters[id] = keep.isEmpty ? nil : keep
    }

    func failAllWaiters(_ error: QueueError) {
        let all = waiters
        waiters = [:]
        for list in all.values {
            for w in list { resume(w, with: .failure(error)) }
        }
    }

    func takeWaiter(_ token: UInt64, id: String) -> Waiter? {
        guard var list = waiters[id], let i = list.firstIndex(where: { $0.token == token }) else { return nil }
        let w = list.remove(at: i)
        waiters[id] = list.isEmpty ? nil : list
        return w
    }

    /// The only place a continuation is resumed; the waiter is already out of `waiters`.
    func resume(_ w: Waiter, with result: Result<VisitorView, QueueError>) {
        waiterIDs[w.token] = nil
        w.timer.cancel()
        w.continuation.resume(returning: result)
    }
}
