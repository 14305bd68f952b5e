import Answers
import RedisClient
import UsherCore

/// A pipeline kept in Redis and shared by every Usher that uses the same
/// Redis: `PipelineService` over `RedisPipelineStore`. Every answer comes
/// later (one script call; two for a take that finds filters). This object
/// holds no pipeline state of its own, only what this process does about
/// it: consumers and producers parked here, the timer at the pipeline's next
/// deadline, events for this process's subscribers.
///
/// Parked consumers and producers retry at every notice that says an item
/// or room may be there, and at least every `Self.pollSeconds`; across
/// processes they are not served in arrival order (within one, the first to
/// retry wins).
package final class RedisPipeline: PipelineService, RedisResource {
    package let name: String
    package let store: RedisPipelineStore
    private let events: EventLog?
    /// The most one take hands out, in bytes of stored payloads (`max_response_bytes`).
    private let maxTakeBytes: Int
    package let host: LocalHost
    /// What parked consumers and producers wait for.
    static let itemsSubject = "items"
    static let roomSubject = "room"
    /// What waits on single items wait for: any change of the pipeline
    /// (a notice of ack deadlines that ran out names no items).
    static let changeSubject = "change"

    package init(name: String, backend: RedisBackend, events: EventLog?, maxTakeBytes: Int = .max) {
        self.name = name
        self.events = events
        self.maxTakeBytes = maxTakeBytes
        self.host = LocalHost(kind: "pipeline", name: name, backend: backend)
        self.store = RedisPipelineStore(host: host)
        host.drive(self)
    }

    // MARK: PipelineService

    package func readConfig() -> Pending<PipelineConfig, PipelineError> {
        call { store async throws(PipelineError) in try await store.config() }
    }

    package func pushItem(_ request: PipelinePushRequest) -> Pending<PipelinePushResult, PipelineError> {
        call { store async throws(PipelineError) in try await store.push(request) }
    }

    package func pushItems(_ requests: [PipelinePushRequest]) -> Pending<[PipelinePushResult], PipelineError> {
        call { store async throws(PipelineError) in try await store.pushBatch(requests) }
    }

    package func takeItems(max: Int, ackSeconds: Double?) -> Pending<[PipelineDelivery], PipelineError> {
        let maxBytes = maxTakeBytes
        return call { store async throws(PipelineError) in
            try await store.take(max: max, ackSeconds: ackSeconds, maxBytes: maxBytes)
        }
    }

    package func consumeItem(_ id: String, fence: Int64?) -> Pending<PipelineItem, PipelineError> {
        call { store async throws(PipelineError) in try await store.consume(id, fence: fence) }
    }

    package func releaseItem(_ id: String, delaySeconds: Double?, fence: Int64?) -> Pending<
        PipelineItem, PipelineError
    > {
        call { store async throws(PipelineError) in
            try await store.release(id, delaySeconds: delaySeconds, fence: fence)
        }
    }

    package func extendItem(_ id: String, ackSeconds: Double?, fence: Int64?) -> Pending<PipelineItem, PipelineError> {
        call { store async throws(PipelineError) in try await store.extend(id, ackSeconds: ackSeconds, fence: fence) }
    }

    package func cancelItem(_ id: String) -> Pending<PipelineItem, PipelineError> {
        call { store async throws(PipelineError) in try await store.cancel(id) }
    }

    package func readItem(_ id: String) -> Pending<PipelineItem, PipelineError> {
        call { store async throws(PipelineError) in try await store.item(id).item }
    }

    package func readState(limit: Int, after cursor: PipelineCursor?) -> Pending<PipelineSnapshot, PipelineError> {
        let board = board
        return call { store async throws(PipelineError) in
            var snapshot = try await store.state(limit: limit, after: cursor)
            // Only this process's parked calls are known here.
            snapshot.waitingConsumers = board.openCount(of: Self.itemsSubject)
            snapshot.waitingProducers = board.openCount(of: Self.roomSubject)
            return snapshot
        }
    }

    package func readDead(limit: Int, after cursor: PipelineCursor?) -> Pending<PipelineDeadPage, PipelineError> {
        call { store async throws(PipelineError) in
            let page = try await store.deadPage(limit: limit, after: cursor)
            return PipelineDeadPage(dead: page.dead, items: page.items, cursors: page.cursors, more: page.more)
        }
    }

    package func redriveDead() -> Pending<(moved: Int, dead: Int), PipelineError> {
        call { store async throws(PipelineError) in try await store.redrive() }
    }

    package func applyPatch(_ patch: PipelinePatch) -> Pending<PipelineConfig, PipelineError> {
        call { store async throws(PipelineError) in try await store.apply(patch) }
    }

    package func readFilters() -> Pending<PipelineFilters, PipelineError> {
        call { store async throws(PipelineError) in try await store.filters() }
    }

    package func storeFilter(name: String, _ filter: PipelineFilter) -> Pending<Bool, PipelineError> {
        call { store async throws(PipelineError) in try await store.putFilter(name: name, filter) }
    }

    package func dropFilter(name: String) -> Pending<Void, PipelineError> {
        call { store async throws(PipelineError) in try await store.removeFilter(name: name) }
    }

    package func undeliverItems(_ deliveries: [(id: String, fence: Int64)]) {
        let store = store
        let handed = deliveries.map { Handed(id: $0.id, fence: $0.fence) }
        Task { _ = try? await store.undeliver(handed.map { ($0.id, $0.fence) }) }
    }

    /// Takes at every notice that an item may be there and at least every
    /// `Self.pollSeconds`; Redis unreachable until the deadline: `backendUnavailable`.
    /// A consumer that hung up takes nothing.
    package func parkTake(max: Int, ackSeconds: Double?, until deadline: Timestamp) async throws(PipelineError)
        -> [PipelineDelivery]
    {
        let maxBytes = maxTakeBytes
        return try await park(
            Self.itemsSubject, until: deadline,
            read: { store async throws(PipelineError) in
                if Task.isCancelled { return [] }
                return try await store.take(max: max, ackSeconds: ackSeconds, maxBytes: maxBytes)
            },
            met: { !$0.isEmpty }
        ).get()
    }

    /// Pushes at every notice that room may be there and at least every
    /// `Self.pollSeconds`; `.full` at the deadline or when cancelled (a
    /// producer that hung up pushes nothing).
    package func parkPush(_ request: PipelinePushRequest, until deadline: Timestamp) async throws(PipelineError)
        -> PipelinePushResult
    {
        let pushed = try await park(
            Self.roomSubject, until: deadline,
            read: { store async throws(PipelineError) -> PipelinePushResult? in
                if Task.isCancelled { return nil }
                do throws(PipelineError) { return try await store.push(request) } catch {
                    guard case .full = error else { throw error }
                    return nil
                }
            },
            met: { $0 != nil }
        ).get()
        guard let pushed else { throw .full(retryAfterSeconds: 1) }
        return pushed
    }

    /// Reads the item at every notice of a change and at least every
    /// `Self.pollSeconds` until it has moved from `earlier`'s status and
    /// delivery, or `deadline` passes.
    package func parkUntilChange(id: String, from earlier: PipelineItem, until deadline: Timestamp)
        async throws(PipelineError) -> PipelineItem
    {
        try await park(
            Self.changeSubject, until: deadline,
            read: { store async throws(PipelineError) in try await store.item(id).item },
            met: { $0.hasMoved(from: earlier.status, fence: earlier.fence) }
        ).get()
    }

    // MARK: Lifecycle

    /// Creates the pipeline in Redis, or answers the config of the one there.
    package func create(_ config: PipelineConfig) async throws(PipelineError) -> (
        config: PipelineConfig, created: Bool
    ) {
        try await store.create(config)
    }

    // MARK: NoticeListener

    /// Notices wake waits parked here and feed event subscribers here; with
    /// neither, they are dropped unread (see `RedisResource.isHeard`).
    package var wantsNotices: Bool { isHeard(events) }

    package func receive(_ payload: [UInt8]) {
        guard let notice = RedisPipelineStore.decodeNotice(payload) else { return }
        if notice.deleted {
            close()
            return
        }
        arm(at: notice.next)
        emitEvents(notice)
        if notice.itemsAvailable { board.post(Self.itemsSubject) }
        if notice.roomAvailable { board.post(Self.roomSubject) }
        board.post(Self.changeSubject)
    }

    // MARK: Internals

    private struct Handed: Sendable {
        let id: String
        let fence: Int64
    }

    /// Emits what the notice reports, as `Pipeline` does for its own changes.
    private func emitEvents(_ notice: PipelineNotice) {
        guard let events, events.isRecording else { return }
        for e in notice.events {
            let subject: EventSubject =
                e.type == "delivered"
                ? .delivery(PipelineDelivery(handing: e.item, payload: e.item.payload))
                : .pipelineItem(e.item, reason: e.reason)
            events.emit(ResourceEvent.Draft(kind: "pipeline", name: name, type: e.type, subject: subject))
        }
        for (type, n) in [("redelivered", notice.redelivered), ("dead-lettered", notice.deadLettered)] where n > 0 {
            events.emit(ResourceEvent.Draft(kind: "pipeline", name: name, type: type, subject: .count(n)))
        }
        if let u = notice.updated {
            let changes = Pipeline.configChanges(from: u.before, paused: u.wasPaused, to: u.after, paused: u.paused)
            events.emitUpdated(kind: "pipeline", name: name, changes)
        }
    }
}
