import Foundation
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// What a machine operation costs through `machine.lua` (printed, for the
/// record; the only checks are that the calls work).
@Suite(.serialized, .timeLimit(.minutes(1))) struct RedisMachineMeasureTests {
    static let cycle = ["prepare", "start", "teardown"]

    @Test func fireCostsOneRoundTrip() async throws {
        let server = try await RedisServer()
        let connection = server.connection()
        let store = RedisMachineStore(
            keys: ResourceKeys(prefix: "usher:", kind: "machine", name: "bench"),
            connections: RedisConnectionPool([connection]),
            time: .server, channel: "usher:notices", onDeadline: { _ in })
        _ = try await store.create(definitionName: "player", definition: .player)
        for i in 0..<200 { try await store.fire(event: Self.cycle[i % 3]) }  // warm up; the history is full

        let calls = 3000
        #expect(try await connection.command(["CONFIG", "RESETSTAT"]) == .status("OK"))
        var started = ContinuousClock.now
        for i in 0..<calls { try await store.fire(event: Self.cycle[(i + 200) % 3]) }
        let perFire = Self.micros(ContinuousClock.now - started) / Double(calls)
        let inRedis = try await Self.evalshaMicros(connection)

        #expect(try await connection.command(["CONFIG", "RESETSTAT"]) == .status("OK"))
        started = ContinuousClock.now
        for _ in 0..<1000 { _ = try await store.snapshot() }
        let perSnapshot = Self.micros(ContinuousClock.now - started) / 1000
        let snapshotInRedis = try await Self.evalshaMicros(connection)

        // Pipelined: the script alone, no decoding, 1000 per round trip.
        let keys = ["usher:{machine:bench}:meta", "usher:{machine:bench}:history"]
        let sha = RedisMachineStore.scriptSHA1
        let state = try await store.snapshot().state
        let first = MachineDefinition.player.allowedEvents(in: state)[0]
        let offset = Self.cycle.firstIndex(of: first)!
        let commands = (0..<1000).map { i in
            ["EVALSHA", sha, "2"] + keys + ["fire", "", "usher:notices", Self.cycle[(i + offset) % 3], "", ""]
        }
        started = ContinuousClock.now
        let replies = try await connection.pipeline(commands)
        let perPipelined = Self.micros(ContinuousClock.now - started) / 1000
        #expect(replies.allSatisfy { $0.errorMessage == nil })

        print(
            "machine fire: \(Self.format(perFire)) µs/call awaited (\(Self.format(inRedis)) µs in Redis), "
                + "\(Self.format(perPipelined)) µs/call pipelined; snapshot (50 entries): "
                + "\(Self.format(perSnapshot)) µs/call (\(Self.format(snapshotInRedis)) µs in Redis)")
    }

    @Test func theLargestDefinitionIsStoredAndRuns() async throws {
        let states = (0..<MachineDefinition.maxStates).map { "s\($0)" }
        let ring = try MachineDefinition(
            initial: "s0", states: states,
            transitions: states.indices.dropLast().map { i in
                .init(event: "e\(i)", from: states[i], to: states[i + 1])
            } + [.init(event: "reset", from: states, to: "s0")],
            timeouts: states.indices.dropLast().map { i in .init(state: states[i], afterSeconds: 1, event: "e\(i)") })
        let clock = ManualClock()
        let rig = try await MachineRig(name: "ring", clock: clock)
        var started = ContinuousClock.now
        let created = try await rig.created(ring)
        let createTook = ContinuousClock.now - started
        #expect(created.definition == ring)
        clock.advance(by: 3)
        started = ContinuousClock.now
        let result = try await rig.store.fire(event: "reset")
        let fireTook = ContinuousClock.now - started
        #expect(result.previousState == "s3")
        started = ContinuousClock.now
        let again = try await rig.store.fire(event: "e0")
        let secondTook = ContinuousClock.now - started
        #expect(again.state == "s1")
        started = ContinuousClock.now
        #expect(try await rig.store.snapshot().allowedEvents == ["e1", "reset"])
        let snapshotTook = ContinuousClock.now - started
        print(
            "1,000-state definition: create \(createTook), fire after 3 due timeouts \(fireTook), "
                + "fire \(secondTook), first snapshot \(snapshotTook)")
    }

    static func micros(_ d: Duration) -> Double {
        Double(d.components.seconds) * 1e6 + Double(d.components.attoseconds) / 1e12
    }

    static func format(_ d: Double) -> String { String(format: "%.1f", d) }

    /// `usec_per_call` of EVALSHA from `INFO commandstats`.
    static func evalshaMicros(_ connection: RedisConnection) async throws -> Double {
        let info = try await connection.command(["INFO", "commandstats"]).string ?? ""
        let line = info.split(whereSeparator: \.isNewline).first { $0.hasPrefix("cmdstat_evalsha:") } ?? ""
        let field = line.split(separator: ",").first { $0.hasPrefix("usec_per_call=") } ?? ""
        return Double(field.dropFirst("usec_per_call=".count)) ?? -1
    }
}
