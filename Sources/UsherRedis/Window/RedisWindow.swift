import Answers
import RedisClient
import UsherCore

/// A window kept in Redis and shared by every Usher that uses the same
/// Redis: `WindowService` over `RedisWindowStore`. Every answer comes later
/// (one script call). This object holds no window state of its own, only
/// what this process does about it: long-polls parked here, the timer at the
/// window's next deadline (a display time's end, a delay's), events for this
/// process's subscribers.
package final class RedisWindow: WindowService, RedisResource {
    package let name: String
    package let store: RedisWindowStore
    private let backend: RedisBackend
    private let events: EventLog?
    package let host: LocalHost
    /// Any change may change what is shown: showing waits park on this subject.
    private static let showingSubject = "\u{0}showing"

    package init(name: String, backend: RedisBackend, events: EventLog?) {
        self.name = name
        self.backend = backend
        self.events = events
        self.host = LocalHost(kind: WindowSlot.eventKind, name: name, backend: backend)
        self.store = RedisWindowStore(host: host)
        host.drive(self)
    }

    // MARK: WindowService

    package func readConfig() -> Pending<WindowConfig, WindowError> {
        call { store async throws(WindowError) in try await store.config() }
    }

    package func showItem(_ r: ShowRequest) -> Pending<ShowOutcome, WindowError> {
        call { store async throws(WindowError) in
            let (item, created) = try await store.show(r)
            return ShowOutcome(item: item, created: created)
        }
    }

    package func dismissItem(id: String?) -> Pending<Dismissal, WindowError> {
        call { store async throws(WindowError) in try await store.dismiss(id: id) }
    }

    package func readShowing() -> Pending<WindowItem?, WindowError> {
        call { store async throws(WindowError) in try await store.showing() }
    }

    package func readItem(_ id: String) -> Pending<WindowItem, WindowError> {
        call { store async throws(WindowError) in try await store.item(id: id) }
    }

    package func readState(limit: Int, after cursor: QueueCursor?) -> Pending<WindowState, WindowError> {
        call { store async throws(WindowError) in try await store.state(limit: limit, after: cursor) }
    }

    package func applyPatch(_ patch: WindowPatch) -> Pending<WindowConfig, WindowError> {
        call { store async throws(WindowError) in try await store.apply(patch) }
    }

    package func parkUntilShowing(after: String?, until deadline: Timestamp) async -> ShowingWait {
        let result = await park(Self.showingSubject, until: deadline) { store async throws(WindowError) in
            try await store.showingView()
        } met: {
            $0?.id != after
        }
        return ShowingWait(result.mapError(Self.lineError), window: name)
    }

    package func parkUntilChange(id: String, from status: WindowItemStatus, until deadline: Timestamp) async
        -> ItemWait
    {
        // A finished item never changes again: any status differs from `delayed`, so it answers at once.
        let from = status.liveStatus ?? .delayed
        let result = await park(id, until: deadline) { store async throws(WindowError) in
            try await store.itemView(id: id)
        } met: {
            $0.status != from
        }
        return ItemWait(result.mapError(Self.lineError), id: id, window: name)
    }

    // MARK: Lifecycle

    /// Counts and totals, and the id of the item shown (for the list route's summary).
    package func counts() async throws(WindowError) -> (counts: WindowCounts, showing: String?) {
        let counts = try await store.counts()
        return (counts.counts, counts.showing)
    }

    /// Creates the window in Redis, or answers the config of the one there.
    package func create(_ config: WindowConfig) async throws(WindowError) -> (config: WindowConfig, created: Bool) {
        try await store.create(config)
    }

    // MARK: NoticeListener

    /// Notices wake waits parked here and feed event subscribers here; with
    /// neither, they are dropped unread (see `RedisResource.isHeard`).
    package var wantsNotices: Bool { isHeard(events) }

    package func receive(_ payload: [UInt8]) {
        guard let notice = RedisWindowStore.decodeNotice(payload) else { return }
        if notice.deleted {
            close()
            return
        }
        arm(at: notice.next)
        emitEvents(notice)
        for item in notice.changed { board.post(item.id) }
        if !notice.changed.isEmpty { board.post(Self.showingSubject) }
    }

    // MARK: Internals

    /// A read's failure as the line's error (what `ShowingWait`/`ItemWait` hold;
    /// they put it back in the window's words).
    private static func lineError(_ error: WindowError) -> QueueError {
        switch error {
        case .notFound(let what): .notFound(what)
        case .gone: .gone
        case .shuttingDown: .shuttingDown
        case .backendUnavailable(let why): .backendUnavailable(why)
        case .nothingShowing, .full, .invalid, .storageFull: .backendUnavailable(error.description)
        }
    }

    /// Emits what the notice reports, as `WindowSlot` does for its own changes.
    private func emitEvents(_ notice: WindowNotice) {
        guard let events, events.isRecording else { return }
        for item in notice.changed {
            let type = item.status == .showing ? "shown" : item.status.rawValue
            events.emit(
                ResourceEvent.Draft(kind: WindowSlot.eventKind, name: name, type: type, subject: .windowItem(item)))
        }
        if let updated = notice.updated { events.emitUpdated(kind: WindowSlot.eventKind, name: name, updated) }
    }
}
