import Answers
import RedisClient
import UsherCore

/// A queue kept in Redis and shared by every Usher that uses the same Redis:
/// `QueueService` over `RedisQueueStore`. Every answer comes later (one
/// script call). This object holds no queue state of its own, only what
/// this process does about it: long-polls parked here, the timer at the
/// queue's next deadline, events for this process's subscribers.
package final class RedisQueue: QueueService, RedisResource {
    package let name: String
    package let store: RedisQueueStore
    private let events: EventLog?
    package let host: LocalHost

    package init(name: String, backend: RedisBackend, events: EventLog?) {
        self.name = name
        self.events = events
        self.host = LocalHost(kind: "queue", name: name, backend: backend)
        self.store = RedisQueueStore(host: host)
        host.drive(self)
    }

    // MARK: QueueService

    package func readConfig() -> Pending<QueueConfig, QueueError> {
        call { store async throws(QueueError) in try await store.config() }
    }

    package func enqueueVisitor(_ r: VisitorRequest, tryOnce: Bool) -> Pending<EnqueueOutcome, QueueError> {
        handedBack { store, answer in
            store.enqueue(r, tryOnce: tryOnce) { answer($0.map { EnqueueOutcome(view: $0.view, created: $0.created) }) }
        }
    }

    package func completeVisitor(_ id: String) -> Pending<VisitorView, QueueError> {
        handedBack { store, answer in store.visitorOperation(.complete(id: id), answer: answer) }
    }

    package func extendVisitor(_ id: String, holdSeconds: Double?) -> Pending<VisitorView, QueueError> {
        handedBack { store, answer in store.visitorOperation(.extend(id: id, holdSeconds: holdSeconds), answer: answer)
        }
    }

    package func removeVisitor(_ id: String) -> Pending<VisitorView, QueueError> {
        handedBack { store, answer in store.visitorOperation(.remove(id: id), answer: answer) }
    }

    package func readVisitor(_ id: String) -> Pending<VisitorView, QueueError> {
        handedBack { store, answer in store.visitorOperation(.read(id: id), answer: answer) }
    }

    package func readState(limit: Int, after cursor: QueueCursor?) -> Pending<QueueState, QueueError> {
        call { store async throws(QueueError) in try await store.state(limit: limit, after: cursor) }
    }

    package func applyPatch(_ patch: QueuePatch) -> Pending<QueueConfig, QueueError> {
        call { store async throws(QueueError) in try await store.apply(patch) }
    }

    package func releaseUndelivered(id: String, fence: Int64) {
        let store = store
        Task { _ = try? await store.undoGrant(id: id, fence: fence) }
    }

    package func parkUntilOutOfLine(
        id: String, until deadline: Timestamp, withdrawing: Bool, cancellingOnTimeout: Bool
    ) async -> VisitorWait {
        var result = await park(id: id, until: deadline, withdrawing: withdrawing) { !$0.status.isWaiting }
        if cancellingOnTimeout, !Task.isCancelled, case .success(let view) = result, view.status.isWaiting {
            do throws(QueueError) { result = .success(try await store.timeOut(id: id)) } catch {
                result = .failure(error)
            }
        }
        return VisitorWait(result, id: id)
    }

    package func parkUntilChange(id: String, from status: VisitorStatus, until deadline: Timestamp) async
        -> VisitorWait
    {
        VisitorWait(await park(id: id, until: deadline, withdrawing: false) { $0.status != status }, id: id)
    }

    // MARK: Lifecycle

    /// Counts and totals (for the list route's summary).
    package func counts() async throws(QueueError) -> QueueCounts {
        try await store.counts().counts
    }

    /// Creates the queue in Redis, or answers the config of the one there.
    package func create(_ config: QueueConfig) async throws(QueueError) -> (config: QueueConfig, created: Bool) {
        try await store.create(config)
    }

    // MARK: NoticeListener

    /// Notices wake waits parked here and feed event subscribers here; with
    /// neither, they are dropped unread (see `RedisResource.isHeard`).
    package var wantsNotices: Bool { isHeard(events) }

    package func receive(_ payload: [UInt8]) {
        guard let notice = RedisQueueStore.decodeNotice(payload) else { return }
        if notice.deleted {
            close()
            return
        }
        arm(at: notice.next)
        emitEvents(notice)
        for view in notice.changed { board.post(view.id) }
    }

    // MARK: Internals

    /// One store call answered from the connection's queue (no task), refused
    /// once the queue is closed.
    private func handedBack<T: Sendable>(
        _ body: @escaping @Sendable (RedisQueueStore, @escaping Pending<T, QueueError>.Receiver) -> Void
    ) -> Pending<T, QueueError> {
        .handedBack { [self] answer in
            guard host.phase != .closed else { return answer(.failure(.gone)) }
            body(store, answer)
        }
    }

    /// Waits until `met` holds for the visitor, `deadline` passes, or the
    /// task is cancelled (then, `withdrawing`, the visitor is taken back).
    private func park(
        id: String, until deadline: Timestamp, withdrawing: Bool, _ met: (VisitorView) -> Bool
    ) async -> Result<VisitorView, QueueError> {
        // Parked until `deadline`: its client counts as heard of meanwhile.
        await park(
            id, until: deadline,
            read: { store async throws(QueueError) in try await store.visitor(id: id, heardUntil: deadline) },
            met: met,
            withdraw: withdrawing
                ? { store async throws(QueueError) in
                    if let view = try await store.disconnect(id: id) { return view }
                    return try await store.visitor(id: id)
                } : nil)
    }

    /// Emits what the notice reports, as `VisitorQueue` does for its own changes.
    private func emitEvents(_ notice: QueueNotice) {
        guard let events, events.isRecording else { return }
        for v in notice.changed {
            let type = v.status.isWaiting && v.enqueuedAt == notice.time ? "enqueued" : v.status.rawValue
            events.emit(ResourceEvent.Draft(kind: "queue", name: name, type: type, subject: .visitor(v)))
        }
        if let updated = notice.updated { events.emitUpdated(kind: "queue", name: name, updated) }
    }
}
