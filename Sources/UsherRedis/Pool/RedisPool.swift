import Answers
import RedisClient
import UsherCore

/// A pool kept in Redis and shared by every Usher that uses the same Redis:
/// `PoolService` over `RedisPoolStore`. Every answer comes later (one script
/// call). This object holds no pool state of its own, only what this process
/// does about it: fetches and lease reads parked here, the timer at the
/// pool's next deadline, events for this process's subscribers.
package final class RedisPool: PoolService, RedisResource {
    package let name: String
    package let store: RedisPoolStore
    private let backend: RedisBackend
    private let events: EventLog?
    package let host: LocalHost

    package init(name: String, backend: RedisBackend, events: EventLog?) {
        self.name = name
        self.backend = backend
        self.events = events
        self.host = LocalHost(kind: "pool", name: name, backend: backend)
        self.store = RedisPoolStore(host: host)
        host.drive(self)
    }

    // MARK: PoolService

    package func readConfig() -> Pending<PoolConfig, PoolError> {
        call { store async throws(PoolError) in try await store.config() }
    }

    package func fetchLease(_ r: FetchRequest) -> Pending<FetchOutcome, PoolError> {
        call { store async throws(PoolError) in try await store.fetchOutcome(r) }
    }

    package func fetchLease(_ r: FetchRequest, until deadline: Timestamp) -> Pending<FetchOutcome, PoolError> {
        call { [self] store async throws(PoolError) in
            let outcome: FetchOutcome
            do throws(PoolError) {
                outcome = try await store.fetchOutcome(r, waiting: true, heardUntil: deadline)
            } catch {
                // Redis may still run the fetch and put it in the line, where nobody waits for it.
                if case .backendUnavailable = error, let id = r.id { abandon(id, mayArriveLate: true) }
                throw error
            }
            guard outcome.lease.status == .waiting else { return outcome }
            let id = outcome.lease.id
            let parked = await park(id: id, until: deadline) { $0.status != .waiting }
            // One step: the element it was given by now, or out of the line (`exhausted`).
            switch parked {
            case .failure(.gone): throw .gone
            case .success(let lease) where lease.status != .waiting:
                return FetchOutcome(lease: lease, created: outcome.created)
            // Not found: another request with the same id stopped waiting first and withdrew it.
            case .success, .failure(.notFound):
                do throws(PoolError) {
                    return FetchOutcome(lease: try await store.withdraw(id: id), created: outcome.created)
                } catch {
                    if case .backendUnavailable = error { abandon(id) }
                    throw error
                }
            case .failure(let error):
                abandon(id)
                throw error
            }
        }
    }

    package func recycleLease(_ id: String) -> Pending<Lease, PoolError> {
        call { store async throws(PoolError) in try await store.recycle(lease: id) }
    }

    package func recycleElement(_ id: String) -> Pending<Lease, PoolError> {
        call { store async throws(PoolError) in try await store.recycle(element: id) }
    }

    package func extendLease(_ id: String, leaseSeconds: Double?) -> Pending<Lease, PoolError> {
        call { store async throws(PoolError) in try await store.extend(lease: id, leaseSeconds: leaseSeconds) }
    }

    package func readLease(_ id: String) -> Pending<Lease, PoolError> {
        call { store async throws(PoolError) in try await store.lease(id: id) }
    }

    package func readState(limit: Int, after cursor: Int64?) -> Pending<PoolState, PoolError> {
        call { store async throws(PoolError) in try await store.state(limit: limit, after: cursor) }
    }

    package func applyPatch(_ patch: PoolPatch) -> Pending<PoolConfig, PoolError> {
        call { store async throws(PoolError) in try await store.apply(patch) }
    }

    package func putElement(id: String, data: JSONValue?) -> Pending<(element: PoolElement, created: Bool), PoolError> {
        call { store async throws(PoolError) in try await store.putElement(id, data: data) }
    }

    package func removeElement(id: String, force: Bool) -> Pending<ElementRemoval, PoolError> {
        call { store async throws(PoolError) in try await store.removeElement(id, force: force) }
    }

    package func recycleUndelivered(id: String, fence: Int64) {
        let store = store
        Task { _ = try? await store.recycleUndelivered(lease: id, fence: fence) }
    }

    package func parkUntilChange(id: String, from status: LeaseStatus, until deadline: Timestamp) async -> LeaseWait {
        LeaseWait(result: await park(id: id, until: deadline) { $0.status != status })
    }

    // MARK: Lifecycle

    /// Sizes (for the list route's summary).
    package func counts() async throws(PoolError) -> (size: Int, available: Int, leased: Int, waiting: Int) {
        let counts = try await store.counts()
        return (counts.size, counts.available, counts.leased, counts.waiting)
    }

    /// Creates the pool in Redis, or answers the config of the one there.
    package func create(_ config: PoolConfig) async throws(PoolError) -> (config: PoolConfig, created: Bool) {
        try await store.create(config)
    }

    // MARK: NoticeListener

    /// Notices wake waits parked here and feed event subscribers here; with
    /// neither, they are dropped unread (see `RedisResource.isHeard`).
    package var wantsNotices: Bool { isHeard(events) }

    package func receive(_ payload: [UInt8]) {
        guard let notice = RedisPoolStore.decodeNotice(payload) else { return }
        if notice.deleted {
            close()
            return
        }
        arm(at: notice.next)
        emitEvents(notice)
        for changed in notice.changed { board.post(changed.lease.id) }
        for lease in notice.withdrawn { board.post(lease.id) }
    }

    // MARK: Internals

    /// Waits until `met` holds for the lease (`park`); its client counts as heard of meanwhile.
    private func park(id: String, until deadline: Timestamp, _ met: (Lease) -> Bool) async -> Result<
        Lease, PoolError
    > {
        await park(id, until: deadline) { store async throws(PoolError) in
            try await store.lease(id: id, heardUntil: deadline)
        } met: {
            met($0)
        }
    }

    /// A waiting fetch whose caller got an error instead of a lease leaves
    /// the line, retried for a minute while Redis does not answer; a lease it
    /// was granted meanwhile is recycled (`undelivered`), as nobody has it.
    /// `mayArriveLate`: the fetch itself may still be on its way to Redis
    /// (its answer timed out), so a first "not there" is asked again a second later.
    private func abandon(_ id: String, mayArriveLate: Bool = false) {
        let store = store
        Task {
            var lateChecks = mayArriveLate ? 1 : 0
            for _ in 0..<60 {
                do throws(PoolError) {
                    let lease = try await store.withdraw(id: id)
                    if lease.status == .active, let fence = lease.fence {
                        _ = try? await store.recycleUndelivered(lease: id, fence: fence)
                    }
                    return
                } catch {
                    switch error {
                    case .backendUnavailable: break
                    case _ where lateChecks > 0: lateChecks -= 1
                    default: return
                    }
                }
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// Emits what the notice reports, as `LeasePool` does for its own changes.
    private func emitEvents(_ notice: PoolNotice) {
        guard let events, events.isRecording else { return }
        for (lease, status) in notice.changed {
            let type =
                switch (status, lease.status) {
                case (.cancelled, _), (.merged, _): "cancelled"
                case (_, .active): "leased"
                default: lease.status.rawValue
                }
            events.emit(ResourceEvent.Draft(kind: "pool", name: name, type: type, subject: .lease(lease)))
        }
        for lease in notice.withdrawn {
            events.emit(ResourceEvent.Draft(kind: "pool", name: name, type: "cancelled", subject: .lease(lease)))
        }
        if let (before, after) = notice.updated {
            events.emitUpdated(kind: "pool", name: name, PoolConfig.changes(from: before, to: after))
        }
    }
}
