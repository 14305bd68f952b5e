import Foundation
import HTTPTestClient
import RedisTestServer
import TestSupport
import Testing

@testable import UsherAPI

extension OneAtATime {
    /// Pipelines kept in Redis, seen through two servers that share one redis-server.
    @Suite(.serialized, .timeLimit(.minutes(2))) struct PipelineRedisLiveTests {
        /// A redis-server and two servers on it.
        static func pair() async throws -> (RedisServer, BackendApp, BackendApp) {
            let redis = try await RedisServer()
            return (redis, try await BackendApp(.redis, redis: redis), try await BackendApp(.redis, redis: redis))
        }

        @Test func pushedOnOneServerTakenAndConsumedOnTheOther() async throws {
            let (redis, a, b) = try await Self.pair()
            defer { redis.stop() }
            #expect(try await a.call("PUT", "/v1/pipelines/p", a.put(#"{"max_in_flight": 5}"#)).status == 201)
            #expect(try await b.call("PUT", "/v1/pipelines/p", b.put(#"{"max_in_flight": 5}"#)).status == 200)
            #expect(
                try await b.call("PUT", "/v1/pipelines/p", b.put(#"{"max_in_flight": 6}"#)).code == "already_exists")
            // A memory pipeline of that name on this instance is another resource: 409.
            #expect(try await a.call("PUT", "/v1/pipelines/p", #"{"max_in_flight": 5}"#).code == "already_exists")
            _ = try await a.call("POST", "/v1/pipelines/p/items", #"{"id": "x", "payload": {"n": 1}}"#)
            let taken = try await b.call("POST", "/v1/pipelines/p/take")
            let fence = try #require((taken.json["items"] as? [[String: Any]])?.first?["fence"] as? Int)
            #expect(try await a.call("GET", "/v1/pipelines/p/items/x").json["status"] as? String == "in_flight")
            #expect(try await a.call("POST", "/v1/pipelines/p/items/x/consume", #"{"fence": \#(fence)}"#).status == 200)
            #expect(try await b.call("GET", "/v1/pipelines/p/items/x").json["status"] as? String == "consumed")
            let listed = try #require(
                (try await b.call("GET", "/v1/pipelines").json["pipelines"] as? [[String: Any]])?.first)
            #expect(listed["name"] as? String == "p" && listed["backend"] as? String == "redis")
        }

        @Test func aTakeParkedOnOneServerIsWokenByAPushOnTheOther() async throws {
            let (redis, a, b) = try await Self.pair()
            defer { redis.stop() }
            _ = try await a.call("PUT", "/v1/pipelines/p", a.put("{}"))
            let waiting = a.start("POST", "/v1/pipelines/p/take?wait=5")
            #expect(await poll(5) { a.suspendedRequests == 1 })
            let started = Date()
            _ = try await b.call("POST", "/v1/pipelines/p/items", #"{"id": "x", "payload": 1}"#)
            let answer = try await waiting.value
            #expect(answer.status == 200)
            #expect((answer.json["items"] as? [[String: Any]])?.first?["id"] as? String == "x")
            // Woken by the notice, not by the one-second re-check.
            #expect(Date().timeIntervalSince(started) < 0.9)
            // A full pipeline: a producer held on B gets in when A consumes.
            _ = try await a.call("PATCH", "/v1/pipelines/p", #"{"capacity": 1}"#)
            let held = b.start("POST", "/v1/pipelines/p/items?wait=5", #"{"id": "y", "payload": 2}"#)
            #expect(await poll(5) { b.suspendedRequests == 1 })
            #expect(try await a.call("POST", "/v1/pipelines/p/items/x/consume").status == 200)
            #expect(try await held.value.status == 201)
        }

        @Test func aWaitOnAnItemOnOneServerSeesItTakenOnTheOther() async throws {
            let (redis, a, b) = try await Self.pair()
            defer { redis.stop() }
            _ = try await a.call("PUT", "/v1/pipelines/p", a.put("{}"))
            _ = try await a.call("POST", "/v1/pipelines/p/items", #"{"id": "x", "payload": 1}"#)
            let watch = a.start("GET", "/v1/pipelines/p/items/x?wait=5")
            #expect(await poll(5) { a.suspendedRequests == 1 })
            let started = Date()
            _ = try await b.call("POST", "/v1/pipelines/p/take")
            let seen = try await watch.value
            #expect(seen.status == 200 && seen.json["status"] as? String == "in_flight")
            // Woken by the notice, not by the one-second re-check.
            #expect(Date().timeIntervalSince(started) < 0.9)
        }

        @Test func everyServerStreamsWhatTheOtherDid() async throws {
            let redis = try await RedisServer()
            let a = try await BackendApp(.redis, redis: redis)
            let b = try await BackendLiveServer(.redis, redis: redis)
            defer { redis.stop() }
            _ = try await a.call("PUT", "/v1/pipelines/p", a.put(#"{"ack_seconds": 0.3, "max_deliveries": 1}"#))
            #expect(await poll(5) { (try? await b.call("GET", "/v1/pipelines/p").status) == 200 })
            let events = try await AsyncSSEReader(port: b.live.port, "/v1/events?kind=pipelines&name=p")
            _ = try await a.call("POST", "/v1/pipelines/p/items", #"{"id": "x", "payload": 1}"#)
            _ = try await a.call("POST", "/v1/pipelines/p/take")
            // The ack deadline passes with no request: the dead letter is streamed too.
            var seen: [String] = []
            while seen.count < 3, let event = try await events.next() {
                if event.type != "created" { seen.append(event.type) }
            }
            #expect(seen == ["pushed", "delivered", "dead-lettered"])
        }

        @Test func deleteOnOneServerIsSeenOnTheOther() async throws {
            let (redis, a, b) = try await Self.pair()
            defer { redis.stop() }
            _ = try await a.call("PUT", "/v1/pipelines/p", a.put("{}"))
            #expect(await poll(5) { (try? await b.call("GET", "/v1/pipelines/p").status) == 200 })
            let parked = b.start("POST", "/v1/pipelines/p/take?wait=5")
            #expect(await poll(5) { b.suspendedRequests == 1 })
            #expect(try await a.call("DELETE", "/v1/pipelines/p").status == 204)
            #expect(try await parked.value.status == 410)
            #expect(await untilDeleted { try await b.call("GET", "/v1/pipelines/p").status })
            #expect(try await b.call("DELETE", "/v1/pipelines/p").status == 404)
        }

        @Test func aSourceIsRefusedForARedisPipeline() async throws {
            let (redis, a, _) = try await Self.pair()
            defer { redis.stop() }
            let body = #"{"source": {"kind": "file", "path": "in.jsonl"}, "backend": "redis"}"#
            let refused = try await a.call("PUT", "/v1/pipelines/p", body)
            #expect(refused.status == 400 && refused.json["field"] as? String == "source")
            #expect(try await a.call("GET", "/v1/pipelines/p").status == 404)
            let config = """
                {"redis": {"url": "redis://127.0.0.1:\(redis.port)"},
                 "pipelines": {"p": {"backend": "redis", "source": {"kind": "file", "path": "in.jsonl"}}}}
                """
            #expect {
                try LiveServer(config)
            } throws: { error in
                (error as? APIError)?.detail.hasPrefix("pipelines.p.source: a Redis-backed pipeline") == true
            }
        }

        @Test func redisDownIsA503ForRedisPipelinesOnlyAndRecovers() async throws {
            let redis = try await RedisServer()
            let s = try await BackendApp(.redis, #"{"pipelines": {"shared": {}}}"#, redis: redis)
            #expect(try await s.call("PUT", "/v1/pipelines/local", #"{"backend": "memory"}"#).status == 201)
            let parked = s.start("POST", "/v1/pipelines/shared/take?wait=0.5")
            #expect(await poll(5) { s.suspendedRequests == 1 })
            redis.stop()
            let down = try await s.call("POST", "/v1/pipelines/shared/items", #"{"payload": 1}"#)
            #expect(down.status == 503 && down.code == "backend_unavailable")
            #expect(Int(down.headers["retry-after"] ?? "") != nil)
            #expect(try await parked.value.code == "backend_unavailable")
            #expect(try await s.call("POST", "/v1/pipelines/local/items", #"{"payload": 1}"#).status == 201)
            try await redis.start()
            // What Redis held is lost; a new PUT of the name works once it is back.
            let back = await poll(10) {
                (try? await s.call("PUT", "/v1/pipelines/again", s.put("{}")).status) == 201
            }
            #expect(back)
            #expect(try await s.call("POST", "/v1/pipelines/again/items", #"{"payload": 1}"#).status == 201)
        }
    }
}
