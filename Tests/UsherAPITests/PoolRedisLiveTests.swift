import Foundation
import HTTPTestClient
import RedisTestServer
import TestSupport
import Testing

@testable import UsherAPI

extension OneAtATime {
    /// Pools kept in Redis, seen through two servers that share one redis-server.
    @Suite struct PoolRedisLiveTests {
        static func config(_ redis: RedisServer) -> String {
            #"{"redis": {"url": "redis://127.0.0.1:\#(redis.port)"}}"#
        }

        /// A redis-server and two servers on it.
        static func pair() async throws -> (RedisServer, LiveServer, LiveServer) {
            let redis = try await RedisServer()
            return (redis, try LiveServer(config(redis)), try LiveServer(config(redis)))
        }

        static let gpus =
            #"{"elements": ["g0", {"id": "g1", "data": {"mem": 24}}], "lease_seconds": 30, "backend": "redis"}"#

        static func lease(_ r: TestHTTPClient.Response) -> [String: Any]? { r.json as [String: Any]? }
        static func element(_ r: TestHTTPClient.Response) -> String? {
            (lease(r)?["element"] as? [String: Any])?["id"] as? String
        }

        @Test func createdOnOneServerLeasedOnTheOther() async throws {
            let (redis, a, b) = try await Self.pair()
            defer { redis.stop() }
            #expect(try await a.send("PUT", "/v1/pools/gpus", Self.gpus).status == 201)
            // The same config again, on either server: 200; another one: 409; memory under the name: 409.
            #expect(try await b.send("PUT", "/v1/pools/gpus", Self.gpus).status == 200)
            let other = #"{"elements": ["g0"], "backend": "redis"}"#
            #expect(try await b.send("PUT", "/v1/pools/gpus", other).code == "already_exists")
            #expect(try await a.send("PUT", "/v1/pools/gpus", #"{"elements": ["g0", "g1"]}"#).code == "already_exists")

            let first = try await b.send("POST", "/v1/pools/gpus/fetch", #"{"id": "j1", "holder": "b"}"#)
            #expect(first.status == 201 && Self.element(first) == "g0")
            let second = try await a.send("POST", "/v1/pools/gpus/fetch", #"{"id": "j2", "holder": "a"}"#)
            #expect(Self.element(second) == "g1")
            #expect(
                ((Self.lease(second)?["element"] as? [String: Any])?["data"] as? [String: Any])?["mem"] as? Int == 24)
            let f1 = try #require(Self.lease(first)?["fence"] as? Int)
            let f2 = try #require(Self.lease(second)?["fence"] as? Int)
            #expect(f2 > f1)
            let exhausted = try await b.send("POST", "/v1/pools/gpus/fetch")
            #expect(exhausted.code == "pool_exhausted" && exhausted.json["next_expiry_at"] is String)
            #expect(try await a.send("POST", "/v1/pools/gpus/recycle", #"{"lease": "j1"}"#).status == 200)
            #expect(try await b.send("POST", "/v1/pools/gpus/recycle", #"{"lease": "j1"}"#).code == "not_leased")
            let state = try await b.send("GET", "/v1/pools/gpus")
            #expect(state.counts["leased"] as? Int == 1 && state.counts["available"] as? Int == 1)
            let list = try await a.send("GET", "/v1/pools")
            let listed = try #require((list.json["pools"] as? [[String: Any]])?.first)
            #expect(listed["name"] as? String == "gpus" && listed["backend"] as? String == "redis")
            #expect(listed["size"] as? Int == 2 && listed["leased"] as? Int == 1)
            // Elements added on one server serve the other.
            #expect(try await b.send("PUT", "/v1/pools/gpus/elements/g2", #"{"data": 1}"#).status == 201)
            #expect(try await a.send("GET", "/v1/pools/gpus").json["size"] as? Int == 3)
        }

        @Test func aWaitOnOneServerIsServedByARecycleOnTheOther() async throws {
            let (redis, a, b) = try await Self.pair()
            defer { redis.stop() }
            _ = try await a.send("PUT", "/v1/pools/p", #"{"elements": ["e"], "backend": "redis"}"#)
            _ = try await a.send("POST", "/v1/pools/p/fetch", #"{"id": "held"}"#)
            async let waitingFetch = a.send("POST", "/v1/pools/p/fetch?wait=5", #"{"id": "next", "holder": "a"}"#)
            async let leaseWait = b.send("GET", "/v1/pools/p/leases/held?wait=5")
            #expect(await poll(5) { a.server.suspendedRequests == 1 && b.server.suspendedRequests == 1 })
            #expect(await poll(5) { (try? await b.send("GET", "/v1/pools/p"))?.counts["waiting"] as? Int == 1 })
            #expect(try await b.send("POST", "/v1/pools/p/recycle", #"{"element": "e"}"#).status == 200)
            let fetched = try await waitingFetch
            #expect(fetched.status == 201 && Self.lease(fetched)?["id"] as? String == "next")
            #expect(Self.element(fetched) == "e" && Self.lease(fetched)?["status"] as? String == "active")
            #expect(Self.lease(try await leaseWait)?["status"] as? String == "recycled")
            // A wait that nothing serves ends exhausted, and leaves the line.
            let started = Date()
            let late = try await b.send("POST", "/v1/pools/p/fetch?wait=0.3", #"{"id": "late"}"#)
            #expect(late.status == 409 && late.code == "pool_exhausted" && Date().timeIntervalSince(started) >= 0.25)
            #expect(try await a.send("GET", "/v1/pools/p").counts["waiting"] as? Int == 0)
            #expect(try await a.send("GET", "/v1/pools/p/leases/late").status == 404)
        }

        @Test func anExpiryServesAWaiterAndEveryServerStreamsIt() async throws {
            let (redis, a, b) = try await Self.pair()
            defer { redis.stop() }
            _ = try await a.send("PUT", "/v1/pools/p", #"{"elements": ["e"], "backend": "redis"}"#)
            let events = try SSEReader(port: b.port, "/v1/events?kind=pools&name=p")
            _ = try await a.send("POST", "/v1/pools/p/fetch", #"{"id": "short", "lease_seconds": 0.3}"#)
            // The expiry frees the element without a request; the waiter on B gets it.
            let next = try await b.send("POST", "/v1/pools/p/fetch?wait=5", #"{"id": "next"}"#)
            #expect(next.status == 201 && Self.element(next) == "e")
            let short = try await a.send("GET", "/v1/pools/p/leases/short")
            #expect(Self.lease(short)?["status"] as? String == "expired")
            let streamed = try await Task.detached {
                var seen: [String] = []
                while seen.count < 4, let event = try events.next() {
                    guard event.type != "created" else { continue }
                    let lease = event.data["data"] as? [String: Any]
                    seen.append("\(event.type) \(lease?["id"] as? String ?? "-")")
                }
                return seen
            }.value
            #expect(streamed == ["leased short", "waiting next", "expired short", "leased next"])
            let counts = try #require(try await b.send("GET", "/v1/pools/p").json["counts"] as? [String: Any])
            #expect(counts["expired_total"] as? Int == 1 && counts["fetched_total"] as? Int == 2)
        }

        @Test func deleteOnOneServerIsSeenOnTheOther() async throws {
            let (redis, a, b) = try await Self.pair()
            defer { redis.stop() }
            _ = try await a.send("PUT", "/v1/pools/p", #"{"elements": ["e"], "backend": "redis"}"#)
            _ = try await a.send("POST", "/v1/pools/p/fetch")
            async let parked = a.send("POST", "/v1/pools/p/fetch?wait=5")
            #expect(await poll(5) { a.server.suspendedRequests == 1 })
            #expect(try await b.send("DELETE", "/v1/pools/p").status == 204)
            #expect(try await parked.status == 410)
            #expect(await untilDeleted { try await a.send("GET", "/v1/pools/p").status })
            #expect(try await a.send("DELETE", "/v1/pools/p").status == 404)
        }

        @Test func declaredInTheConfigFileOnceForEveryServer() async throws {
            let redis = try await RedisServer()
            defer { redis.stop() }
            let declared =
                Self.config(redis).dropLast() + #", "pools": {"d": {"elements": ["x"], "backend": "redis"}}}"#
            let a = try LiveServer(String(declared))
            let b = try LiveServer(String(declared))
            #expect(try await poll(5) { try await a.send("GET", "/v1/pools/d").status == 200 })
            #expect(try await poll(5) { try await b.send("GET", "/v1/pools/d").status == 200 })
            #expect(try await b.send("POST", "/v1/pools/d/fetch").status == 201)
            #expect(try await a.send("POST", "/v1/pools/d/fetch").code == "pool_exhausted")
        }

        @Test func redisDownIsA503ForRedisPoolsOnlyAndRecovers() async throws {
            let (redis, a, _) = try await Self.pair()
            defer { redis.stop() }
            #expect(
                try await a.send("PUT", "/v1/pools/shared", #"{"elements": ["e"], "backend": "redis"}"#).status == 201)
            #expect(try await a.send("PUT", "/v1/pools/local", #"{"elements": ["e"]}"#).status == 201)
            _ = try await a.send("POST", "/v1/pools/shared/fetch", #"{"id": "held"}"#)
            async let parked = a.send("POST", "/v1/pools/shared/fetch?wait=0.5")
            #expect(await poll(5) { a.server.suspendedRequests == 1 })
            redis.stop()
            let refused = try await a.send("POST", "/v1/pools/shared/recycle", #"{"lease": "held"}"#)
            #expect(refused.status == 503 && refused.code == "backend_unavailable")
            #expect(refused.headers["retry-after"] != nil)
            // A wait parked before Redis went away is answered so once its wait passes.
            #expect(try await parked.code == "backend_unavailable")
            #expect(try await a.send("POST", "/v1/pools/local/fetch").status == 201)
            // Back (empty: no persistence): the pool is made again through the same server.
            try await redis.start()
            let again = #"{"elements": ["e"], "backend": "redis"}"#
            #expect(try await poll(10) { try await a.send("PUT", "/v1/pools/shared", again).status == 201 })
            #expect(try await a.send("POST", "/v1/pools/shared/fetch").status == 201)
        }
    }
}

extension OneAtATime.PoolRedisLiveTests {
    /// A fetch whose wait ends while Redis is paused answers 503 and still
    /// leaves the line once Redis answers again: no element goes to it later.
    @Test func aWaitEndedByAPausedRedisLeavesTheLineAfterwards() async throws {
        let (redis, a, b) = try await Self.pair()
        defer { redis.stop() }
        _ = try await a.send("PUT", "/v1/pools/p", #"{"elements": ["e"], "backend": "redis"}"#)
        _ = try await a.send("POST", "/v1/pools/p/fetch", #"{"id": "held"}"#)
        async let parked = a.send("POST", "/v1/pools/p/fetch?wait=0.5", #"{"id": "w"}"#)
        #expect(await poll(5) { (try? await b.send("GET", "/v1/pools/p"))?.counts["waiting"] as? Int == 1 })
        redis.signal(SIGSTOP)
        let answer = try await parked
        redis.signal(SIGCONT)
        #expect(answer.code == "backend_unavailable", "\(answer.text)")
        #expect(try await poll(5) { try await b.send("GET", "/v1/pools/p").counts["waiting"] as? Int == 0 })
        #expect(try await b.send("POST", "/v1/pools/p/recycle", #"{"lease": "held"}"#).status == 200)
        #expect(try await b.send("GET", "/v1/pools/p/leases/w").status == 404)
        #expect(try await b.send("GET", "/v1/pools/p").counts["available"] as? Int == 1)
    }

    /// A fetch with a wait sent while Redis is paused answers 503 (its first
    /// script timed out); Redis runs that script once it resumes, which puts
    /// the fetch in the line: it must leave it again, not wait there for
    /// nobody and take the next element freed.
    @Test func aWaitSentWhileRedisIsPausedDoesNotStayInTheLine() async throws {
        let (redis, a, b) = try await Self.pair()
        defer { redis.stop() }
        _ = try await a.send("PUT", "/v1/pools/p", #"{"elements": ["e"], "lease_seconds": 0, "backend": "redis"}"#)
        _ = try await a.send("POST", "/v1/pools/p/fetch", #"{"id": "held"}"#)
        redis.signal(SIGSTOP)
        let answer = try await a.send("POST", "/v1/pools/p/fetch?wait=5", #"{"id": "late"}"#)
        redis.signal(SIGCONT)
        #expect(answer.code == "backend_unavailable", "\(answer.text)")
        #expect(try await poll(5) { try await b.send("GET", "/v1/pools/p").counts["waiting"] as? Int == 0 })
        #expect(try await b.send("POST", "/v1/pools/p/recycle", #"{"lease": "held"}"#).status == 200)
        let late = try await b.send("GET", "/v1/pools/p/leases/late")
        #expect(late.status == 404 || Self.lease(late)?["status"] as? String == "recycled", "\(late.text)")
        #expect(try await b.send("GET", "/v1/pools/p").counts["available"] as? Int == 1)
    }
}

extension LiveServer {
    /// One request from async code, its blocking client on a thread of its own.
    fileprivate func send(_ method: String, _ path: String, _ body: String? = nil) async throws
        -> TestHTTPClient.Response
    {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try self.call(method, path, body) }) }.start()
        }
    }
}
