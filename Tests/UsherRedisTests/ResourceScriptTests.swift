import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// `common.lua` and `ResourceScript` against a real redis-server.
@Suite(.serialized, .timeLimit(.minutes(1))) struct ResourceScriptTests {
    /// A kind whose operations exercise the prelude.
    static let probe = ResourceScript(
        kindSources: Array(
            """
            if OP == 'now' then return int_text(NOW) end
            if OP == 'fence' then return int_text(next_after_time(KEYS[1], 'fence')) end
            if OP == 'refuse' then return fail('not_found', 'visitor "v1"') end
            if OP == 'notify' then publish({kind = 'probe', name = ARGV[4]}) return 'ok' end
            return redis.call('NO_SUCH_COMMAND')
            """.utf8))

    @Test func timeComesFromTheClockWhenGivenElseFromRedis() async throws {
        let server = try await RedisServer()
        let connection = server.connection()
        let clock = ManualClock(start: Timestamp(micros: 1_700_000_000_123_456))
        let fixed = try await Self.probe.run(
            "now", keys: ["k"], time: .clock(clock), channel: "c", on: connection)
        #expect(fixed.string == "1700000000123456")
        let served = try await Self.probe.run("now", keys: ["k"], time: .server, channel: "c", on: connection)
        let micros = try #require(served.string.flatMap { Int64($0) })
        #expect(abs(micros - SystemClock().now().micros) < 5_000_000)
    }

    @Test func aTimeBasedCounterNeverGoesBackwards() async throws {
        let server = try await RedisServer()
        let connection = server.connection()
        func fence(at micros: Int64) async throws -> String? {
            let clock = ManualClock(start: Timestamp(micros: micros))
            return try await Self.probe.run("fence", keys: ["m"], time: .clock(clock), channel: "c", on: connection)
                .string
        }
        #expect(try await fence(at: 2_000_000) == "2000000")
        #expect(try await fence(at: 2_000_000) == "2000001")
        #expect(try await fence(at: 1_000_000) == "2000002")  // time went back (a failover to a slower host)
        #expect(try await fence(at: 9_000_000) == "9000000")
    }

    @Test func refusalsAndRedisErrorsAreTold() async throws {
        let server = try await RedisServer()
        let connection = server.connection()
        await #expect(throws: ScriptFailure.refused(code: "not_found", detail: "visitor \"v1\"")) {
            try await Self.probe.run("refuse", keys: ["k"], time: .server, channel: "c", on: connection)
        }
        await #expect {
            try await Self.probe.run("other", keys: ["k"], time: .server, channel: "c", on: connection)
        } throws: { error in
            guard case .redis(let message) = error as? ScriptFailure else { return false }
            return message.contains("NO_SUCH_COMMAND") || message.contains("Unknown")
        }
    }

    @Test func aStoppedServerIsUnavailable() async throws {
        let server = try await RedisServer()
        let connection = server.connection()
        server.stop()
        await #expect {
            try await Self.probe.run("now", keys: ["k"], time: .server, channel: "c", on: connection)
        } throws: { error in
            if case .unavailable = error as? ScriptFailure { return true }
            return false
        }
    }
}
