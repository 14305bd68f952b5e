// Long-polls on one visitor (the machinery is `EngineHost`'s).

/// A finished long-poll on one visitor: its view, or why there is none.
///
/// The routes await this box, not the view: a parked request's async frames
/// stay on the heap while it waits, and one that receives a `VisitorView`
/// holds a temporary the size of the view. The view is taken out once the
/// wait is over, outside any parked frame (docs/performance.md, Long-poll scale).
package final class VisitorWait: Sendable {
    private let answer: QueueWaitAnswer
    private let id: String

    init(_ answer: QueueWaitAnswer, id: String) {
        self.answer = answer
        self.id = id
    }

    /// The visitor's view; throws what ended the wait (`notFound` when the
    /// visitor is gone, `gone`, `shuttingDown`).
    @inline(never)
    package func view() throws(QueueError) -> VisitorView {
        try answer.visitor(id)
    }
}

extension VisitorQueue {
    /// `GET …/visitors/{id}?wait`: the visitor as soon as its status is not
    /// `status` (at once if it already differs), or as it is at `deadline`.
    /// A change made in one step is seen once, in its final state.
    func waitForChange(
        id: String, from status: VisitorStatus, until deadline: Timestamp
    ) async throws(QueueError) -> VisitorView {
        try await parkForChange(id: id, from: status, until: deadline).view()
    }

    /// `waitForChange`, boxed (see `VisitorWait`).
    func parkForChange(id: String, from status: VisitorStatus, until deadline: Timestamp) async -> VisitorWait {
        VisitorWait(await park(.visitor(id), until: .statusDiffers(status), deadline: deadline), id: id)
    }

    /// `POST …/visitors?wait`: the visitor once it is no longer `delayed` or
    /// `waiting` (granted, merged, cancelled…), or as it is at `deadline`.
    /// With `withdrawing`, a cancelled task (the client hung up) cancels the
    /// visitor, reason `disconnected`, unless it was granted first; without,
    /// it answers the visitor as it is, still in line.
    func waitWhileWaiting(
        id: String, until deadline: Timestamp, withdrawing: Bool = false, cancellingOnTimeout: Bool = false
    ) async throws(QueueError) -> VisitorView {
        try await parkWhileWaiting(
            id: id, until: deadline, withdrawing: withdrawing, cancellingOnTimeout: cancellingOnTimeout
        ).view()
    }

    /// `waitWhileWaiting`, boxed (see `VisitorWait`). With `cancellingOnTimeout`
    /// (`on_timeout=cancel`), a visitor still waiting or delayed when the
    /// wait ends at `deadline` is cancelled (reason `timeout`; see
    /// `QueueEngine.timeOut`); a wait ended by a hang-up is left to
    /// `withdrawing`, as without it.
    func parkWhileWaiting(
        id: String, until deadline: Timestamp, withdrawing: Bool = false, cancellingOnTimeout: Bool = false
    ) async -> VisitorWait {
        let answer = await park(.visitor(id), until: .leftLine, deadline: deadline, withdrawing: withdrawing)
        guard cancellingOnTimeout, !Task.isCancelled else { return VisitorWait(answer, id: id) }
        return VisitorWait(settleTimeout(answer, id: id), id: id)
    }

    /// The wait on `id` ended: still waiting, it is timed out in one isolated
    /// step (a grant that came first stands). Out of line, so its views stay
    /// out of the parked frame.
    @inline(never)
    func settleTimeout(_ answer: QueueWaitAnswer, id: String) -> QueueWaitAnswer {
        guard case .success(let view?) = answer.result, view.status.isWaiting else { return answer }
        do throws(QueueError) {
            return QueueWaitAnswer(.success(try timeOut(id: id)))
        } catch {
            return QueueWaitAnswer(.failure(error))
        }
    }
}
