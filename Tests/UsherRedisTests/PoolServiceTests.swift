import Foundation
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// `PoolService` on both backends with a `ManualClock`: the same calls, the
/// same answers (waits included), the same events.
@Suite struct PoolServiceTests {
    typealias Backend = TestBackend
    typealias Rig = ServiceRig<any PoolService>

    static let one = PoolConfig(elements: [PoolElementSpec(id: "e")], leaseSeconds: 10)

    @Test(arguments: Backend.allCases)
    func anExpiryServesAWaitingFetch(_ backend: Backend) async throws {
        let rig = try await Rig(backend, config: Self.one)
        let fetched = try await rig.pool.fetchLease(FetchRequest(id: "a", holder: "ann")).value()
        #expect(fetched.created)
        let held = fetched.lease
        #expect(held.element == "e" && held.expiresAt == rig.clock.now().adding(seconds: 10))
        let deadline = rig.clock.now().adding(seconds: 30)
        let pool = rig.pool
        let waiting = Task {
            try await pool.fetchLease(FetchRequest(id: "w", holder: "wes"), until: deadline).value()
        }
        #expect(await poll { await rig.waiting() == 1 })
        rig.clock.advance(by: 10)
        let outcome = try await waiting.value
        #expect(outcome.created)
        let served = outcome.lease
        #expect(served.id == "w" && served.status == .active && served.element == "e")
        #expect(served.grantedAt == held.expiresAt && served.createdAt == held.createdAt)
        #expect(try await rig.pool.readLease("a").value().status == .expired)
        #expect(
            await poll { rig.eventTypes == ["leased a", "waiting w", "expired a", "leased w"] }, "\(rig.eventTypes)")
        await rig.stop()
    }

    @Test(arguments: Backend.allCases)
    func aWaitThatEndsUnservedLeavesTheLine(_ backend: Backend) async throws {
        let rig = try await Rig(backend, config: Self.one)
        let held = try await rig.pool.fetchLease(FetchRequest(id: "a")).value().lease
        let deadline = rig.clock.now().adding(seconds: 2)
        let pool = rig.pool
        let waiting = Task {
            await pool.fetchLease(FetchRequest(id: "w"), until: deadline).result().map(\.lease)
        }
        #expect(await poll { await rig.waiting() == 1 })
        rig.clock.advance(by: 2)
        let answer = await waiting.value
        #expect(answer == .failure(.exhausted(nextExpiryAt: held.expiresAt)), "\(answer)")
        #expect(await rig.waiting() == 0)
        await #expect(throws: PoolError.notFound("lease \"w\"")) { try await rig.pool.readLease("w").value() }
        let counts = try await rig.pool.readState(limit: 0, after: nil).value().counts
        #expect(counts.fetchedTotal == 1)
        #expect(await poll { rig.eventTypes == ["leased a", "waiting w", "cancelled w"] }, "\(rig.eventTypes)")
        await rig.stop()
    }

    @Test(arguments: Backend.allCases)
    func aLeaseWaitSeesTheRecycle(_ backend: Backend) async throws {
        let rig = try await Rig(backend, config: Self.one)
        _ = try await rig.pool.fetchLease(FetchRequest(id: "a")).value()
        let deadline = rig.clock.now().adding(seconds: 30)
        let pool = rig.pool
        let watching = Task { try await pool.parkUntilChange(id: "a", from: .active, until: deadline).lease() }
        try await Task.sleep(for: .milliseconds(50))
        let recycled = try await rig.pool.recycleElement("e").value()
        #expect(recycled.id == "a" && recycled.status == .recycled)
        #expect(try await watching.value == recycled)
        #expect(await poll { rig.eventTypes == ["leased a", "recycled a"] }, "\(rig.eventTypes)")
        await rig.stop()
    }

    /// A retry with the same id answered the lease: the undo of the fetch
    /// before it leaves the lease alone (`b`, not retried, is the control).
    @Test(arguments: Backend.allCases)
    func aLeaseAnsweredToARetryIsNotUndone(_ backend: Backend) async throws {
        let two = PoolConfig(elements: [PoolElementSpec(id: "e"), PoolElementSpec(id: "f")], leaseSeconds: 10)
        let rig = try await Rig(backend, config: two)
        let a = try await rig.pool.fetchLease(FetchRequest(id: "a")).value().lease
        let b = try await rig.pool.fetchLease(FetchRequest(id: "b")).value().lease
        #expect(try await rig.pool.fetchLease(FetchRequest(id: "a")).value() == FetchOutcome(lease: a, created: false))
        rig.pool.recycleUndelivered(id: "a", fence: try #require(a.fence))
        rig.pool.recycleUndelivered(id: "b", fence: try #require(b.fence))
        #expect(await poll { (try? await rig.pool.readLease("b").value())?.status == .recycled })
        try await Task.sleep(for: .milliseconds(100))
        #expect(try await rig.pool.readLease("a").value() == a)
        await rig.stop()
    }
}

extension Result where Success == Lease, Failure == PoolError {
    fileprivate static func == (a: Self, b: Self) -> Bool {
        switch (a, b) {
        case (.success(let x), .success(let y)): x == y
        case (.failure(let x), .failure(let y)): x == y
        default: false
        }
    }
}

extension ServiceRig<any PoolService> {
    /// A pool on one backend, its clock and the events it emitted.
    convenience init(_ backend: TestBackend, config: PoolConfig) async throws {
        try await self.init(backend) { clock, events in
            LeasePool(name: "p", config: config, clock: clock, events: events)
        } shared: { redis, events in
            let made = RedisPool(name: "p", backend: redis.backend, events: events)
            _ = try await made.create(config)
            await redis.listen(made)
            return made
        }
    }

    var pool: any PoolService { service }

    /// The types and lease ids of the events emitted so far.
    var eventTypes: [String] {
        events.buffered().map { event in
            if case .lease(let l) = event.subject { "\(event.type) \(l.id)" } else { event.type }
        }
    }

    func waiting() async -> Int? { try? await pool.readState(limit: 0, after: nil).value().waiting }
}
