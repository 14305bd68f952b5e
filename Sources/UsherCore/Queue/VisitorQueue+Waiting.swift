// Long-polls on one visitor (the machinery is `EngineHost`'s).

extension VisitorQueue {
    /// `GET …/visitors/{id}?wait`: the visitor as soon as its status is not
    /// `status` (at once if it already differs), or as it is at `deadline`.
    /// A change made in one step is seen once, in its final state.
    public func waitForChange(
        id: String, from status: VisitorStatus, until deadline: Timestamp
    ) async throws(QueueError) -> VisitorView {
        try await parkOnVisitor(id, until: .statusDiffers(status), deadline: deadline)
    }

    /// `POST …/visitors?wait`: the visitor once it is no longer `delayed` or
    /// `waiting` (granted, merged, cancelled…), or as it is at `deadline`.
    public func waitWhileWaiting(id: String, until deadline: Timestamp) async throws(QueueError) -> VisitorView {
        try await parkOnVisitor(id, until: .leftLine, deadline: deadline)
    }
}
