import Answers

/// A window, whichever backend holds it: what the routes call. `WindowSlot`
/// keeps it in memory and answers at once; a Redis-backed window answers
/// after a round trip. Operations mean what `WindowSlot`'s do.
package protocol WindowService: AnyObject, Sendable {
    var name: String { get }
    /// The current config.
    func readConfig() -> Pending<WindowConfig, WindowError>
    /// `POST …/show`.
    func showItem(_ r: ShowRequest) -> Pending<ShowOutcome, WindowError>
    /// `POST …/dismiss`: the item shown (`id` nil) or the one named.
    func dismissItem(id: String?) -> Pending<Dismissal, WindowError>
    /// The item shown now, or nil.
    func readShowing() -> Pending<WindowItem?, WindowError>
    func readItem(_ id: String) -> Pending<WindowItem, WindowError>
    func readState(limit: Int, after cursor: QueueCursor?) -> Pending<WindowState, WindowError>
    func applyPatch(_ patch: WindowPatch) -> Pending<WindowConfig, WindowError>
    /// `GET …/showing?wait`: the item shown once it is not `after`, or at `deadline`.
    func parkUntilShowing(after: String?, until deadline: Timestamp) async -> ShowingWait
    /// `GET …/items/{id}?wait`: the item once its status is not `status`, or at `deadline`.
    func parkUntilChange(id: String, from status: WindowItemStatus, until deadline: Timestamp) async -> ItemWait
}

/// What a `POST …/show` did: the item, and whether this request created it.
package struct ShowOutcome: Sendable {
    package var item: WindowItem
    package var created: Bool

    package init(item: WindowItem, created: Bool) {
        self.item = item
        self.created = created
    }
}

extension ShowingWait {
    /// A wait that ended with `result` (a backend other than memory).
    package convenience init(_ result: Result<VisitorView?, QueueError>, window: String) {
        self.init(QueueWaitAnswer(result), window: window)
    }
}

extension ItemWait {
    /// A wait that ended with `result` (a backend other than memory).
    package convenience init(_ result: Result<VisitorView, QueueError>, id: String, window: String) {
        self.init(QueueWaitAnswer(result.map { Optional($0) }), id: id, window: window)
    }
}

extension WindowSlot: WindowService {
    package nonisolated func readConfig() -> Pending<WindowConfig, WindowError> {
        .ready(.success(withIsolation { $0.config }))
    }

    package nonisolated func showItem(_ r: ShowRequest) -> Pending<ShowOutcome, WindowError> {
        .now { () throws(WindowError) in
            let (item, created) = try withIsolation { w throws(WindowError) in try w.show(r) }
            return ShowOutcome(item: item, created: created)
        }
    }

    package nonisolated func dismissItem(id: String?) -> Pending<Dismissal, WindowError> {
        .now { () throws(WindowError) in try withIsolation { w throws(WindowError) in try w.dismiss(id: id) } }
    }

    package nonisolated func readShowing() -> Pending<WindowItem?, WindowError> {
        .now { () throws(WindowError) in try withIsolation { w throws(WindowError) in try w.showing() } }
    }

    package nonisolated func readItem(_ id: String) -> Pending<WindowItem, WindowError> {
        .now { () throws(WindowError) in try withIsolation { w throws(WindowError) in try w.item(id: id) } }
    }

    package nonisolated func readState(limit: Int, after cursor: QueueCursor?) -> Pending<WindowState, WindowError> {
        .now { () throws(WindowError) in
            try withIsolation { w throws(WindowError) in try w.state(limit: limit, after: cursor) }
        }
    }

    package nonisolated func applyPatch(_ patch: WindowPatch) -> Pending<WindowConfig, WindowError> {
        .now { () throws(WindowError) in try withIsolation { w throws(WindowError) in try w.apply(patch) } }
    }

    package func parkUntilShowing(after: String?, until deadline: Timestamp) async -> ShowingWait {
        await parkForShowing(after: after, until: deadline)
    }

    package func parkUntilChange(id: String, from status: WindowItemStatus, until deadline: Timestamp) async
        -> ItemWait
    {
        await parkForChange(id: id, from: status, until: deadline)
    }
}
