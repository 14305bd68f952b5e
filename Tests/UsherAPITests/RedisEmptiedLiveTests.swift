import Foundation
import HTTPTestClient
import RedisTestServer
import TestSupport
import Testing

@testable import UsherAPI

/// Redis losing keys while it keeps running (its `run_id` unchanged):
/// `FLUSHALL`, `FLUSHDB`, one resource's keys evicted or deleted. Two
/// servers on one redis-server; every kind declared in the config file
/// (`declared`) and made at run time (`made`).
@Suite(.serialized, .timeLimit(.minutes(2))) struct RedisEmptiedLiveTests {
    static let kinds = ["queues", "windows", "pools", "pipelines", "machines"]

    /// A body of `kind` kept in Redis.
    static func body(_ kind: String) -> String {
        let fields =
            switch kind {
            case "queues": #""capacity": 1"#
            case "pools": #""elements": ["a"]"#
            case "machines": #""initial": "A", "transitions": [{"event": "go", "from": "A", "to": "A"}]"#
            default: ""
            }
        return fields.isEmpty ? #"{"backend": "redis"}"# : #"{\#(fields), "backend": "redis"}"#
    }

    /// Two servers declaring `declared` of every kind, and `made` of every kind made through the first.
    static func pair() async throws -> (RedisServer, [LiveServer]) {
        let redis = try await RedisServer()
        let declared = kinds.map { #""\#($0)": {"declared": \#(body($0))}"# }.joined(separator: ", ")
        let config = #"{"redis": {"url": "redis://127.0.0.1:\#(redis.port)"}, \#(declared)}"#
        let servers = [try LiveServer(config), try LiveServer(config)]
        for kind in kinds {
            let up = await poll(5) {
                var all = true
                for s in servers where (try? await s.callAsync("GET", "/v1/\(kind)/declared").status) != 200 {
                    all = false
                }
                return all
            }
            #expect(up, "\(kind)/declared was not declared in Redis")
            #expect(try await servers[0].callAsync("PUT", "/v1/\(kind)/made", body(kind)).status == 201)
            #expect(try await servers[1].callAsync("GET", "/v1/\(kind)/made").status == 200)
        }
        return (redis, servers)
    }

    /// The status of every `declared` and `made` on every server, and whether
    /// each list names `declared` and not `made`.
    static func statuses(_ servers: [LiveServer], names: [String] = ["declared", "made"]) async -> [String: Int] {
        var seen: [String: Int] = [:]
        for (index, server) in servers.enumerated() {
            for kind in kinds {
                for name in names {
                    let answer = try? await server.callAsync("GET", "/v1/\(kind)/\(name)")
                    seen["\(index) \(kind)/\(name)"] = answer?.status
                }
            }
        }
        return seen
    }

    /// Polls until every `declared` answers 200 and every `made` 404 on both
    /// servers, and their lists say so: the seconds it took, or nil after
    /// `timeout`. `seen` collects every status answered meanwhile.
    static func recovery(
        _ servers: [LiveServer], made: [String] = kinds, timeout: Double = 5, seen: inout [Int: Int]
    ) async -> Double? {
        let start = Date()
        while Date().timeIntervalSince(start) < timeout {
            var done = true
            for server in servers {
                for kind in kinds {
                    let declared = (try? await server.callAsync("GET", "/v1/\(kind)/declared"))?.status ?? 0
                    seen[declared, default: 0] += 1
                    if declared != 200 { done = false }
                    guard made.contains(kind) else { continue }
                    let gone = (try? await server.callAsync("GET", "/v1/\(kind)/made"))?.status ?? 0
                    seen[gone, default: 0] += 1
                    if gone != 404 { done = false }
                }
            }
            if done, await listsAgree(servers, made: made) { return Date().timeIntervalSince(start) }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }

    /// True when every server's list of every kind names `declared`, and `made` only for kinds not in `made`.
    static func listsAgree(_ servers: [LiveServer], made: [String]) async -> Bool {
        for server in servers {
            for kind in kinds {
                guard let list = try? await server.callAsync("GET", "/v1/\(kind)"), list.status == 200 else {
                    return false
                }
                let names = Set((list.json[kind] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String })
                if names != (made.contains(kind) ? ["declared"] : ["declared", "made"]) { return false }
            }
        }
        return true
    }

    @Test func aFlushAllRemakesTheDeclaredAndForgetsTheRestOnEveryServer() async throws {
        let (redis, servers) = try await Self.pair()
        defer { redis.stop() }
        // A long-poll parked on the made queue, on the second server.
        #expect(try await servers[0].callAsync("POST", "/v1/queues/made/visitors", #"{"id": "h"}"#).status == 201)
        let waiter = servers[1].inBackground { try servers[1].call("POST", "/v1/queues/made/visitors?wait=10", "{}") }
        _ = await poll(5) { servers[1].server.suspendedRequests >= 1 }
        try await Task.sleep(for: .milliseconds(100))

        _ = try await redis.connection().command(["FLUSHALL"])
        var seen: [Int: Int] = [:]
        let took = await Self.recovery(servers, seen: &seen)
        print("FLUSHALL: recovered on both in \(took.map { String(format: "%.3f s", $0) } ?? "never"), seen \(seen)")
        let after = await Self.statuses(servers)
        #expect(took != nil, "\(after)")
        let parked = try #require(try await onThread { waiter() })
        #expect(parked.status == 410 && parked.code == "gone", "\(parked.status) \(parked.text)")
        // Made again, empty, and used through either server.
        #expect(try await servers[1].callAsync("POST", "/v1/queues/declared/visitors", "{}").status == 201)
        #expect(try await servers[0].callAsync("POST", "/v1/machines/declared/events/go").status == 200)
        #expect(try await servers[0].callAsync("PUT", "/v1/queues/made", Self.body("queues")).status == 201)
        #expect(try await servers[1].callAsync("GET", "/v1/queues/made").status == 200)
    }

    @Test func aFlushDBIsNoticedWithoutARequest() async throws {
        let (redis, servers) = try await Self.pair()
        defer { redis.stop() }
        let connection = redis.connection()
        _ = try await connection.command(["FLUSHDB"])
        let start = Date()
        // No request touches Usher: the declared ones come back in Redis by themselves.
        let back = await poll(5) {
            (try? await connection.command(["HLEN", "usher:resources"]).int) == Int64(Self.kinds.count)
        }
        let took = Date().timeIntervalSince(start)
        print("FLUSHDB: declared back in Redis \(String(format: "%.3f s", took)) after, untouched")
        #expect(back)
        // Both servers take a moment at most to forget the rest.
        try await Task.sleep(for: .seconds(1.2))
        var seen: [Int: Int] = [:]
        let recovered = await Self.recovery(servers, timeout: 0.5, seen: &seen)
        let after = await Self.statuses(servers)
        #expect(recovered != nil, "\(after)")
        #expect(seen[410] == nil, "\(seen)")
    }

    @Test func oneResourceLosingItsKeysIsMadeAgainOrForgotten() async throws {
        let (redis, servers) = try await Self.pair()
        defer { redis.stop() }
        let connection = redis.connection()
        // As an eviction would: every key of one declared and one made resource
        // of each kind, the rest of Redis untouched.
        for kind in Self.kinds {
            let noun = String(kind.dropLast())
            for name in ["declared", "made"] {
                let keys = try await connection.command(["KEYS", "usher:{\(noun):\(name)}:*"]).array ?? []
                #expect(!keys.isEmpty)
                _ = try await connection.command(["DEL"] + keys.compactMap(\.string))
            }
        }
        var seen: [Int: Int] = [:]
        let took = await Self.recovery(servers, seen: &seen)
        let figure = took.map { String(format: "%.3f s", $0) } ?? "never"
        print("keys of one resource deleted: recovered on both in \(figure), seen \(seen)")
        let after = await Self.statuses(servers)
        #expect(took != nil, "\(after)")
        // Only the meta key of a made one (partly evicted): forgotten; made again, it starts empty.
        #expect(try await servers[0].callAsync("PUT", "/v1/queues/made", Self.body("queues")).status == 201)
        #expect(try await servers[0].callAsync("POST", "/v1/queues/made/visitors", #"{"id": "old"}"#).status == 201)
        _ = try await connection.command(["DEL", "usher:{queue:made}:meta"])
        let forgotten = await poll(5) {
            var all = true
            for s in servers where (try? await s.callAsync("GET", "/v1/queues/made").status) != 404 { all = false }
            return all
        }
        let left = await Self.statuses(servers, names: ["made"])
        #expect(forgotten, "\(left)")
        #expect(try await servers[1].callAsync("PUT", "/v1/queues/made", Self.body("queues")).status == 201)
        #expect(try await servers[0].callAsync("GET", "/v1/queues/made/visitors/old").status == 404)
    }
}
