import Foundation
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// What pipeline operations cost through `pipeline.lua` (printed, for the
/// record; the only checks are that the calls work). Run by hand:
/// `USHER_MEASURE=1 swift test --filter RedisPipelineMeasureTests`.
@Suite(.serialized, .timeLimit(.minutes(2))) struct RedisPipelineMeasureTests {
    typealias Measure = RedisMachineMeasureTests

    @Test(.enabled(if: ProcessInfo.processInfo.environment["USHER_MEASURE"] == "1"))
    func pushTakeConsumeCostOneRoundTripEach() async throws {
        let server = try await RedisServer()
        let connection = server.connection()
        let store = RedisPipelineStore(
            keys: ResourceKeys(prefix: "usher:", kind: "pipeline", name: "bench"),
            connections: RedisConnectionPool([connection]), time: .server, channel: "usher:notices",
            onDeadline: { _ in })
        _ = try await store.create(PipelineConfig(capacity: 1_000_000, maxInFlight: 1_000_000))
        let calls = 3000
        let payload = JSONValue.object([("n", .int(1)), ("s", .string("some text"))])
        var figures: [String] = []
        func measure(_ what: String, _ body: () async throws -> Void) async throws {
            #expect(try await connection.command(["CONFIG", "RESETSTAT"]) == .status("OK"))
            let started = ContinuousClock.now
            try await body()
            let perCall = Measure.micros(ContinuousClock.now - started) / Double(calls)
            let inRedis = try await Measure.evalshaMicros(connection)
            figures.append("\(what) \(Measure.format(perCall)) µs/call (\(Measure.format(inRedis)) in Redis)")
        }
        try await measure("push") {
            for _ in 0..<calls { _ = try await store.push(PipelinePushRequest(payload: payload)) }
        }
        var taken: [PipelineDelivery] = []
        try await measure("take") {
            for _ in 0..<calls { taken += try await store.take(max: 1) }
        }
        #expect(taken.count == calls)
        try await measure("consume") {
            for d in taken { try await store.consume(d.id, fence: d.fence) }
        }
        _ = try await store.putFilter(
            name: "mark", PipelineFilter(action: .set(field: JSONPointer(tokens: ["seen"]), value: .bool(true))))
        for _ in 0..<calls { _ = try await store.push(PipelinePushRequest(payload: payload)) }
        try await measure("take with a filter (2 calls)") {
            for _ in 0..<calls { _ = try await store.take(max: 1) }
        }
        let state = try await store.state(limit: 0)
        #expect(state.counts.consumedTotal == calls && state.inFlight == calls)
        print("pipeline: " + figures.joined(separator: "; "))
    }
}
