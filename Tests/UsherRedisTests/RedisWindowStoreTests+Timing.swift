import Foundation
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// Script time per call: `USHER_MEASURE=1 swift test --filter windowScriptTime`.
extension RedisWindowStoreTests {
    @Test(.enabled(if: ProcessInfo.processInfo.environment["USHER_MEASURE"] == "1"))
    func windowScriptTime() async throws {
        let server = try await RedisServer()
        let connection = server.connection()
        let clock = ManualClock(start: Self.start)
        let w = Self.store(server, clock, connection: connection)
        _ = try await w.create(WindowConfig(maxWaiting: 1_000_000))
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
        try await measure("show + dismiss, nothing queued (per pair)", n) { i in
            _ = try await w.show(ShowRequest(id: "s\(i)", title: "t", payload: .int(i)))
            _ = try await w.dismiss()
        }
        try await measure("showing", n) { _ in _ = try await w.showing() }
        _ = try await w.show(ShowRequest(id: "pinned", displaySeconds: 0))
        let queued = 100_000
        try await measure("show behind up to 100,000 queued", queued) { i in
            _ = try await w.show(ShowRequest(id: "q\(i)", key: "k\(i)", priority: i % 3))
        }
        try await measure("dismiss, showing the next of 100,000", n) { _ in _ = try await w.dismiss() }
        try await measure("state, first 100 of 100,000", 300) { _ in _ = try await w.state(limit: 100) }
    }
}
