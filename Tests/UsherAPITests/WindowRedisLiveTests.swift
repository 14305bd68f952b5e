import Foundation
import HTTPTestClient
import RedisTestServer
import TestSupport
import Testing

@testable import UsherAPI

/// Windows kept in Redis, seen through two servers that share one redis-server.
@Suite(.serialized) struct WindowRedisLiveTests {
    static let put = #"{"display_seconds": 0, "backend": "redis"}"#

    /// A redis-server and two servers on it, each with window `w` in Redis.
    static func pair(_ body: String = put) async throws -> (RedisServer, BackendApp, BackendApp) {
        let redis = try await RedisServer()
        let a = try await BackendApp(.redis, redis: redis)
        let b = try await BackendApp(.redis, redis: redis)
        #expect(try await a.call("PUT", "/v1/windows/w", body).status == 201)
        return (redis, a, b)
    }

    @Test func shownOnOneServerDismissedOnTheOther() async throws {
        let (redis, a, b) = try await Self.pair()
        defer { redis.stop() }
        // The same config again, on either server: 200; another one: 409; a memory window of that name: 409.
        #expect(try await b.call("PUT", "/v1/windows/w", Self.put).status == 200)
        #expect(try await b.call("PUT", "/v1/windows/w", #"{"max_waiting": 3, "backend": "redis"}"#).status == 409)
        #expect(try await a.call("PUT", "/v1/windows/w", "{}").code == "already_exists")
        let shown = try await a.call("POST", "/v1/windows/w/show", #"{"id": "a", "title": "Hi"}"#)
        #expect(shown.status == 201 && shown.json["status"] as? String == "showing")
        #expect(try await b.call("POST", "/v1/windows/w/show", #"{"id": "b"}"#).json["position"] as? Int == 1)
        let seen = try await b.call("GET", "/v1/windows/w")
        #expect((seen.json["showing"] as? [String: Any])?["title"] as? String == "Hi")
        #expect((seen.json["queued"] as? [[String: Any]])?.map { $0["id"] as? String } == ["b"])
        let dismissed = try await b.call("POST", "/v1/windows/w/dismiss")
        #expect((dismissed.json["showing"] as? [String: Any])?["id"] as? String == "b")
        #expect(try await a.call("GET", "/v1/windows/w/items/a").json["status"] as? String == "dismissed")
        let list = try await b.call("GET", "/v1/windows")
        let listed = try #require((list.json["windows"] as? [[String: Any]])?.first)
        #expect(listed["showing"] as? String == "b" && listed["queued"] as? Int == 0)
        #expect(listed["backend"] as? String == "redis")
    }

    @Test func waitsOnOneServerAreAnsweredByTheOther() async throws {
        let (redis, a, b) = try await Self.pair()
        defer { redis.stop() }
        let screen = a.start("GET", "/v1/windows/w/showing?wait=5")
        #expect(await poll(5) { a.suspendedRequests == 1 })
        _ = try await b.call("POST", "/v1/windows/w/show", #"{"id": "login"}"#)
        _ = try await b.call("POST", "/v1/windows/w/show", #"{"id": "alert"}"#)
        #expect(try await screen.value.json["id"] as? String == "login")
        // The item long-poll and the showing one, both on A, woken by one dismiss on B.
        let item = a.start("GET", "/v1/windows/w/items/alert?wait=5")
        let next = a.start("GET", "/v1/windows/w/showing?after=login&wait=5")
        #expect(await poll(5) { a.suspendedRequests == 2 })
        let started = Date()
        #expect(try await b.call("POST", "/v1/windows/w/dismiss", #"{"id": "login"}"#).status == 200)
        #expect(try await item.value.json["status"] as? String == "showing")
        #expect(try await next.value.json["id"] as? String == "alert")
        // Woken by the dismiss, well before the 5 s wait would have answered.
        #expect(Date().timeIntervalSince(started) < 4)
    }

    @Test func anAutoDismissAppliesOnceAndEveryServerStreamsIt() async throws {
        let redis = try await RedisServer()
        let a = try await BackendLiveServer(.redis, redis: redis)
        let b = try await BackendApp(.redis, redis: redis)
        #expect(
            try await a.call("PUT", "/v1/windows/w", #"{"display_seconds": 0.3, "backend": "redis"}"#).status == 201)
        defer { redis.stop() }
        let events = try await AsyncSSEReader(port: a.live.port, "/v1/events?kind=windows&name=w")
        _ = try await b.call("POST", "/v1/windows/w/show", #"{"id": "x"}"#)
        _ = try await b.call("POST", "/v1/windows/w/show", #"{"id": "y", "display_seconds": 0}"#)
        // x's display ends after 0.3 s without a request; A's screen sees y.
        let next = try await a.call("GET", "/v1/windows/w/showing?after=x&wait=3")
        #expect(next.json["id"] as? String == "y")
        var streamed: [String] = []
        while streamed.count < 4, let event = try await events.next() {
            guard event.type != "created" else { continue }
            streamed.append("\(event.type):\((event.data["data"] as? [String: Any])?["id"] as? String ?? "-")")
        }
        #expect(streamed == ["shown:x", "queued:y", "expired:x", "shown:y"])
        let counts = try #require(try await b.call("GET", "/v1/windows/w").json["counts"] as? [String: Any])
        #expect(counts["expired_total"] as? Int == 1 && counts["shown_total"] as? Int == 2)
    }

    @Test func deleteOnOneServerIsSeenOnTheOther() async throws {
        let (redis, a, b) = try await Self.pair()
        defer { redis.stop() }
        let parked = b.start("GET", "/v1/windows/w/showing?wait=5")
        #expect(await poll(5) { b.suspendedRequests == 1 })
        #expect(try await a.call("DELETE", "/v1/windows/w").status == 204)
        #expect(try await parked.value.status == 410)
        #expect(await untilDeleted { try await b.call("GET", "/v1/windows/w").status })
        #expect(try await b.call("DELETE", "/v1/windows/w").status == 404)
        #expect(try await b.call("PUT", "/v1/windows/w", Self.put).status == 201)
    }

    @Test func redisDownIsA503ThenRecovers() async throws {
        let (redis, a, _) = try await Self.pair()
        defer { redis.stop() }
        #expect(try await a.call("PUT", "/v1/windows/local", "{}").status == 201)
        _ = try await a.call("POST", "/v1/windows/w/show", #"{"id": "s"}"#)
        let parked = a.start("GET", "/v1/windows/w/showing?after=s&wait=0.5")
        #expect(await poll(5) { a.suspendedRequests == 1 })
        redis.stop()
        let refused = try await a.call("POST", "/v1/windows/w/dismiss")
        #expect(refused.status == 503 && refused.code == "backend_unavailable")
        #expect(refused.headers["retry-after"] != nil)
        // A wait parked before Redis went away is answered so once its wait passes.
        #expect(try await parked.value.code == "backend_unavailable")
        #expect(try await a.call("POST", "/v1/windows/local/show", "{}").status == 201)
        // Back (empty: no persistence): the window is forgotten, and made again.
        try await redis.start()
        let recreated = await poll(10) { (try? await a.call("PUT", "/v1/windows/w", Self.put).status) == 201 }
        #expect(recreated)
        #expect(try await a.call("POST", "/v1/windows/w/show", "{}").status == 201)
    }

    @Test func badInputLosesNothing() async throws {
        let (redis, a, b) = try await Self.pair()
        defer { redis.stop() }
        _ = try await a.call("POST", "/v1/windows/w/show", #"{"id": "a"}"#)
        for body in [#"{"display_seconds": -1}"#, #"{"id": "bad id"}"#, #"{"priority": "high"}"#, "{not json"] {
            #expect(try await a.call("POST", "/v1/windows/w/show", body).status == 400, "\(body)")
        }
        #expect(try await a.call("PATCH", "/v1/windows/w", #"{"dedup": "maybe"}"#).status == 400)
        let state = try await b.call("GET", "/v1/windows/w")
        #expect((state.json["counts"] as? [String: Any])?["received_total"] as? Int == 1)
        #expect((state.json["config"] as? [String: Any])?["dedup"] as? String == "off")
    }
}
