import Foundation
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// `PoolService` on both backends with a `ManualClock`: the same calls, the
/// same answers (waits included), the same events.
@Suite struct PoolServiceTests {
    enum Backend: String, CaseIterable, Sendable { case memory, redis }

    /// A pool on one backend, its clock and the events it emitted.
    final class Rig: Sendable {
        let clock: ManualClock
        let events: EventLog
        let pool: any PoolService
        private let redis: (server: RedisServer, backend: RedisBackend)?

        init(_ backend: Backend, config: PoolConfig) async throws {
            let clock = ManualClock()
            let events = EventLog(clock: clock)
            events.subscribe(after: nil, start: { _ in }, deliver: { _ in })
            self.clock = clock
            self.events = events
            switch backend {
            case .memory:
                pool = LeasePool(name: "p", config: config, clock: clock, events: events)
                redis = nil
            case .redis:
                let server = try await RedisServer()
                let shared = try RedisBackend(
                    settings: RedisSettings(url: "redis://127.0.0.1:\(server.port)"), time: .clock(clock), clock: clock)
                try shared.start { _ in }
                let made = RedisPool(name: "p", backend: shared, events: events)
                _ = try await made.create(config)
                made.listen()
                // Notices are heard once the subscriber is in.
                let subscribed = await poll {
                    let reply = try? await shared.command(["PUBSUB", "NUMSUB", shared.channel])
                    return (reply?.array?.last?.int ?? 0) > 0
                }
                #expect(subscribed)
                pool = made
                redis = (server, shared)
            }
        }

        func stop() async {
            guard let redis else { return }
            await redis.backend.stop()
            redis.server.stop()
        }

        /// The types and lease ids of the events emitted so far.
        var eventTypes: [String] {
            events.buffered().map { event in
                if case .lease(let l) = event.subject { "\(event.type) \(l.id)" } else { event.type }
            }
        }

        func waiting() async -> Int? { try? await pool.readState(limit: 0, after: nil).value().waiting }
    }

    static let one = PoolConfig(elements: [PoolElementSpec(id: "e")], leaseSeconds: 10)

    @Test(arguments: Backend.allCases)
    func anExpiryServesAWaitingFetch(_ backend: Backend) async throws {
        let rig = try await Rig(backend, config: Self.one)
        let held = try await rig.pool.fetchLease(FetchRequest(id: "a", holder: "ann")).value()
        #expect(held.element == "e" && held.expiresAt == rig.clock.now().adding(seconds: 10))
        let deadline = rig.clock.now().adding(seconds: 30)
        let pool = rig.pool
        let waiting = Task { try await pool.fetchLease(FetchRequest(id: "w", holder: "wes"), until: deadline).value() }
        #expect(await poll { await rig.waiting() == 1 })
        rig.clock.advance(by: 10)
        let served = try await waiting.value
        #expect(served.id == "w" && served.status == .active && served.element == "e")
        #expect(served.leasedAt == held.expiresAt)
        #expect(try await rig.pool.readLease("a").value().status == .expired)
        #expect(
            await poll { rig.eventTypes == ["leased a", "waiting w", "expired a", "leased w"] }, "\(rig.eventTypes)")
        await rig.stop()
    }

    @Test(arguments: Backend.allCases)
    func aWaitThatEndsUnservedLeavesTheLine(_ backend: Backend) async throws {
        let rig = try await Rig(backend, config: Self.one)
        let held = try await rig.pool.fetchLease(FetchRequest(id: "a")).value()
        let deadline = rig.clock.now().adding(seconds: 2)
        let pool = rig.pool
        let waiting = Task {
            await pool.fetchLease(FetchRequest(id: "w"), until: deadline).result()
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

/// Polls `condition` every 5 ms for up to 5 s.
private func poll(_ condition: () async -> Bool) async -> Bool {
    for _ in 0..<1000 {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return await condition()
}
