import Foundation
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// What a pool operation costs through `pool.lua` (printed, for the record;
/// the only checks are that the calls work).
@Suite(.serialized, .timeLimit(.minutes(1))) struct RedisPoolMeasureTests {
    @Test func fetchAndRecycleCostOneRoundTripEach() async throws {
        let server = try await RedisServer()
        let connection = server.connection()
        let store = RedisPoolStore(
            keys: ResourceKeys(prefix: "usher:", kind: "pool", name: "bench"),
            connections: RedisConnectionPool([connection]), time: .server, channel: "usher:notices",
            onDeadline: { _ in })
        let elements = (0..<1000).map { PoolElementSpec(id: "e\($0)", data: .object([("n", .int($0))])) }
        _ = try await store.create(PoolConfig(elements: elements))
        // Warm up, and fill the history of 1000 finished leases so every recycle also forgets one.
        for i in 0..<1200 { _ = try await store.recycle(lease: try await store.fetch(FetchRequest(id: "w\(i)")).id) }

        let calls = 2000
        var fetchMicros = 0.0
        var recycleMicros = 0.0
        #expect(try await connection.command(["CONFIG", "RESETSTAT"]) == .status("OK"))
        for i in 0..<calls {
            var started = ContinuousClock.now
            let lease = try await store.fetch(FetchRequest(id: "l\(i)", holder: "h\(i % 7)"))
            fetchMicros += RedisMachineMeasureTests.micros(ContinuousClock.now - started)
            started = ContinuousClock.now
            _ = try await store.recycle(lease: lease.id)
            recycleMicros += RedisMachineMeasureTests.micros(ContinuousClock.now - started)
        }
        let inRedis = try await RedisMachineMeasureTests.evalshaMicros(connection)

        // A state page of 100 elements, half of them leased.
        for i in 0..<500 { _ = try await store.fetch(FetchRequest(id: "s\(i)")) }
        #expect(try await connection.command(["CONFIG", "RESETSTAT"]) == .status("OK"))
        let started = ContinuousClock.now
        for _ in 0..<200 { _ = try await store.state(limit: 100) }
        let perState = RedisMachineMeasureTests.micros(ContinuousClock.now - started) / 200
        let stateInRedis = try await RedisMachineMeasureTests.evalshaMicros(connection)

        let f = RedisMachineMeasureTests.format
        print(
            "pool (1000 elements): fetch \(f(fetchMicros / Double(calls))) µs/call, recycle "
                + "\(f(recycleMicros / Double(calls))) µs/call awaited (\(f(inRedis)) µs per script in Redis); "
                + "state page of 100: \(f(perState)) µs/call (\(f(stateInRedis)) µs in Redis)")
    }
}
