import Testing

@testable import UsherCore

/// `GET …/items/{id}?wait` and `GET …/leases/{id}?wait`: one window item or
/// one lease, as `GET …/visitors/{id}?wait` is for a queue; and an element's
/// holder history. On a `ManualClock`.
@Suite struct SingleReadTests {
    typealias F = QueueFixtures
    let clock = ManualClock()

    func later(_ seconds: Double) -> Timestamp { clock.now().adding(seconds: seconds) }

    // MARK: - Window items

    func window() -> WindowSlot { WindowSlot(name: "w", config: WindowConfig(), clock: clock) }

    @Test func anItemLongPollAnswersWhenItsStatusChanges() async throws {
        let w = window()
        _ = try await w.show(ShowRequest(id: "a"))
        _ = try await w.show(ShowRequest(id: "b"))
        let waiter = Task { try await w.parkForChange(id: "b", from: .queued, until: later(30)).item() }
        await F.eventually { await w.waiterCount == 1 }
        _ = try await w.dismiss()
        let b = try await waiter.value
        #expect(b.status == .showing && b.id == "b")
    }

    @Test func anItemLongPollAnswersAsItIsAtTheDeadline() async throws {
        let w = window()
        _ = try await w.show(ShowRequest(id: "a"))
        let waiter = Task { try await w.parkForChange(id: "a", from: .showing, until: later(5)).item() }
        await F.eventually { await w.waiterCount == 1 }
        clock.advance(by: 5)
        #expect(try await waiter.value.status == .showing)
    }

