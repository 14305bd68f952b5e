import Foundation
import RedisTestServer
import TestSupport
import Testing

@testable import RedisClient

extension OneAtATime {
    /// Against a real redis-server the tests start (RedisServer).
    @Suite(.serialized, .timeLimit(.minutes(1))) struct RedisConnectionTests {
        @Test func argumentsAreBinarySafe() async throws {
            let server = try await RedisServer()
            let redis = server.connection()
            let value: [UInt8] = [0x61, 0x00, 0x62, 0xFF, 0x0D, 0x0A]
            #expect(try await redis.command([Array("SET".utf8), [0x6B, 0x00], value]) == .status("OK"))
            #expect(try await redis.command([Array("GET".utf8), [0x6B, 0x00]]) == .bulk(value))
            #expect(try await redis.command(["GET", "k"]) == .null)
            #expect(try await redis.command(["STRLEN", "k\u{0}"]) == .integer(6))
            #expect(try await redis.command(["SET", "empty", ""]) == .status("OK"))
            #expect(try await redis.command(["GET", "empty"]) == .bulk([]))
        }

        @Test func pipelinesABatch() async throws {
            let server = try await RedisServer()
            let redis = server.connection()
            let replies = try await redis.pipeline(
                Array(repeating: ["INCR", "n"], count: 100) + [["LRANGE", "none", "0", "-1"]])
            #expect(replies.dropLast() == (1...100).map { RedisReply.integer(Int64($0)) })
            #expect(replies.last == .array([]))
            #expect(try await redis.command(["RPUSH", "l", "a", "b"]) == .integer(2))
            #expect(try await redis.command(["LRANGE", "l", "0", "-1"]) == .array([.bulk([0x61]), .bulk([0x62])]))
            #expect(await redis.connectCount == 1)
        }

        @Test func errorRepliesAreValues() async throws {
            let server = try await RedisServer()
            let redis = server.connection()
            let reply = try await redis.command(["NOSUCHCOMMAND", "x"])
            #expect(reply.errorMessage?.hasPrefix("ERR") == true)
            #expect(throws: RedisError.self) { try reply.checked() }
            let batch = try await redis.pipeline([["SET", "s", "1"], ["LPUSH", "s", "x"], ["GET", "s"]])
            #expect(batch[1].errorMessage?.hasPrefix("WRONGTYPE") == true)
            #expect(batch[2].string == "1")
            #expect(await redis.connectCount == 1)
        }

        @Test func scriptsFallBackToEvalAfterScriptFlush() async throws {
            let server = try await RedisServer()
            let redis = server.connection()
            let script = RedisScript("return {KEYS[1], ARGV[1], redis.call('INCR', KEYS[1])}")
            #expect(try await redis.command(["SCRIPT", "LOAD", script.source]).string == script.sha1)
            let first = try await script.run(on: redis, keys: ["counter"], arguments: ["a"])
            #expect(first == .array([.bulk(Array("counter".utf8)), .bulk([0x61]), .integer(1)]))
            #expect(try await redis.command(["SCRIPT", "FLUSH"]) == .status("OK"))
            #expect(try await redis.command(["SCRIPT", "EXISTS", script.sha1]) == .array([.integer(0)]))
            let second = try await script.run(on: redis, keys: ["counter"], arguments: ["b"])
            #expect(second.array?.last == .integer(2))
            #expect(try await redis.command(["SCRIPT", "EXISTS", script.sha1]) == .array([.integer(1)]))
            let failing = try await RedisScript("return redis.error_reply('BOOM no')").run(on: redis)
            #expect(failing.errorMessage?.hasPrefix("BOOM") == true)
        }

        @Test func reconnectsAfterClientKill() async throws {
            let server = try await RedisServer()
            let redis = server.connection()
            let admin = server.connection()
            let id = try #require(try await redis.command(["CLIENT", "ID"]).int)
            #expect(try await admin.command(["CLIENT", "KILL", "ID", "\(id)"]) == .integer(1))
            let reply = try await eventually { try await redis.command(["PING"]) }
            #expect(reply == .status("PONG"))
            #expect(await redis.connectCount == 2)
        }

        @Test func reconnectsAfterServerRestart() async throws {
            let server = try await RedisServer()
            let redis = server.connection()
            #expect(try await redis.command(["SET", "a", "1"]) == .status("OK"))
            server.stop()
            // The old connection dies on use; the reconnect at once is refused.
            await #expect(throws: RedisError.self) { try await redis.command(["PING"]) }
            await #expect(throws: RedisError.self) { try await redis.command(["PING"]) }
            // Then refused without trying while the back-off runs.
            await #expect {
                try await redis.command(["PING"])
            } throws: {
                String(describing: $0).contains("back-off")
            }
            try await server.start()
            let reply = try await eventually(within: .seconds(5)) { try await redis.command(["GET", "a"]) }
            #expect(reply == .null)  // no persistence: a restart loses everything
            #expect(await redis.connectCount == 2)
        }

