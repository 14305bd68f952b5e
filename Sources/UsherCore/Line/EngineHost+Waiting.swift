// Long-polls on a host: parked continuations, answered exactly once.

/// What a parked long-poll watches.
enum WaitSubject: Hashable, Sendable {
    /// One visitor (a queue's visitor, a pool's waiting fetcher).
    case visitor(String)
    /// Whoever holds the longest-held slot (a window: the item shown).
    case firstHolder
}

/// When a parked long-poll is answered; it is checked against its subject's
/// view (nil: nobody holds a slot).
enum WaitCondition: Sendable {
    /// `GET …/visitors/{id}?wait`: any status other than this one.
    case statusDiffers(VisitorStatus)
    /// `POST …?wait`: the visitor is no longer delayed or waiting.
    case leftLine
    /// `GET …/showing?after=`: a holder other than this id (nil: any holder).
    case holderDiffers(String?)

    func isMet(by view: VisitorView?) -> Bool {
        switch self {
        case .statusDiffers(let status): view.map { $0.status != status } ?? true
        case .leftLine: view.map { !$0.status.isWaiting } ?? true
        case .holderDiffers(let id): view?.id != id
        }
    }
}

/// A queue long-poll's answer: the subject's view (nil: nobody holds a slot) or why there is none.
typealias QueueWaitAnswer = WaitAnswer<VisitorView?, QueueError>

extension WaitAnswer where Value == VisitorView?, Failure == QueueError {
    /// The visitor's view; a visitor that is gone is `notFound`.
    @inline(never)
    func visitor(_ id: String) throws(QueueError) -> VisitorView {
        guard let view = try get() else { throw .notFound("visitor \"\(id)\"") }
        return view
    }
}

/// One parked long-poll.
struct Waiter: Sendable {
    let token: UInt64
    let condition: WaitCondition
    let call: ParkedCall<QueueWaitAnswer>
}

extension EngineHost {
    /// The subject as it is now, applying time.
    func current(_ subject: WaitSubject) throws(QueueError) -> VisitorView? {
        try perform { (e, now) throws(QueueError) -> VisitorView? in
            switch subject {
            case .visitor(let id):
                return try e.visitor(id: id, now: now)
            case .firstHolder:
                e.advance(to: now)
                return e.firstHolderView
            }
        }
    }

    /// Parks the caller until `condition` holds for `subject` (at once if it
    /// already does), or until `deadline`, answering with the subject's view
    /// then. Every way out (a change, the deadline timer, task cancellation,
    /// close, shutdown) runs isolated and first removes the waiter from
    /// `host`, so the call is answered once. Cancellation answers like the
    /// deadline; with `withdrawing`, it first takes back the visitor waited
    /// on (`withdrawWaiting`: the client hung up), in the same isolated step,
    /// unless the wait was answered first.
    ///
    /// Errors come back in the answer too: nothing but a reference is laid
    /// out in this frame, which stays on the heap while the request waits.
    func park(
        _ subject: WaitSubject, until condition: WaitCondition, deadline: Timestamp, withdrawing: Bool = false
    ) async -> QueueWaitAnswer {
        if let early = earlyAnswer(subject, until: condition, deadline: deadline, withdrawing: withdrawing) {
            return early
        }
        let token = takeToken()
        return await parkCall {
            $0.register(
                $1, token: token, subject: subject, until: condition, deadline: deadline, withdrawing: withdrawing)
        } onCancel: {
            $0.cancelWait(token, withdrawing: withdrawing)
        }
    }

    /// A fresh waiter token (out of line: `host`'s accessors stay out of `park`'s frame).
    @inline(never)
    func takeToken() -> UInt64 {
        defer { host.nextToken += 1 }
        return host.nextToken
    }

    /// Parks `call` unless there is nothing to wait for any more. Checks
    /// again and registers in one isolated step (see `parkCall`).
    ///
    /// Not inlined, and neither is `earlyAnswer`: inlined into the async
    /// `park`, their `VisitorView` temporaries would be laid out in its async
    /// frame, which stays on the heap for as long as the request is parked.
    @inline(never)
    func register(
        _ call: ParkedCall<QueueWaitAnswer>, token: UInt64, subject: WaitSubject,
        until condition: WaitCondition, deadline: Timestamp, withdrawing: Bool
    ) {
        if let early = earlyAnswer(subject, until: condition, deadline: deadline, withdrawing: withdrawing) {
            call.answer(early)
            return
        }
        var call = call
        call.timer = clock.schedule(at: deadline) { [weak self] in
            self?.withIsolation { $0.answerNow(token) }
        }
        if case .visitor(let id) = subject { engine.hear(id: id, until: deadline) }
        host.subjects[token] = subject
        host.waiters[subject, default: []].append(Waiter(token: token, condition: condition, call: call))
    }