    @Test func aFinishedOrChangedItemIsAnsweredAtOnce() async throws {
        let w = window()
        _ = try await w.show(ShowRequest(id: "a"))
        _ = try await w.dismiss()
        // Finished: answered as it is, nothing parks.
        #expect(try await w.parkForChange(id: "a", from: .dismissed, until: later(30)).item().status == .dismissed)
        // The caller saw it showing; it is dismissed by now.
        #expect(try await w.parkForChange(id: "a", from: .showing, until: later(30)).item().status == .dismissed)
        #expect(await w.waiterCount == 0)
        await #expect(throws: WindowError.notFound("item \"zz\"")) {
            try await w.parkForChange(id: "zz", from: .queued, until: later(30)).item()
        }
    }

    // MARK: - Leases

    func pool(_ n: Int = 1) -> LeasePool {
        LeasePool(name: "p", config: PoolConfig(elements: PoolFixtures.elements(n)), clock: clock)
    }

    @Test func aLeaseLongPollAnswersWhenTheFetchIsGranted() async throws {
        let p = pool()
        _ = try p.fetchNow(FetchRequest(id: "a", holder: "alice"))
        let fetcher = Task { try await p.fetch(FetchRequest(id: "b", holder: "bob"), until: later(30)) }
        await F.eventually { await p.waiterCount == 1 }
        #expect(try await p.lease(id: "b").status == .waiting)
        let watcher = Task { try await p.parkForChange(id: "b", from: .waiting, until: later(30)).lease() }
        await F.eventually { await p.waiterCount == 2 }
        _ = try p.recycleNow(lease: "a")
        let b = try await watcher.value
        #expect(b.status == .active && b.element == "e0" && b.holder == "bob")
        #expect(try await fetcher.value == b)
    }

    @Test func anActiveLeaseLongPollAnswersWhenItEnds() async throws {
        let p = pool()
        _ = try p.fetchNow(FetchRequest(id: "a", leaseSeconds: 10))
        let watcher = Task { try await p.parkForChange(id: "a", from: .active, until: later(30)).lease() }
        await F.eventually { await p.waiterCount == 1 }
        clock.advance(by: 10)
        let a = try await watcher.value
        #expect(a.status == .expired && a.element == "e0")
        // Finished: answered at once.
        #expect(try await p.parkForChange(id: "a", from: .expired, until: later(30)).lease() == a)
    }

    @Test func aWaitingFetchThatGivesUpIsNotFound() async throws {
        let p = pool()
        _ = try p.fetchNow(FetchRequest(id: "a"))
        let fetcher = Task { try await p.fetch(FetchRequest(id: "b"), until: later(5)) }
        await F.eventually { await p.waiterCount == 1 }
        let watcher = Task { try await p.parkForChange(id: "b", from: .waiting, until: later(30)).lease() }
        await F.eventually { await p.waiterCount == 2 }
        clock.advance(by: 5)
        await #expect(throws: PoolError.self) { try await fetcher.value }
        await #expect(throws: PoolError.notFound("lease \"b\"")) { try await watcher.value }
    }

    // MARK: - Lease history of an element

    func element(_ p: LeasePool, _ id: String = "e0") throws -> PoolElement? {
        try p.stateNow().elements.first { $0.id == id }
    }

    @Test func transitionsCountHolderChangesNotLeases() throws {
        let p = pool()
        #expect(try element(p)?.leaseTransitions == 0 && element(p)?.lastHolder == nil)
        // The first lease is no transition (Kubernetes: creating the Lease).
        _ = try p.fetchNow(FetchRequest(id: "a1", holder: "alice"))
        #expect(try element(p)?.leaseTransitions == 0 && element(p)?.lastHolder == "alice")
        // The same holder again is no change.
        _ = try p.recycleNow(lease: "a1")
        _ = try p.fetchNow(FetchRequest(id: "a2", holder: "alice"))
        #expect(try element(p)?.leaseTransitions == 0)
        // Another holder is.
        _ = try p.recycleNow(lease: "a2")
        _ = try p.fetchNow(FetchRequest(id: "b1", holder: "bob"))
        #expect(try element(p)?.leaseTransitions == 1 && element(p)?.lastHolder == "bob")
        // An ended lease keeps its holder shown.
        _ = try p.recycleNow(lease: "b1")
        #expect(try element(p)?.lease == nil && element(p)?.lastHolder == "bob")
        // A lease without a holder always counts, and shows no holder.
        _ = try p.fetchNow(FetchRequest(id: "n1"))
        #expect(try element(p)?.leaseTransitions == 2 && element(p)?.lastHolder == nil)
        _ = try p.recycleNow(lease: "n1")
        _ = try p.fetchNow(FetchRequest(id: "n2"))
        #expect(try element(p)?.leaseTransitions == 3)
        _ = try p.recycleNow(lease: "n2")
        _ = try p.fetchNow(FetchRequest(id: "c1", holder: "carol"))
        #expect(try element(p)?.leaseTransitions == 4 && element(p)?.lastHolder == "carol")
        try p.checkInvariants()
    }

    @Test func anExpiryHandingTheElementToAWaiterCountsAndAnExtendDoesNot() async throws {
        let p = pool()
        _ = try p.fetchNow(FetchRequest(id: "a", holder: "alice", leaseSeconds: 10))
        _ = try await p.extend(lease: "a", leaseSeconds: 20)
        #expect(try element(p)?.leaseTransitions == 0)
        let fetcher = Task { try await p.fetch(FetchRequest(id: "b", holder: "bob"), until: later(60)) }
        await F.eventually { await p.waiterCount == 1 }
        clock.advance(by: 20)
        #expect(try await fetcher.value.holder == "bob")
        #expect(try element(p)?.leaseTransitions == 1 && element(p)?.lastHolder == "bob")
    }

    @Test func theLastHolderIsChargedToTheStorageBudget() throws {
        let budget = StorageBudget()
        let p = LeasePool(
            name: "p", config: PoolConfig(elements: PoolFixtures.elements(1), leaseSeconds: 60), clock: clock,
            budget: budget)
        let holder = String(repeating: "h", count: 200)
        _ = try p.fetchNow(FetchRequest(id: "a", holder: holder))
        _ = try p.recycleNow(lease: "a")
        let withHolder = budget.usedBytes
        _ = try p.withIsolation { p throws(PoolError) in try p.removeElement("e0", force: false) }
        #expect(withHolder - budget.usedBytes >= 200 + StorageBudget.cost("e0"))
        p.withIsolation { $0.close() }
        #expect(budget.usedBytes == 0)
    }
}
