import Answers

/// A pool, whichever backend holds it: what the routes call. `LeasePool`
/// keeps it in memory and answers at once; a Redis-backed pool answers
/// after a round trip. Operations mean what `LeasePool`'s do.
package protocol PoolService: AnyObject, Sendable {
    var name: String { get }
    /// The current config.
    func readConfig() -> Pending<PoolConfig, PoolError>
    /// `POST …/fetch` without `wait`: a free element now, or `exhausted`.
    func fetchLease(_ r: FetchRequest) -> Pending<FetchOutcome, PoolError>
    /// `POST …/fetch?wait`: a free element now, or the first one freed for
    /// this fetcher before `deadline` (then `exhausted`, the fetch withdrawn).
    func fetchLease(_ r: FetchRequest, until deadline: Timestamp) -> Pending<FetchOutcome, PoolError>
    func recycleLease(_ id: String) -> Pending<Lease, PoolError>
    func recycleElement(_ id: String) -> Pending<Lease, PoolError>
    func extendLease(_ id: String, leaseSeconds: Double?) -> Pending<Lease, PoolError>
    func readLease(_ id: String) -> Pending<Lease, PoolError>
    func readState(limit: Int, after cursor: Int64?) -> Pending<PoolState, PoolError>
    func applyPatch(_ patch: PoolPatch) -> Pending<PoolConfig, PoolError>
    func putElement(id: String, data: JSONValue?) -> Pending<(element: PoolElement, created: Bool), PoolError>
    func removeElement(id: String, force: Bool) -> Pending<ElementRemoval, PoolError>
    /// The answer that leased `id` (its grant `fence`) never reached its
    /// client: recycled (reason `undelivered`) if it still holds that grant.
    func recycleUndelivered(id: String, fence: Int64)
    /// `GET …/leases/{id}?wait`: the lease once its status is not `status`, or at `deadline`.
    func parkUntilChange(id: String, from status: LeaseStatus, until deadline: Timestamp) async -> LeaseWait
}

extension LeasePool: PoolService {
    package nonisolated func readConfig() -> Pending<PoolConfig, PoolError> {
        .ready(.success(withIsolation { $0.config }))
    }

    package nonisolated func fetchLease(_ r: FetchRequest) -> Pending<FetchOutcome, PoolError> {
        .now { () throws(PoolError) in try withIsolation { p throws(PoolError) in try p.fetchOutcome(r) } }
    }

    package nonisolated func fetchLease(_ r: FetchRequest, until deadline: Timestamp) -> Pending<
        FetchOutcome, PoolError
    > {
        // Answered on the server thread when an element is free now; parked only to wait.
        do throws(PoolError) {
            return .ready(.success(try withIsolation { p throws(PoolError) in try p.fetchOutcome(r) }))
        } catch {
            guard case .exhausted = error else { return .ready(.failure(error)) }
        }
        return .async { [self] () async throws(PoolError) -> FetchOutcome in
            try await fetchOutcome(r, until: deadline)
        }
    }

    package nonisolated func recycleLease(_ id: String) -> Pending<Lease, PoolError> {
        .now { () throws(PoolError) in try withIsolation { p throws(PoolError) in try p.recycle(lease: id) } }
    }

    package nonisolated func recycleElement(_ id: String) -> Pending<Lease, PoolError> {
        .now { () throws(PoolError) in try withIsolation { p throws(PoolError) in try p.recycle(element: id) } }
    }

    package nonisolated func extendLease(_ id: String, leaseSeconds: Double?) -> Pending<Lease, PoolError> {
        .now { () throws(PoolError) in
            try withIsolation { p throws(PoolError) in try p.extend(lease: id, leaseSeconds: leaseSeconds) }
        }
    }

    package nonisolated func readLease(_ id: String) -> Pending<Lease, PoolError> {
        .now { () throws(PoolError) in try withIsolation { p throws(PoolError) in try p.lease(id: id) } }
    }

    package nonisolated func readState(limit: Int, after cursor: Int64?) -> Pending<PoolState, PoolError> {
        .now { () throws(PoolError) in
            try withIsolation { p throws(PoolError) in try p.state(limit: limit, after: cursor) }
        }
    }

    package nonisolated func applyPatch(_ patch: PoolPatch) -> Pending<PoolConfig, PoolError> {
        .now { () throws(PoolError) in try withIsolation { p throws(PoolError) in try p.apply(patch) } }
    }

    package nonisolated func putElement(id: String, data: JSONValue?) -> Pending<
        (element: PoolElement, created: Bool), PoolError
    > {
        .now { () throws(PoolError) in try withIsolation { p throws(PoolError) in try p.putElement(id, data: data) } }
    }

    package nonisolated func removeElement(id: String, force: Bool) -> Pending<ElementRemoval, PoolError> {
        .now { () throws(PoolError) in
            try withIsolation { p throws(PoolError) in try p.removeElement(id, force: force) }
        }
    }

    package nonisolated func recycleUndelivered(id: String, fence: Int64) {
        _ = try? withIsolation { p throws(PoolError) in try p.recycleUndelivered(lease: id, fence: fence) }
    }

    package func parkUntilChange(id: String, from status: LeaseStatus, until deadline: Timestamp) async -> LeaseWait {
        await parkForChange(id: id, from: status, until: deadline)
    }
}

extension LeaseWait {
    /// A wait that ended with `result` (a backend other than memory).
    package convenience init(result: Result<Lease, PoolError>) {
        self.init(result)
    }
}

extension LeasePool {
    /// A lease of `seconds` the pool does not allow (`lease_seconds` is its
    /// limit, 0 = none): the problem, or nil.
    package static func leaseProblem(_ seconds: Double?, limit: Double) -> PoolError? {
        guard let s = seconds else { return nil }
        guard Durations.isAllowed(s) else { return .invalid(field: "lease_seconds", message: Durations.range()) }
        return HoldPolicy.excess(s, limit: limit, resource: "pool", holds: "leases", field: "lease_seconds").map {
            .invalid(field: "lease_seconds", message: $0)
        }
    }
}

// Values a store other than memory builds (the memberwise ones are internal).

extension Lease {
    package init(
        id: String, element: String?, elementData: JSONValue?, holder: String?, status: LeaseStatus,
        createdAt: Timestamp, grantedAt: Timestamp?, expiresAt: Timestamp?, finishedAt: Timestamp?, fence: Int64?,
        reason: String?
    ) {
        self.id = id
        self.element = element
        self.elementData = elementData
        self.holder = holder
        self.status = status
        self.createdAt = createdAt
        self.grantedAt = grantedAt
        self.expiresAt = expiresAt
        self.finishedAt = finishedAt
        self.fence = fence
        self.reason = reason
    }
}

extension PoolCounts {
    package init(
        fetched: Int, recycled: Int, expired: Int, revoked: Int, grown: Int, abandoned: Int = 0, unclaimed: Int = 0
    ) {
        fetchedTotal = fetched
        recycledTotal = recycled
        expiredTotal = expired
        revokedTotal = revoked
        grownTotal = grown
        abandonedTotal = abandoned
        unclaimedTotal = unclaimed
    }
}

extension PoolState {
    package init(
        name: String, config: PoolConfig, size: Int, available: Int, leased: Int, waiting: Int,
        nextExpiryAt: Timestamp?, elements: [PoolElement], counts: PoolCounts
    ) {
        self.name = name
        self.config = config
        self.size = size
        self.available = available
        self.leased = leased
        self.waiting = waiting
        self.nextExpiryAt = nextExpiryAt
        self.elements = elements
        self.counts = counts
    }
}