    /// `answerWithoutWaiting`, boxed, errors included (see `register`).
    @inline(never)
    func earlyAnswer(
        _ subject: WaitSubject, until condition: WaitCondition, deadline: Timestamp, withdrawing: Bool
    ) -> QueueWaitAnswer? {
        do throws(QueueError) {
            return try answerWithoutWaiting(subject, until: condition, deadline: deadline, withdrawing: withdrawing)
                .map(QueueWaitAnswer.init)
        } catch {
            return QueueWaitAnswer(.failure(error))
        }
    }

    /// The answer when there is nothing to wait for (the condition holds, the
    /// deadline passed, the task is cancelled: then, `withdrawing`, after
    /// taking the visitor back), or nil; throws when waiting is refused
    /// (shutting down, closed, no such visitor).
    func answerWithoutWaiting(
        _ subject: WaitSubject, until condition: WaitCondition, deadline: Timestamp, withdrawing: Bool
    ) throws(QueueError) -> Result<VisitorView?, QueueError>? {
        let now = try current(subject)
        if condition.isMet(by: now) { return .success(now) }
        if host.phase == .shuttingDown { throw .shuttingDown }
        if deadline <= clock.now() { return .success(now) }
        guard Task.isCancelled else { return nil }
        guard withdrawing, case .visitor(let id) = subject else { return .success(now) }
        try perform { (e, now) throws(QueueError) in try Self.withdrawWaiting(id, in: &e, now: now) }
        return .success(engine.currentView(id: id))
    }

    /// Parks on one visitor: its view, never nil.
    func parkOnVisitor(
        _ id: String, until condition: WaitCondition, deadline: Timestamp, withdrawing: Bool = false
    ) async throws(QueueError) -> VisitorView {
        try await park(.visitor(id), until: condition, deadline: deadline, withdrawing: withdrawing).visitor(id)
    }

    /// Parked long-polls.
    var parkedCount: Int { host.subjects.count }

    /// The waiter's task was cancelled: with `withdrawing`, takes back the
    /// visitor it waits on if it is still parked (a change of status wakes it
    /// with the new view), then answers it with what is left.
    func cancelWait(_ token: UInt64, withdrawing: Bool) {
        if withdrawing, let subject = host.subjects[token], case .visitor(let id) = subject {
            _ = try? perform { (e, now) throws(QueueError) in try Self.withdrawWaiting(id, in: &e, now: now) }
        }
        answerNow(token)
    }

    /// Answers one waiter with its subject as it is now (deadline or cancellation).
    func answerNow(_ token: UInt64) {
        guard let subject = host.subjects[token] else { return }
        let result: Result<VisitorView?, QueueError>
        do {
            result = .success(try current(subject))
        } catch {
            result = .failure(error)
        }
        // Applying `now` above may already have answered it.
        guard host.subjects[token] != nil, let w = takeWaiter(token, subject) else { return }
        resume(w, with: result)
    }

    /// After an operation: answers the waiters whose condition now holds.
    func wakeWaiters(_ changes: [String]) {
        // No status changed, so no holder did either: without this, every
        // read (each new long-poll's own check included) rescanned all of a
        // window's `showing` waiters, O(n²) to park n of them.
        guard !host.waiters.isEmpty, !changes.isEmpty else { return }
        for id in changes where host.waiters[.visitor(id)] != nil {
            engine.hearParked(id: id)
            wake(.visitor(id))
        }
        if host.waiters[.firstHolder] != nil { wake(.firstHolder) }
    }

    /// Answers the waiters of `subject` whose condition the current view meets.
    func wake(_ subject: WaitSubject) {
        guard let list = host.waiters[subject] else { return }
        let view: VisitorView?
        switch subject {
        case .visitor(let id):
            guard let v = engine.currentView(id: id) else {
                host.waiters[subject] = nil
                for w in list { resume(w, with: .failure(.notFound("visitor \"\(id)\""))) }
                return
            }
            view = v
        case .firstHolder:
            view = engine.firstHolderView
        }
        var keep: [Waiter] = []
        for w in list {
            if w.condition.isMet(by: view) {
                resume(w, with: .success(view))
            } else {
                keep.append(w)
            }
        }
        host.waiters[subject] = keep.isEmpty ? nil : keep
    }

    func failAllWaiters(_ error: QueueError) {
        let all = host.waiters
        host.waiters = [:]
        for list in all.values {
            for w in list { resume(w, with: .failure(error)) }
        }
    }

    func takeWaiter(_ token: UInt64, _ subject: WaitSubject) -> Waiter? {
        guard var list = host.waiters[subject], let i = list.firstIndex(where: { $0.token == token }) else {
            return nil
        }
        let w = list.remove(at: i)
        host.waiters[subject] = list.isEmpty ? nil : list
        return w
    }

    /// The only place a continuation is resumed; the waiter is already out of `host.waiters`.
    func resume(_ w: Waiter, with result: Result<VisitorView?, QueueError>) {
        host.subjects[w.token] = nil
        w.call.answer(QueueWaitAnswer(result))
    }
}
