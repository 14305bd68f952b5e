import Testing

@testable import UsherCore

/// `LeasePool` on a `ManualClock`: fetch, recycle, extend, expiry, fences.
@Suite struct PoolLeaseTests {
    typealias F = QueueFixtures
    let clock = ManualClock()

    func pool(_ config: PoolConfig) -> LeasePool { LeasePool(name: "gpus", config: config, clock: clock) }

    func later(_ seconds: Double) -> Timestamp { clock.now().adding(seconds: seconds) }

    @Test func fetchLeasesFreeElementsInStableOrderAndRecycleFreesThem() throws {
        let p = pool(
            PoolConfig(elements: [
                PoolElementSpec(id: "gpu-0", data: .object([("mem", .int(24))])),
                PoolElementSpec(id: "gpu-1"),
            ]))
        let a = try p.fetchNow(FetchRequest(holder: "job-1"))
        #expect(a.id == "1767225600000001" && a.element == "gpu-0" && a.elementData == .object([("mem", .int(24))]))
        #expect(a.holder == "job-1" && a.status == .active && a.grantedAt == clock.now() && a.expiresAt == later(60))
        let b = try p.fetchNow()
        #expect(b.element == "gpu-1" && b.holder == nil)
        #expect(throws: PoolError.exhausted(nextExpiryAt: later(60))) { try p.fetchNow() }
        let recycled = try p.recycleNow(lease: a.id)
        #expect(recycled.status == .recycled && recycled.finishedAt == clock.now() && recycled.element == "gpu-0")
        #expect(try p.fetchNow().element == "gpu-0")
        try p.checkInvariants()
        let c = try p.stateNow().counts
        #expect(c.fetchedTotal == 3 && c.recycledTotal == 1 && c.expiredTotal == 0)
    }

