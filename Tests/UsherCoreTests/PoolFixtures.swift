import Testing

@testable import UsherCore

/// Synchronous calls on a pool, as the HTTP layer makes them.
extension LeasePool {
    nonisolated func fetchNow(_ r: FetchRequest = FetchRequest()) throws(PoolError) -> Lease {
        try withIsolation { p throws(PoolError) in try p.fetch(r) }
    }

    nonisolated func recycleNow(lease id: String) throws(PoolError) -> Lease {
        try withIsolation { p throws(PoolError) in try p.recycle(lease: id) }
    }

    nonisolated func recycleNow(element id: String) throws(PoolError) -> Lease {
        try withIsolation { p throws(PoolError) in try p.recycle(element: id) }
    }

    nonisolated func stateNow() throws(PoolError) -> PoolState {
        try withIsolation { p throws(PoolError) in try p.state(limit: 100_000) }
    }

    /// Checks what must hold after every operation: each leased element under
    /// exactly one active lease, the engine's capacity the element count, its
    /// holders the leased elements, and the totals adding up.
    nonisolated func checkInvariants(sourceLocation: SourceLocation = #_sourceLocation) throws(PoolError) {
        let s = try stateNow()
        let (capacity, holding) = withIsolation { p in (p.engine.config.capacity, p.engine.counts.holding) }
        #expect(capacity == s.size, "the engine's capacity is the element count", sourceLocation: sourceLocation)
        #expect(holding == s.leased, "the engine's holders are the leases", sourceLocation: sourceLocation)
        let leases = s.elements.compactMap(\.lease)
        #expect(leases.count == s.leased && s.available == s.size - s.leased, sourceLocation: sourceLocation)
        #expect(
            Set(leases.map(\.id)).count == leases.count, "a lease holds two elements", sourceLocation: sourceLocation)
        #expect(leases.allSatisfy { $0.status == .active }, sourceLocation: sourceLocation)
        #expect(s.available == 0 || s.waiting == 0, "free elements while fetchers wait", sourceLocation: sourceLocation)
        let c = s.counts
        #expect(
            c.fetchedTotal == s.leased + c.recycledTotal + c.expiredTotal + c.revokedTotal,
            sourceLocation: sourceLocation)
    }
}

enum PoolFixtures {
    /// Elements named `prefix0`, `prefix1`, …
    static func elements(_ n: Int, _ prefix: String = "e") -> [PoolElementSpec] {
        (0..<n).map { PoolElementSpec(id: "\(prefix)\($0)") }
    }
}
