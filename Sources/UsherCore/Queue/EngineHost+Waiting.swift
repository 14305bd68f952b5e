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

/// A long-poll's answer, boxed: the async frames a parked request keeps on
/// the heap then hold a reference instead of a `VisitorView` (about 270 bytes)
/// in every temporary.
final class WaitAnswer: Sendable {
    let result: Result<VisitorView?, QueueError>

    init(_ result: Result<VisitorView?, QueueError>) {
        self.result = result
    }

    @inline(never)
    func get() throws(QueueError) -> VisitorView? {
        try result.get()
    }
}

/// One parked long-poll.
struct Waiter: Sendable {
    let token: UInt64
    let condition: WaitCondition
    let continuation: CheckedContinuation<WaitAnswer, Never>
    let timer: any ScheduledTimer
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
    /// `host`, so the continuation is resumed once. Cancellation answers like
    /// the deadline.
    func park(_ subject: WaitSubject, until condition: WaitCondition, deadline: Timestamp) async throws(QueueError)
        -> VisitorView?
    {
        if let early = try earlyAnswer(subject, until: condition, deadline: deadline) { return try early.get() }
        let token = host.nextToken
        host.nextToken += 1
        let answer = await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<WaitAnswer, Never>) in
                register(c, token: token, subject: subject, until: condition, deadline: deadline)
            }
        } onCancel: {
            Task { await self.answerNow(token) }
        }
        return try answer.get()
    }

    /// Parks `c` unless there is nothing to wait for any more. Checks again and
    /// registers in one isolated step: reaching here may have taken an executor
    /// hop (this is generic code isolated to `self`), and a change made
    /// meanwhile woke nobody.
    ///
    /// Not inlined, and neither is `earlyAnswer`: inlined into the async
    /// `park`, their `VisitorView` temporaries were laid out in its async
    /// frame, which stays on the heap for as long as the request is parked.
    @inline(never)
    func register(
        _ c: CheckedContinuation<WaitAnswer, Never>, token: UInt64, subject: WaitSubject,
        until condition: WaitCondition, deadline: Timestamp
    ) {
        let early: Result<VisitorView?, QueueError>?
        do throws(QueueError) {
            early = try answerWithoutWaiting(subject, until: condition, deadline: deadline)
        } catch {
            early = .failure(error)
        }
        if let early {
            c.resume(returning: WaitAnswer(early))
            return
        }
        let timer = clock.schedule(at: deadline) { [weak self] in
            self?.withIsolation { $0.answerNow(token) }
        }
        host.subjects[token] = subject
        host.waiters[subject, default: []].append(Waiter(token: token, condition: condition, continuation: c, timer: timer))
    }

    /// `answerWithoutWaiting`, boxed (see `register`).
    @inline(never)
    func earlyAnswer(_ subject: WaitSubject, until condition: WaitCondition, deadline: Timestamp)
        throws(QueueError) -> WaitAnswer?
    {
        try answerWithoutWaiting(subject, until: condition, deadline: deadline).map(WaitAnswer.init)
    }

    /// The answer when there is nothing to wait for (the condition holds, the
    /// deadline passed, the task is cancelled), or nil; throws when waiting
    /// is refused (shutting down, closed, no such visitor).
    func answerWithoutWaiting(_ subject: WaitSubject, until condition: WaitCondition, deadline: Timestamp)
        throws(QueueError) -> Result<VisitorView?, QueueError>?
    {
        let now = try current(subject)
        if condition.isMet(by: now) { return .success(now) }
        if host.phase == .shuttingDown { throw .shuttingDown }
        if deadline <= clock.now() || Task.isCancelled { return .success(now) }
        return nil
    }

    /// Parks on one visitor: its view, never nil.
    func parkOnVisitor(_ id: String, until condition: WaitCondition, deadline: Timestamp) async throws(QueueError)
        -> VisitorView
    {
        guard let view = try await park(.visitor(id), until: condition, deadline: deadline) else {
            throw .notFound("visitor \"\(id)\"")
        }
        return view
    }

    /// Parked long-polls.
    var parkedCount: Int { host.subjects.count }

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
        for id in changes where host.waiters[.visitor(id)] != nil { wake(.visitor(id)) }
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
        guard var list = host.waiters[subject], let i = list.firstIndex(where: { $0.token == token }) else { return nil }
        let w = list.remove(at: i)
        host.waiters[subject] = list.isEmpty ? nil : list
        return w
    }

    /// The only place a continuation is resumed; the waiter is already out of `host.waiters`.
    func resume(_ w: Waiter, with result: Result<VisitorView?, QueueError>) {
        host.subjects[w.token] = nil
        w.timer.cancel()
        w.continuation.resume(returning: WaitAnswer(result))
    }
}
