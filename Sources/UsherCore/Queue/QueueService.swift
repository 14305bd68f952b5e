import Answers

/// A queue, whichever backend holds it: what the routes call. `VisitorQueue`
/// keeps it in memory and answers at once; a Redis-backed queue answers
/// after a round trip. Operations mean what `QueueEngine`'s do.
package protocol QueueService: AnyObject, Sendable {
    var name: String { get }
    /// The current config.
    func readConfig() -> Pending<QueueConfig, QueueError>
    /// `POST …/visitors`; `tryOnce`: a try-acquire without a wait (granted now or cancelled now).
    func enqueueVisitor(_ r: VisitorRequest, tryOnce: Bool) -> Pending<EnqueueOutcome, QueueError>
    func completeVisitor(_ id: String) -> Pending<VisitorView, QueueError>
    func extendVisitor(_ id: String, holdSeconds: Double?) -> Pending<VisitorView, QueueError>
    func removeVisitor(_ id: String) -> Pending<VisitorView, QueueError>
    func readVisitor(_ id: String) -> Pending<VisitorView, QueueError>
    func readState(limit: Int, after cursor: QueueCursor?) -> Pending<QueueState, QueueError>
    func applyPatch(_ patch: QueuePatch) -> Pending<QueueConfig, QueueError>
    /// The answer that granted `id` its grant `fence` never reached its client:
    /// released (reason `undelivered`) if it still holds that grant.
    func releaseUndelivered(id: String, fence: Int64)
    /// `POST …?wait`: the visitor once it has left the line, or at `deadline`
    /// (timed out then with `cancellingOnTimeout`); a cancelled task with
    /// `withdrawing` takes the visitor back (reason `disconnected`).
    func parkUntilOutOfLine(id: String, until deadline: Timestamp, withdrawing: Bool, cancellingOnTimeout: Bool) async
        -> VisitorWait
    /// `GET …/visitors/{id}?wait`: the visitor once its status is not `status`, or at `deadline`.
    func parkUntilChange(id: String, from status: VisitorStatus, until deadline: Timestamp) async -> VisitorWait
}

/// What a `POST …/visitors` did: the visitor, and whether this request created it.
package struct EnqueueOutcome: Sendable {
    package var view: VisitorView
    package var created: Bool

    package init(view: VisitorView, created: Bool) {
        self.view = view
        self.created = created
    }
}

extension VisitorWait {
    /// A wait that ended with `result` (a backend other than memory).
    package convenience init(_ result: Result<VisitorView, QueueError>, id: String) {
        self.init(QueueWaitAnswer(result.map { Optional($0) }), id: id)
    }
}

extension VisitorQueue: QueueService {
    package nonisolated func readConfig() -> Pending<QueueConfig, QueueError> {
        .ready(.success(withIsolation { $0.config }))
    }

    package nonisolated func enqueueVisitor(_ r: VisitorRequest, tryOnce: Bool) -> Pending<EnqueueOutcome, QueueError> {
        .now { () throws(QueueError) in
            let (view, created) = try withIsolation { q throws(QueueError) in
                try tryOnce ? q.enqueueOrTimeOut(r) : q.enqueue(r)
            }
            return EnqueueOutcome(view: view, created: created)
        }
    }

    package nonisolated func completeVisitor(_ id: String) -> Pending<VisitorView, QueueError> {
        .now { () throws(QueueError) in try withIsolation { q throws(QueueError) in try q.complete(id: id) } }
    }

    package nonisolated func extendVisitor(_ id: String, holdSeconds: Double?) -> Pending<VisitorView, QueueError> {
        .now { () throws(QueueError) in
            try withIsolation { q throws(QueueError) in try q.extend(id: id, holdSeconds: holdSeconds) }
        }
    }

    package nonisolated func removeVisitor(_ id: String) -> Pending<VisitorView, QueueError> {
        .now { () throws(QueueError) in try withIsolation { q throws(QueueError) in try q.remove(id: id) } }
    }

    package nonisolated func readVisitor(_ id: String) -> Pending<VisitorView, QueueError> {
        .now { () throws(QueueError) in try withIsolation { q throws(QueueError) in try q.visitor(id: id) } }
    }

    package nonisolated func readState(limit: Int, after cursor: QueueCursor?) -> Pending<QueueState, QueueError> {
        .now { () throws(QueueError) in
            try withIsolation { q throws(QueueError) in try q.state(limit: limit, after: cursor) }
        }
    }

    package nonisolated func applyPatch(_ patch: QueuePatch) -> Pending<QueueConfig, QueueError> {
        .now { () throws(QueueError) in try withIsolation { q throws(QueueError) in try q.apply(patch) } }
    }

    package nonisolated func releaseUndelivered(id: String, fence: Int64) {
        _ = try? withIsolation { q throws(QueueError) in try q.undoGrant(id: id, fence: fence) }
    }

    package func parkUntilOutOfLine(
        id: String, until deadline: Timestamp, withdrawing: Bool, cancellingOnTimeout: Bool
    ) async -> VisitorWait {
        await parkWhileWaiting(
            id: id, until: deadline, withdrawing: withdrawing, cancellingOnTimeout: cancellingOnTimeout)
    }

    package func parkUntilChange(id: String, from status: VisitorStatus, until deadline: Timestamp) async
        -> VisitorWait
    {
        await parkForChange(id: id, from: status, until: deadline)
    }
}