        @Test func commandTimeoutKillsTheConnectionAndTheNextCommandReconnects() async throws {
            let server = try await RedisServer()
            var endpoint = server.endpoint
            endpoint.database = 0
            let redis = RedisConnection(endpoint: endpoint, connectTimeoutSeconds: 1, commandTimeoutSeconds: 0.2)
            let start = ContinuousClock.now
            await #expect(throws: RedisError.self) { try await redis.command(["BLPOP", "nothing", "5"]) }
            #expect(ContinuousClock.now - start < .seconds(1))
            #expect(try await redis.command(["PING"]) == .status("PONG"))
            #expect(await redis.connectCount == 2)
        }

        @Test func commandsQueuedBehindATimeoutFailWithIt() async throws {
            let server = try await RedisServer()
            let redis = RedisConnection(endpoint: server.endpoint, connectTimeoutSeconds: 1, commandTimeoutSeconds: 0.3)
            #expect(try await redis.command(["PING"]) == .status("PONG"))
            server.signal(SIGSTOP)
            defer { server.signal(SIGCONT) }
            // Ten at once: the first times out, the nine queued behind it fail with it
            // (one after the other, each waiting out its own timeout, took 3 s).
            let start = ContinuousClock.now
            let answered = await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<10 { group.addTask { (try? await redis.command(["PING"])) != nil } }
                return await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
            }
            #expect(answered == 0)
            #expect(ContinuousClock.now - start < .seconds(1))
            server.signal(SIGCONT)
            #expect(try await eventually { try await redis.command(["PING"]) } == .status("PONG"))
        }

        @Test func logsInWithPasswordUserAndDatabase() async throws {
            let server = try await RedisServer(arguments: ["--requirepass", "s3cret"])
            #expect(try await server.connection().command(["PING"]).errorMessage?.hasPrefix("NOAUTH") == true)
            let redis = server.connection(password: "s3cret", database: 3)
            #expect(try await redis.command(["SET", "k", "v"]) == .status("OK"))
            let info = try await redis.command(["CLIENT", "INFO"]).string ?? ""
            #expect(info.contains(" db=3 "))
            await #expect {
                try await server.connection(password: "wrong").command(["PING"])
            } throws: {
                if case .handshake = $0 as? RedisError { true } else { false }
            }
            let acl = try await redis.command(["ACL", "SETUSER", "alice", "on", ">pw2", "~*", "+@all"])
            #expect(acl == .status("OK"))
            let alice = server.connection(password: "pw2", user: "alice")
            #expect(try await alice.command(["ACL", "WHOAMI"]).string == "alice")
        }

        @Test func blockingCommandsLeaveTheCooperativePoolFree() async throws {
            let server = try await RedisServer()
            let redis = server.connection()
            let other = server.connection()
            _ = try await (redis.command(["PING"]), other.command(["PING"]))
            async let popped = redis.command(["BLPOP", "nothing", "0.5"])
            async let popped2 = other.command(["BLPOP", "nothing2", "0.5"])
            // Five 10 ms sleeps while both BLPOPs block for 0.5 s: none may wait for them
            // (a blocked pool would make one last ~500 ms; 300 ms leaves room for a loaded machine).
            for _ in 0..<5 {
                let start = ContinuousClock.now
                try await Task.sleep(for: .milliseconds(10))
                let slept = ContinuousClock.now - start
                #expect(slept < .milliseconds(300), "a 10 ms sleep took \(slept)")
            }
            #expect(try await popped == .null)
            #expect(try await popped2 == .null)
        }

        @Test func subscriberReceivesAndResubscribesAfterAKill() async throws {
            let server = try await RedisServer()
            let events = AsyncStream<RedisSubscriber.Event>.makeStream()
            let subscriber = try RedisSubscriber(endpoint: server.endpoint, connectTimeoutSeconds: 1, channels: ["c1"])
            {
                events.continuation.yield($0)
            }
            defer { subscriber.stop() }
            var received = events.stream.makeAsyncIterator()
            let publisher = server.connection()
            #expect(await received.next() == .subscribed(channel: "c1"))
            #expect(try await publisher.command(["PUBLISH", "c1", "hello\u{0}"]) == .integer(1))
            #expect(await received.next() == .message(channel: "c1", payload: Array("hello\u{0}".utf8)))
            subscriber.subscribe(["c2"])
            #expect(await received.next() == .subscribed(channel: "c2"))
            #expect(try await publisher.command(["CLIENT", "KILL", "TYPE", "pubsub"]) == .integer(1))
            var after: [RedisSubscriber.Event] = []
            while after.count < 3, let event = await received.next() { after.append(event) }
            #expect(after.first.map { if case .disconnected = $0 { true } else { false } } == true)
            #expect(Set(after.dropFirst()) == [.subscribed(channel: "c1"), .subscribed(channel: "c2")])
            #expect(try await publisher.command(["PUBLISH", "c2", "again"]) == .integer(1))
            #expect(await received.next() == .message(channel: "c2", payload: Array("again".utf8)))
        }

        @Test func subscriberHearsPatternsAfterItsChannelsAndAfterAKill() async throws {
            let server = try await RedisServer()
            let events = AsyncStream<RedisSubscriber.Event>.makeStream()
            let subscriber = try RedisSubscriber(
                endpoint: server.endpoint, connectTimeoutSeconds: 1, channels: ["n"], patterns: ["n:*"]
            ) { events.continuation.yield($0) }
            defer { subscriber.stop() }
            var received = events.stream.makeAsyncIterator()
            let publisher = server.connection()
            for _ in 0..<2 {
                #expect(await received.next() == .subscribed(channel: "n"))
                #expect(await received.next() == .subscribed(channel: "n:*"))
                #expect(try await publisher.command(["PUBLISH", "n:queue:q", "own"]) == .integer(1))
                #expect(await received.next() == .message(channel: "n:queue:q", payload: Array("own".utf8)))
                #expect(try await publisher.command(["PUBLISH", "n", "shared"]) == .integer(1))
                #expect(await received.next() == .message(channel: "n", payload: Array("shared".utf8)))
                #expect(try await publisher.command(["PUBLISH", "m:queue:q", "other"]) == .integer(0))
                #expect(try await publisher.command(["CLIENT", "KILL", "TYPE", "pubsub"]) == .integer(1))
                if case .disconnected = await received.next() {} else { Issue.record("no disconnect") }
            }
        }

        @Test func subscriberNoticesAStoppedServerAndRecovers() async throws {
            let server = try await RedisServer()
            let events = AsyncStream<RedisSubscriber.Event>.makeStream()
            let subscriber = try RedisSubscriber(
                endpoint: server.endpoint, connectTimeoutSeconds: 0.2, healthCheckSeconds: 0.1, channels: ["c"]
            ) { events.continuation.yield($0) }
            defer { subscriber.stop() }
            var received = events.stream.makeAsyncIterator()
            #expect(await received.next() == .subscribed(channel: "c"))
            server.signal(SIGSTOP)
            let stopped = ContinuousClock.now
            let lost = await received.next()
            #expect(
                lost.map { if case .disconnected = $0 { true } else { false } } == true, "\(String(describing: lost))")
            #expect(ContinuousClock.now - stopped < .seconds(1))
            server.signal(SIGCONT)
            while let event = await received.next(), event != .subscribed(channel: "c") {}
            #expect(try await server.connection().command(["PUBLISH", "c", "back"]) == .integer(1))
            #expect(await received.next() == .message(channel: "c", payload: Array("back".utf8)))
        }

        @Test(.timeLimit(.minutes(1))) func subscriberRefusedASubscriptionTriesAgainUntilAllowed() async throws {
            let server = try await RedisServer()
            let admin = server.connection()
            _ = try await admin.command(["ACL", "SETUSER", "default", "-subscribe"])
            let events = AsyncStream<RedisSubscriber.Event>.makeStream()
            let subscriber = try RedisSubscriber(
                endpoint: server.endpoint, connectTimeoutSeconds: 0.2, healthCheckSeconds: 0.1, channels: ["c"]
            ) { events.continuation.yield($0) }
            defer { subscriber.stop() }
            var received = events.stream.makeAsyncIterator()
            // Refused (the error reply), not taken for a subscription.
            guard case .disconnected(let reason)? = await received.next() else {
                Issue.record("no refusal")
                return
            }
            #expect(reason.contains("NOPERM"), "\(reason)")
            _ = try await admin.command(["ACL", "SETUSER", "default", "+subscribe"])
            while let event = await received.next(), event != .subscribed(channel: "c") {}
            #expect(try await admin.command(["PUBLISH", "c", "heard"]) == .integer(1))
            #expect(await received.next() == .message(channel: "c", payload: Array("heard".utf8)))
        }

        /// Retries `body` every 20 ms until it succeeds or `within` has passed.
        private func eventually<R>(
            within limit: Duration = .seconds(2), _ body: () async throws -> R
        ) async throws -> R {
            try await retrying(within: limit, body)
        }
    }
}
