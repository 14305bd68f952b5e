import Foundation
import HTTPTestClient
import RedisTestServer
import TestSupport
import Testing

@testable import UsherAPI

extension OneAtATime {
    /// `GET /v1/{kind}` over Redis-backed resources, live: a page's summaries are
    /// asked of Redis at once and answered in the list's order, beside memory
    /// ones; a summary Redis does not give fails the list, as it did when they
    /// were asked one after another.
    @Suite(.serialized, .timeLimit(.minutes(2))) struct RedisListLiveTests {
        static func items(_ response: TestHTTPClient.Response, _ kind: String) -> [[String: Any]] {
            response.json[kind] as? [[String: Any]] ?? []
        }

        static func names(_ response: TestHTTPClient.Response, _ kind: String) -> [String] {
            items(response, kind).compactMap { $0["name"] as? String }
        }

        @Test func aPageOfRedisSummariesKeepsTheListOrder() async throws {
            let s = try await BackendLiveServer(.redis)
            let client = s.keepAlive()
            var queues: [String] = []
            for i in 0..<30 {
                let name = String(format: "q%02d", i)
                let body = s.put(#"{"capacity": \#(i % 3 + 1)}"#)
                #expect(try await client.request("PUT", "/v1/queues/\(name)", body: body).status == 201)
                queues.append(name)
            }
            for name in ["q05m", "q17m"] {
                let body = #"{"capacity": 1, "backend": "memory"}"#
                #expect(try await client.request("PUT", "/v1/queues/\(name)", body: body).status == 201)
                queues.append(name)
            }
            queues.sort()
            for id in ["a", "b"] {
                let body = #"{"id": "\#(id)"}"#
                #expect(try await client.request("POST", "/v1/queues/q06/visitors", body: body).status == 201)
            }

            let first = try await client.request("GET", "/v1/queues?limit=20")
            #expect(first.status == 200)
            #expect(Self.names(first, "queues") == Array(queues.prefix(20)))
            let cursor = try #require(first.json["next_cursor"] as? String)
            #expect(cursor.hasPrefix(queues[19] + "."))
            let q06 = try #require(Self.items(first, "queues").first { $0["name"] as? String == "q06" })
            #expect(q06["capacity"] as? Int == 1 && q06["holding"] as? Int == 1 && q06["waiting"] as? Int == 1)
            #expect(q06["backend"] as? String == "redis")
            let q08 = try #require(Self.items(first, "queues").first { $0["name"] as? String == "q08" })
            #expect(q08["capacity"] as? Int == 3 && q08["holding"] as? Int == 0)
            let memory = try #require(Self.items(first, "queues").first { $0["name"] as? String == "q05m" })
            #expect(memory["backend"] == nil && memory["capacity"] as? Int == 1)

            let rest = try await client.request("GET", "/v1/queues?limit=20&cursor=\(cursor)")
            #expect(rest.status == 200)
            #expect(Self.names(rest, "queues") == Array(queues.dropFirst(20)))
            #expect(rest.json["next_cursor"] is NSNull)

            // The other kinds' lists, in order, with their counts from Redis.
            let others: [(kind: String, prefix: String, body: String)] = [
                ("windows", "w", "{}"), ("pools", "p", #"{"elements": ["e1", "e2"]}"#), ("pipelines", "pl", "{}"),
                ("machines", "m", #"{"definition": "player"}"#),
            ]
            for (kind, prefix, body) in others {
                for i in (0..<6).reversed() {
                    #expect(
                        try await client.request("PUT", "/v1/\(kind)/\(prefix)\(i)", body: s.put(body)).status == 201)
                }
            }
            #expect(try await client.request("POST", "/v1/windows/w2/show", body: #"{"id": "x"}"#).status == 201)
            #expect(try await client.request("POST", "/v1/pools/p3/fetch", body: #"{"holder": "h"}"#).status == 201)
            #expect(try await client.request("POST", "/v1/pipelines/pl4/items", body: #"{"payload": 1}"#).status == 201)
            for (kind, prefix, _) in others {
                let list = try await client.request("GET", "/v1/\(kind)?limit=5")
                #expect(list.status == 200)
                #expect(Self.names(list, kind) == (0..<5).map { "\(prefix)\($0)" })
                #expect(Self.items(list, kind).allSatisfy { $0["backend"] as? String == "redis" })
            }
            let windows = Self.items(try await client.request("GET", "/v1/windows"), "windows")
            #expect(windows.map { $0["showing"] as? String } == [nil, nil, "x", nil, nil, nil])
            let pools = Self.items(try await client.request("GET", "/v1/pools"), "pools")
            #expect(pools.map { $0["available"] as? Int } == [2, 2, 2, 1, 2, 2])
            let pipelines = Self.items(try await client.request("GET", "/v1/pipelines"), "pipelines")
            #expect(pipelines.map { $0["ready"] as? Int } == [0, 0, 0, 0, 1, 0])
            let machines = Self.items(try await client.request("GET", "/v1/machines"), "machines")
            #expect(machines.allSatisfy { $0["state"] as? String == "NotReady" } && machines.count == 6)
        }

        @Test func aSummaryRedisDoesNotGiveFailsTheListUnlessItIsGone() async throws {
            let redis = try await RedisServer()
            let s = try await BackendApp(.redis, redis: redis)
            for name in ["a", "b", "c"] {
                #expect(try await s.call("PUT", "/v1/queues/\(name)", s.put("{}")).status == 201)
            }
            #expect(try await s.call("PUT", "/v1/windows/local", "{}").status == 201)

            // Redis paused: the summaries wait out the command timeout (2 s)
            // together, and the list answers 503 after one timeout, not three.
            redis.signal(SIGSTOP)
            let started = Date()
            let paused = try await s.call("GET", "/v1/queues")
            let waited = Date().timeIntervalSince(started)
            redis.signal(SIGCONT)
            #expect(paused.status == 503 && paused.code == "backend_unavailable", "\(paused.text)")
            #expect(waited < 4, "\(waited) s")
            #expect(try await s.call("GET", "/v1/windows").status == 200)
            #expect(await poll(10) { (try? await s.call("GET", "/v1/queues").status) == 200 })

            // b's keys gone behind the server's back (a deletion whose notice has
            // not come): the list leaves b out, the rest as it is; b is forgotten.
            let admin = redis.connection()
            let keys = try await admin.command(["KEYS", "usher:{queue:b}:*"]).array?.compactMap(\.string) ?? []
            #expect(!keys.isEmpty)
            _ = try await admin.command(["DEL"] + keys)
            _ = try await admin.command(["HDEL", "usher:resources", "queue:b"])
            let listed = try await s.call("GET", "/v1/queues")
            #expect(listed.status == 200 && Self.names(listed, "queues") == ["a", "c"], "\(listed.text)")
            #expect(try await s.call("GET", "/v1/queues/b").status == 404)
        }
    }
}
