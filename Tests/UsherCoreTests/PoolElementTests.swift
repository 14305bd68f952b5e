import Testing

@testable import UsherCore

/// Elements at run time: add, replace, remove (forced or not), grow.
@Suite struct PoolElementTests {
    typealias F = QueueFixtures
    let clock = ManualClock()

    func pool(_ config: PoolConfig) -> LeasePool { LeasePool(name: "p", config: config, clock: clock) }

    func later(_ seconds: Double) -> Timestamp { clock.now().adding(seconds: seconds) }

    func put(_ p: LeasePool, _ id: String, _ data: JSONValue? = nil) throws -> (PoolElement, Bool) {
        try p.withIsolation { p throws(PoolError) in try p.putElement(id, data: data) }
    }

    func remove(_ p: LeasePool, _ id: String, force: Bool = false) throws -> ElementRemoval {
        try p.withIsolation { p throws(PoolError) in try p.removeElement(id, force: force) }
    }

    @Test func putAddsAtTheEndOrReplacesData() throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(1)))
        let (added, created) = try put(p, "gpu-9", .string("v1"))
        #expect(created && added.lease == nil && added.data == .string("v1"))
        let lease = try p.fetchNow()
        _ = try p.fetchNow()
        let (replaced, createdAgain) = try put(p, "gpu-9", .string("v2"))
        #expect(!createdAgain && replaced.lease?.element == "gpu-9")
        let s = try p.stateNow()
        #expect(s.elements.map(\.id) == ["e0", "gpu-9"] && s.elements[1].data == .string("v2"))
        #expect(s.config.elements == PoolFixtures.elements(1))  // the config is what was declared
        #expect(lease.element == "e0")
        try p.checkInvariants()
    }

    @Test func aNewElementGoesToAWaitingFetcherAtOnce() async throws {
        let p = pool(PoolConfig())
        let waiter = Task { try await p.fetch(FetchRequest(holder: "w"), until: later(30)) }
        await F.eventually { await p.waiterCount == 1 }
        _ = try put(p, "late")
        #expect(try await waiter.value.element == "late")
        try p.checkInvariants()
    }

    @Test func removingALeasedElementNeedsForceAndEndsTheLease() throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(2)))
        let a = try p.fetchNow(FetchRequest(holder: "h"))
        #expect(throws: PoolError.elementLeased(element: "e0", lease: a.id)) { try remove(p, "e0") }
        #expect(try p.stateNow().size == 2)
        let removal = try remove(p, "e0", force: true)
        #expect(removal.element.id == "e0")
        #expect(removal.endedLease?.status == .revoked && removal.endedLease?.id == a.id)
        // Its holder sees not_leased.
        let notLeased = PoolError.notLeased("lease \"\(a.id)\" is not active (it is revoked)", status: .revoked)
        #expect(throws: notLeased) { try p.recycleNow(lease: a.id) }
        #expect(throws: notLeased) {
            try p.withIsolation { p throws(PoolError) in try p.extend(lease: a.id, leaseSeconds: nil) }
        }
        let s = try p.stateNow()
        #expect(s.size == 1 && s.leased == 0 && s.available == 1 && s.counts.revokedTotal == 1)
        #expect(try p.fetchNow().element == "e1")
        #expect(throws: PoolError.notFound("element \"e0\"")) { try remove(p, "e0") }
        try p.checkInvariants()
    }

    @Test func removingALeasedElementWhileFetchersWaitGivesThemNothing() async throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(1)))
        _ = try p.fetchNow()
        let waiter = Task { try await p.fetch(FetchRequest(), until: later(30)) }
        await F.eventually { await p.waiterCount == 1 }
        _ = try remove(p, "e0", force: true)
        #expect(try p.stateNow().waiting == 1)
        _ = try put(p, "e1")
        #expect(try await waiter.value.element == "e1")
        try p.checkInvariants()
    }

    @Test func removingAFreeElementAndReAddingIt() throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(2)))
        #expect(try remove(p, "e0").endedLease == nil)
        _ = try put(p, "e0")
        #expect(try p.stateNow().elements.map(\.id) == ["e1", "e0"])
        #expect(try p.fetchNow().element == "e1")
        #expect(try p.fetchNow().element == "e0")
        #expect(throws: PoolError.exhausted(nextExpiryAt: later(60))) { try p.fetchNow() }
        try p.checkInvariants()
    }

    @Test func growCreatesElementsOnDemandUpToMaxSize() throws {
        let p = pool(PoolConfig(grow: PoolGrow(maxSize: 2, prefix: "el-")))
        #expect(try p.stateNow().size == 0)
        let a = try p.fetchNow()
        let b = try p.fetchNow()
        #expect(a.element == "el-1" && b.element == "el-2")
        #expect(throws: PoolError.exhausted(nextExpiryAt: later(60))) { try p.fetchNow() }
        _ = try p.recycleNow(lease: a.id)
        // A free element is used before anything grows.
        #expect(try p.fetchNow().element == "el-1")
        let s = try p.stateNow()
        #expect(s.size == 2 && s.counts.grownTotal == 2)
    }

    @Test func growCountsDeclaredElementsAndSkipsTakenNames() throws {
        let p = pool(PoolConfig(elements: [PoolElementSpec(id: "el-2")], grow: PoolGrow(maxSize: 3, prefix: "el-")))
        #expect(try (0..<3).map { _ in try p.fetchNow().element } == ["el-2", "el-1", "el-3"])
        #expect(throws: PoolError.exhausted(nextExpiryAt: later(60))) { try p.fetchNow() }
    }

    @Test func raisingMaxSizeGrowsForFetchersAlreadyWaiting() async throws {
        let p = pool(PoolConfig(grow: PoolGrow(maxSize: 1)))
        _ = try p.fetchNow()
        let waiters = (0..<2).map { i in Task { try await p.fetch(FetchRequest(id: "w\(i)"), until: later(30)) } }
        await F.eventually { await p.waiterCount == 2 }
        let config = try p.withIsolation { p throws(PoolError) in try p.apply(PoolPatch(grow: PoolGrow(maxSize: 5))) }
        #expect(config.grow?.maxSize == 5)
        let got = try await [waiters[0].value.element, waiters[1].value.element]
        #expect(Set(got.compactMap { $0 }) == ["el-2", "el-3"])
        let s = try p.stateNow()
        #expect(s.size == 3 && s.available == 0 && s.counts.grownTotal == 3)
        try p.checkInvariants()
    }

    @Test func patchChangesLeasesFromNowOn() throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(2), leaseSeconds: 60))
        let a = try p.fetchNow()
        _ = try p.withIsolation { p throws(PoolError) in try p.apply(PoolPatch(leaseSeconds: 5)) }
        #expect(try p.fetchNow().expiresAt == later(5))
        #expect(try p.withIsolation { p throws(PoolError) in try p.lease(id: a.id) }.expiresAt == later(60))
    }
}
