import Foundation
import HTTPTestClient
import RedisTestServer
import TestSupport
import Testing

@testable import UsherAPI

extension OneAtATime {
    /// Machines kept in Redis, seen through two servers that share one redis-server.
    @Suite struct MachineRedisLiveTests {
        static func config(_ redis: RedisServer) -> String {
            """
            {"redis": {"url": "redis://127.0.0.1:\(redis.port)"},
             "definitions": {"door": {"initial": "closed",
               "transitions": [{"event": "open", "from": "closed", "to": "opened"},
                               {"event": "close", "from": "opened", "to": "closed"}],
               "timeouts": [{"state": "opened", "after_seconds": 0.3, "event": "close"}]},
              "gate": {"initial": "closed",
               "transitions": [{"event": "open", "from": "closed", "to": "opened"},
                               {"event": "close", "from": "opened", "to": "closed"}]}}}
            """
        }

        /// A redis-server and two servers on it.
        static func pair() async throws -> (RedisServer, LiveServer, LiveServer) {
            let redis = try await RedisServer()
            return (redis, try LiveServer(config(redis)), try LiveServer(config(redis)))
        }

        @Test func createdOnOneServerFiredOnTheOther() async throws {
            let (redis, a, b) = try await Self.pair()
            defer { redis.stop() }
            let put = try await a.send("PUT", "/v1/machines/m", #"{"definition": "gate", "backend": "redis"}"#)
            #expect(put.status == 201)
            #expect(put.json["state"] as? String == "closed")
            let version = try #require(put.json["version"] as? Int)
            #expect(put.headers["etag"] == "\"\(version)\"")
            // The same definition again, on either server: 200; another one: 409.
            #expect(
                try await b.send("PUT", "/v1/machines/m", #"{"definition": "gate", "backend": "redis"}"#).status == 200)
            let other = #"{"initial": "x", "transitions": [], "backend": "redis"}"#
            #expect(try await b.send("PUT", "/v1/machines/m", other).code == "already_exists")
            #expect(try await a.send("PUT", "/v1/machines/m", #"{"definition": "gate"}"#).code == "already_exists")

            let fired = try await b.send("POST", "/v1/machines/m/events/open")
            #expect(fired.status == 200)
            #expect(fired.json["to"] as? String == "opened")
            #expect((fired.json["version"] as? Int ?? 0) > version)
            let seen = try await a.send("GET", "/v1/machines/m")
            #expect(seen.json["state"] as? String == "opened")
            #expect(seen.json["version"] as? Int == fired.json["version"] as? Int)
            #expect(try await a.send("POST", "/v1/machines/m/events/fly").status == 404)
            #expect(try await a.send("POST", "/v1/machines/m/events/open").code == "invalid_transition")

            let list = try await b.send("GET", "/v1/machines")
            let listed = try #require((list.json["machines"] as? [[String: Any]])?.first)
            #expect(listed["name"] as? String == "m")
            #expect(listed["definition"] as? String == "gate")
            #expect(listed["backend"] as? String == "redis")
        }

        @Test func aWaitOnOneServerIsAnsweredByAnEventOnTheOther() async throws {
            let (redis, a, b) = try await Self.pair()
            defer { redis.stop() }
            let put = try await a.send("PUT", "/v1/machines/m", #"{"definition": "gate", "backend": "redis"}"#)
            let version = try #require(put.json["version"] as? Int)
            async let waited = a.send("GET", "/v1/machines/m?wait=5&version=\(version)")
            #expect(await poll(5) { a.server.suspendedRequests == 1 })
            let fired = try await b.send("POST", "/v1/machines/m/events/open")
            let answer = try await waited
            #expect(answer.status == 200)
            #expect(answer.json["version"] as? Int == fired.json["version"] as? Int)
            // A wait that sees no change ends at its deadline with the same version.
            let now = try #require(answer.json["version"] as? Int)
            let idle = try await a.send("GET", "/v1/machines/m?wait=0.2&version=\(now)")
            #expect(idle.status == 200)
            #expect(idle.json["version"] as? Int == now)
        }

        @Test func ifMatchRaceHasOneWinner() async throws {
            let (redis, a, b) = try await Self.pair()
            defer { redis.stop() }
            let put = try await a.send("PUT", "/v1/machines/m", #"{"definition": "gate", "backend": "redis"}"#)
            let version = try #require(put.json["version"] as? Int)
            async let first = a.send("POST", "/v1/machines/m/events/open", headers: ["If-Match": "\"\(version)\""])
            async let second = b.send("POST", "/v1/machines/m/events/open", headers: ["If-Match": "\"\(version)\""])
            let statuses = [try await first.status, try await second.status].sorted()
            // The loser is refused by its version (412) or, if it was checked after the winner, by the state.
            #expect(statuses == [200, 412])
        }

        @Test func transactionOpenedOnOneServerCommittedOnTheOther() async throws {
            let (redis, a, b) = try await Self.pair()
            defer { redis.stop() }
            _ = try await a.send("PUT", "/v1/machines/m", #"{"definition": "gate", "backend": "redis"}"#)
            let opened = try await a.send(
                "POST", "/v1/machines/m/transactions", #"{"event": "open", "data": {"by": "a"}}"#)
            #expect(opened.status == 201)
            let id = try #require(opened.json["id"] as? String)
            #expect(try await b.send("POST", "/v1/machines/m/events/open").code == "transaction_open")
            let committed = try await b.send("POST", "/v1/machines/m/transactions/\(id)/commit")
            #expect(committed.status == 200)
            #expect(committed.json["to"] as? String == "opened")
            #expect(try await a.send("POST", "/v1/machines/m/transactions/\(id)/abort").code == "transaction_ended")
            let history = try #require(try await a.send("GET", "/v1/machines/m").json["history"] as? [[String: Any]])
            #expect(history.last?["transaction"] as? String == id)
        }

        @Test func stateTimeoutAppliesAndEveryServerStreamsIt() async throws {
            let (redis, a, b) = try await Self.pair()
            defer { redis.stop() }
            _ = try await a.send("PUT", "/v1/machines/m", #"{"definition": "door", "backend": "redis"}"#)
            let events = try SSEReader(port: b.port, "/v1/events?kind=machines&name=m")
            let opened = try await a.send("POST", "/v1/machines/m/events/open")
            let version = try #require(opened.json["version"] as? Int)
            // The 0.3 s timeout closes the door without a request.
            let closed = try await b.send("GET", "/v1/machines/m?wait=2&version=\(version)")
            #expect(closed.json["state"] as? String == "closed")
            let history = try #require(closed.json["history"] as? [[String: Any]])
            #expect(history.last?["cause"] as? String == "timeout")
            // B streams A's transition and the timeout's, each once (after B's `created`, if B adopted it late).
            let streamed = try await Task.detached {
                var seen: [String] = []
                while seen.count < 2, let event = try events.next() {
                    guard event.type != "created" else { continue }
                    seen.append("\(event.type) to \((event.data["data"] as? [String: Any])?["to"] as? String ?? "-")")
                }
                return seen
            }.value
            #expect(streamed == ["transition to opened", "transition to closed"])
        }

        @Test func deleteOnOneServerIsSeenOnTheOther() async throws {
            let (redis, a, b) = try await Self.pair()
            defer { redis.stop() }
            _ = try await a.send("PUT", "/v1/machines/m", #"{"definition": "gate", "backend": "redis"}"#)
            let version = try #require(try await a.send("GET", "/v1/machines/m").json["version"] as? Int)
            async let parked = a.send("GET", "/v1/machines/m?wait=5&version=\(version)")
            #expect(await poll(5) { a.server.suspendedRequests == 1 })
            #expect(try await b.send("DELETE", "/v1/machines/m").status == 204)
            #expect(try await parked.status == 410)
            #expect(await untilDeleted { try await a.send("GET", "/v1/machines/m").status })
            #expect(try await a.send("DELETE", "/v1/machines/m").status == 404)
        }

        @Test func declaredInTheConfigFileOnceForEveryServer() async throws {
            let redis = try await RedisServer()
            defer { redis.stop() }
            let declared =
                Self.config(redis).dropLast() + #", "machines": {"d": {"definition": "gate", "backend": "redis"}}}"#
            let a = try LiveServer(String(declared))
            let b = try LiveServer(String(declared))
            // Created in Redis once Redis answers, by whichever server comes first; the other finds it.
            #expect(try await poll(5) { try await a.send("GET", "/v1/machines/d").status == 200 })
            let fired = try await b.send("POST", "/v1/machines/d/events/open")
            #expect(fired.status == 200)
            #expect(try await a.send("GET", "/v1/machines/d").json["state"] as? String == "opened")
            // A third server with another definition under that name leaves the machine as it is.
            let other = String(declared).replacingOccurrences(
                of: #""definition": "gate""#, with: #""definition": "door""#)
            let c = try LiveServer(other)
            #expect(try await poll(5) { try await c.send("GET", "/v1/machines/d").status == 200 })
            #expect(try await c.send("GET", "/v1/machines/d").json["definition"] as? String == "gate")
        }

        @Test func queuesAndMachinesShareRedisMaxResources() async throws {
            let redis = try await RedisServer()
            defer { redis.stop() }
            let capped = Self.config(redis).dropLast() + #", "max_resources": 2}"#
            let a = try LiveServer(String(capped))
            let b = try LiveServer(String(capped))
            #expect(try await a.send("PUT", "/v1/queues/q", #"{"capacity": 1, "backend": "redis"}"#).status == 201)
            #expect(try await b.send("PUT", "/v1/queues/q", #"{"capacity": 1, "backend": "redis"}"#).status == 200)
            #expect(
                try await b.send("PUT", "/v1/machines/m", #"{"definition": "gate", "backend": "redis"}"#).status == 201)
            let third = try await a.send("PUT", "/v1/machines/n", #"{"definition": "gate", "backend": "redis"}"#)
            #expect(third.status == 429)
            #expect(third.code == "too_many_resources")
            // Found again, not made, even by a server that has not heard of it yet: the cap does not apply.
            let c = try LiveServer(String(capped))
            #expect(
                try await c.send("PUT", "/v1/machines/m", #"{"definition": "gate", "backend": "redis"}"#).status == 200)
            #expect(try await c.send("PUT", "/v1/queues/q", #"{"capacity": 1, "backend": "redis"}"#).status == 200)
        }

        @Test func redisDownIsA503ForRedisMachinesOnly() async throws {
            let (redis, a, _) = try await Self.pair()
            defer { redis.stop() }
            let put = try await a.send("PUT", "/v1/machines/shared", #"{"definition": "gate", "backend": "redis"}"#)
            #expect(put.status == 201)
            let version = try #require(put.json["version"] as? Int)
            #expect(try await a.send("PUT", "/v1/machines/local", #"{"definition": "gate"}"#).status == 201)
            async let parked = a.send("GET", "/v1/machines/shared?wait=0.5&version=\(version)")
            #expect(await poll(5) { a.server.suspendedRequests == 1 })
            redis.stop()
            let refused = try await a.send("POST", "/v1/machines/shared/events/open")
            #expect(refused.status == 503)
            #expect(refused.code == "backend_unavailable")
            #expect(refused.headers["retry-after"] != nil)
            // A wait parked before Redis went away is answered so once its wait passes.
            #expect(try await parked.code == "backend_unavailable")
            #expect(try await a.send("POST", "/v1/machines/local/events/open").status == 200)
        }
    }
}

extension LiveServer {
    /// One request from async code, its blocking client on a thread of its own.
    fileprivate func send(_ method: String, _ path: String, _ body: String? = nil, headers: [String: String] = [:])
        async throws
        -> TestHTTPClient.Response
    {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try self.call(method, path, body, headers: headers) }) }
                .start()
        }
    }
}