    @Test func theLeastRecentlyFreedElementGoesFirst() throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(3)))
        let l = try (0..<3).map { _ in try p.fetchNow() }
        _ = try p.recycleNow(lease: l[2].id)
        _ = try p.recycleNow(lease: l[0].id)
        #expect(try p.fetchNow().element == "e2")
        #expect(try p.fetchNow().element == "e0")
    }

    @Test func stateListsEveryElementInStableOrderWithStatusAndLease() throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(3)))
        _ = try p.fetchNow()
        let b = try p.fetchNow(FetchRequest(holder: "h"))
        _ = try p.recycleNow(element: "e0")
        let s = try p.stateNow()
        #expect(s.elements.map(\.id) == ["e0", "e1", "e2"])
        #expect(s.elements.map { $0.lease?.id } == [nil, b.id, nil])
        #expect(s.size == 3 && s.available == 2 && s.leased == 1 && s.waiting == 0)
        #expect(s.nextExpiryAt == b.expiresAt)
        #expect(
            s.elements[1].data == nil && s.elements[1].lease?.holder == "h" && s.elements[1].lease?.status == .active)
    }

    @Test func aRetriedFetchWithTheSameIDAnswersTheSameLease() throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(2)))
        let first = try p.fetchNow(FetchRequest(id: "job-7"))
        let again = try p.fetchNow(FetchRequest(id: "job-7"))
        #expect(first == again)
        _ = try p.recycleNow(lease: "job-7")
        #expect(try p.fetchNow(FetchRequest(id: "job-7")).status == .recycled)
        #expect(try p.stateNow().counts.fetchedTotal == 1)
    }

    @Test func expiredLeasesAreRecycledBeforeAFetchIsRefused() throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(1), leaseSeconds: 10))
        let a = try p.fetchNow()
        clock.advance(by: 10)  // the pool's timer runs inside advance
        let expired = try p.withIsolation { p throws(PoolError) in try p.lease(id: a.id) }
        #expect(expired.status == .expired && expired.finishedAt == F.at(10))
        #expect(try p.fetchNow().element == "e0")
        let c = try p.stateNow().counts
        #expect(c.expiredTotal == 1 && c.recycledTotal == 0)
    }

    @Test func aFetchAppliesExpiriesTheTimerHasNotRunYet() throws {
        // A clock whose timers never fire: only the operations apply time.
        let clock = StoppedTimersClock()
        let p = LeasePool(
            name: "p", config: PoolConfig(elements: PoolFixtures.elements(1), leaseSeconds: 5), clock: clock)
        _ = try p.fetchNow()
        clock.time = clock.time.adding(seconds: 5)
        #expect(try p.fetchNow().element == "e0")
    }

    @Test func leaseExpiryRacingARecycle() throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(2), leaseSeconds: 10))
        let a = try p.fetchNow()
        let b = try p.fetchNow()
        // Just before its expiry a recycle wins: recycled, and the timer finds nothing to expire.
        clock.advance(by: 9.999)
        #expect(try p.recycleNow(lease: a.id).status == .recycled)
        // At the same instant as its expiry, the expiry comes first: the recycle is refused.
        clock.advance(by: 0.001)
        #expect(throws: PoolError.notLeased("lease \"\(b.id)\" is not active (it is expired)", status: .expired)) {
            try p.recycleNow(lease: b.id)
        }
        // The element went back once, and a new lease on it is safe from the old holder.
        let c = try p.fetchNow()
        #expect(c.element == "e1" || c.element == "e0")
        #expect(throws: PoolError.notLeased("lease \"\(b.id)\" is not active (it is expired)", status: .expired)) {
            try p.recycleNow(lease: b.id)
        }
        #expect(try p.withIsolation { p throws(PoolError) in try p.lease(id: c.id) }.status == .active)
        try p.checkInvariants()
        let counts = try p.stateNow().counts
        #expect(counts.recycledTotal == 1 && counts.expiredTotal == 1 && counts.fetchedTotal == 3)
    }

    @Test func recycleErrors() throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(1)))
        #expect(throws: PoolError.notFound("element \"zz\"")) { try p.recycleNow(element: "zz") }
        #expect(throws: PoolError.notFound("lease \"zz\"")) { try p.recycleNow(lease: "zz") }
        #expect(throws: PoolError.notLeased("element \"e0\" is not leased", status: nil)) {
            try p.recycleNow(element: "e0")
        }
        let a = try p.fetchNow()
        _ = try p.recycleNow(element: "e0")
        #expect(throws: PoolError.notLeased("lease \"\(a.id)\" is not active (it is recycled)", status: .recycled)) {
            try p.recycleNow(lease: a.id)
        }
    }

    @Test func extendMovesTheExpiryWithinThePoolsLimit() throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(1), leaseSeconds: 60))
        let a = try p.fetchNow(FetchRequest(leaseSeconds: 20))
        #expect(a.expiresAt == later(20))
        clock.advance(by: 15)
        let extended = try p.withIsolation { p throws(PoolError) in try p.extend(lease: a.id, leaseSeconds: nil) }
        #expect(extended.expiresAt == later(20))  // its own lease again
        let longer = try p.withIsolation { p throws(PoolError) in try p.extend(lease: a.id, leaseSeconds: 60) }
        #expect(longer.expiresAt == later(60) && longer.fence == a.fence)
        #expect(
            throws: PoolError.invalid(field: "lease_seconds", message: "must be at most 60, the pool's lease_seconds")
        ) {
            try p.withIsolation { p throws(PoolError) in try p.extend(lease: a.id, leaseSeconds: 61) }
        }
        #expect(
            throws: PoolError.invalid(
                field: "lease_seconds", message: "must be more than 0: this pool limits leases to 60 s")
        ) {
            try p.fetchNow(FetchRequest(leaseSeconds: 0))
        }
        clock.advance(by: 60)
        #expect(throws: PoolError.notLeased("lease \"\(a.id)\" is not active (it is expired)", status: .expired)) {
            try p.withIsolation { p throws(PoolError) in try p.extend(lease: a.id, leaseSeconds: 5) }
        }
    }

    @Test func leaseSecondsZeroMeansLeasesNeverExpire() throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(1), leaseSeconds: 0))
        let a = try p.fetchNow(FetchRequest(leaseSeconds: 0))
        #expect(a.expiresAt == nil)
        #expect(throws: PoolError.exhausted(nextExpiryAt: nil)) { try p.fetchNow() }
        clock.advance(by: 1e6)
        #expect(try p.stateNow().leased == 1)
        #expect(clock.pendingCount == 0)
    }

    @Test func everyLeaseCarriesAGrowingFence() throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(1)))
        var fences: [Int64] = []
        for _ in 0..<5 {
            let l = try p.fetchNow()
            fences.append(try #require(l.fence))
            _ = try p.recycleNow(lease: l.id)
        }
        #expect(fences == (0..<5).map { F.t0.micros + Int64($0) })
    }

    @Test func closeRefusesEverything() async throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(1)))
        await p.close()
        #expect(throws: PoolError.gone) { try p.fetchNow() }
        #expect(throws: PoolError.gone) { try p.stateNow() }
    }
}

/// A clock whose scheduled calls never run, to show that operations apply time themselves.
final class StoppedTimersClock: UsherClock, @unchecked Sendable {
    var time = QueueFixtures.t0
    func now() -> Timestamp { time }
    func schedule(at deadline: Timestamp, _ action: @escaping @Sendable () -> Void) -> any ScheduledTimer { Never() }
    struct Never: ScheduledTimer { func cancel() {} }
}
