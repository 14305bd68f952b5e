import Foundation
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// Script time per call: `USHER_MEASURE=1 swift test --filter scriptTime`.
extension RedisQueueStoreTests {
    @Test(.enabled(if: ProcessInfo.processInfo.environment["USHER_MEASURE"] == "1"))
    func scriptTime() async throws {
        let server = try await RedisServer()
        let connection = server.connection()
        let clock = ManualClock(start: Self.start)
        let q = Self.store(server, clock, connection: connection)
        _ = try await q.create(QueueConfig(capacity: 1, maxWaiting: 1_000_000, history: 1000))
        func redisMicros() async throws -> Double {
            let info = try await connection.command(["INFO", "commandstats"]).string ?? ""
            let line = info.split(separator: "\r\n").first { $0.hasPrefix("cmdstat_evalsha:") } ?? ""
            let field = line.split(separator: ",").first { $0.hasPrefix("usec_per_call=") } ?? ""
            return Double(field.dropFirst("usec_per_call=".count)) ?? 0
        }
        func measure(_ label: String, _ n: Int, _ body: (Int) async throws -> Void) async throws {
            _ = try await connection.command(["CONFIG", "RESETSTAT"])
            let elapsed = try await ContinuousClock().measure { for i in 0..<n { try await body(i) } }
            let perCall = elapsed / n
            let micros = Double(perCall.components.attoseconds) / 1e12 + Double(perCall.components.seconds) * 1e6
            print("\(label): \(Int(micros)) µs per call, \(try await redisMicros()) µs of it in Redis")
        }
        let n = 3000
        try await measure("enqueue, granted at once", n) { i in
            _ = try await q.enqueue(VisitorRequest(id: "g\(i)"))
        }
        clock.advance(by: 1)
        try await measure("complete, nobody waiting", n) { i in
            _ = try await q.complete(id: "g\(i)")
        }
        _ = try await q.apply(QueuePatch(capacity: 1))
        _ = try await q.enqueue(VisitorRequest(id: "holder"))
        let waiting = 100_000
        try await measure("enqueue behind up to 100,000 waiting", waiting) { i in
            _ = try await q.enqueue(VisitorRequest(id: "w\(i)", key: "k\(i)", priority: i % 3))
        }
        // Grant order: priority 2, then 1, then 0; arrival order within each.
        let order = ["holder"] + [2, 1, 0].flatMap { p in (0..<waiting).filter { $0 % 3 == p }.map { "w\($0)" } }
        clock.advance(by: 1)
        try await measure("complete, granting the next of 100,000", n) { i in
            _ = try await q.complete(id: order[i])
        }
    }
}
