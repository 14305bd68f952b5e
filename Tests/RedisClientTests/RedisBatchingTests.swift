import Foundation
import Locking
import RedisTestServer
import Testing

@testable import RedisClient

/// Commands sent while a round trip is in flight go out together: order,
/// failures and timeouts in a batch (against a real redis-server).
@Suite(.serialized, .timeLimit(.minutes(1))) struct RedisBatchingTests {
    @Test func commandsQueuedDuringARoundTripGoOutTogetherInOrder() async throws {
        let server = try await RedisServer()
        let redis = server.connection()
        #expect(try await redis.command(["PING"]) == .status("PONG"))
        let before = redis.batchCount
        // A blocking pop holds the connection for 0.2 s while 300 INCRs queue up behind it.
        let commands = [["BLPOP", "nothing", "0.2"]] + Array(repeating: ["INCR", "n"], count: 300)
        let answers = await Self.sendEach(commands, on: redis)
        #expect(answers.map(\.index) == Array(0...300), "answered in the order sent")
        #expect(try answers[0].result.get() == .null)
        #expect(try answers.dropFirst().map { try $0.result.get() } == (1...300).map { .integer(Int64($0)) })
        // The pop, then 300 commands in batches of at most 256: three or four writes, not 301.
        let batches = redis.batchCount - before
        #expect((2...4).contains(batches), "\(batches) batches")
        #expect(await redis.connectCount == 1)
    }

    @Test func aFailureFailsTheRestOfItsBatch() async throws {
        let server = try await RedisServer()
        let redis = server.connection()
        #expect(try await redis.command(["PING"]) == .status("PONG"))
        // QUIT answers, then the server closes: what follows it in the batch fails with it.
        let answers = await Self.sendEach(
            [["BLPOP", "nothing", "0.2"], ["SET", "a", "1"], ["QUIT"], ["PING"], ["GET", "a"]], on: redis)
        #expect(try answers[1].result.get() == .status("OK"))
        #expect(try answers[2].result.get() == .status("OK"))
        for answer in answers[3...] {
            #expect(throws: RedisError.self) { try answer.result.get() }
        }
        // The next command reconnects; what ran before the failure stays done.
        #expect(try await redis.command(["GET", "a"]) == .bulk(Array("1".utf8)))
        #expect(await redis.connectCount == 2)
    }

    @Test func aPipelineIsOneRequestThatFailsWhole() async throws {
        let server = try await RedisServer()
        let redis = server.connection()
        await #expect(throws: RedisError.self) {
            try await redis.pipeline([["SET", "b", "1"], ["QUIT"], ["SET", "c", "1"]])
        }
        #expect(try await redis.command(["MGET", "b", "c"]) == .array([.bulk(Array("1".utf8)), .null]))
    }

    @Test func aTimeoutFailsTheBatchAndWhatQueuedBehindIt() async throws {
        let server = try await RedisServer()
        let redis = RedisConnection(endpoint: server.endpoint, connectTimeoutSeconds: 1, commandTimeoutSeconds: 0.3)
        #expect(try await redis.command(["PING"]) == .status("PONG"))
        server.signal(SIGSTOP)
        defer { server.signal(SIGCONT) }
        let start = ContinuousClock.now
        let answers = await Self.sendEach(Array(repeating: ["PING"], count: 50), on: redis)
        let failed = answers.count { (try? $0.result.get()) == nil }
        #expect(failed == 50)
        // One timeout for all of them, not fifty in turn.
        #expect(ContinuousClock.now - start < .seconds(1))
        server.signal(SIGCONT)
        #expect(try await redis.command(["PING"]) == .status("PONG"))
    }

    /// Sends each command as its own request, all at once; the answers in the order they came.
    static func sendEach(_ commands: [[String]], on redis: RedisConnection) async -> [(
        index: Int, result: Result<RedisReply, RedisError>
    )] {
        let answers = Locked<[(index: Int, result: Result<RedisReply, RedisError>)]>([])
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            for (index, command) in commands.enumerated() {
                redis.send([command.map { Array($0.utf8) }]) { result in
                    let complete = answers.withLock { list in
                        list.append((index, result.map { $0[0] }))
                        return list.count == commands.count
                    }
                    if complete { done.resume() }
                }
            }
        }
        return answers.withLock { $0 }
    }
}
