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
    package func parkForChange(id: String, from status: VisitorStatus, until deadline: Timestamp) async -> VisitorWait {
        VisitorWait(await park(.visitor(id), until: .statusDiffers(status), deadline: deadline), id: id)
    }

    /// `POST …/visitors?wait`: the visitor once it is no longer `delayed` or
    /// `waiting` (granted, merged, cancelled…), or as it is at `deadline`.
    /// With `withdrawing`, a cancelled task (the client hung up) cancels the
    /// visitor, reason `disconnected`, unless it was granted first; without,
    /// it answers the visitor as it is, still in line.
    func waitWhileWaiting(
        id: String, until deadline: Timestamp, withdrawing: Bool = false
    ) async throws(QueueError) -> VisitorView {
        try await parkWhileWaiting(id: id, until: deadline, withdrawing: withdrawing).view()
    }

    /// `waitWhileWaiting`, boxed (see `VisitorWait`).
    package func parkWhileWaiting(id: String, until deadline: Timestamp, withdrawing: Bool = false) async -> VisitorWait
    {
        VisitorWait(await park(.visitor(id), until: .leftLine, deadline: deadline, withdrawing: withdrawing), id: id)
    }
}
