import Foundation
import HTTPTestClient
import RedisClient
import RedisTestServer
import TestSupport
import Testing

@testable import UsherAPI

/// Two Usher servers on a three-master Redis Cluster (`"cluster": true`):
/// resources spread over every master, wake-ups through notices published
/// on any node, and a master stopped and started again, or restarted empty.
@Suite(.serialized, .timeLimit(.minutes(2))) struct ClusterLiveTests {
    /// `declared` names a queue the config file keeps in Redis.
    static func config(_ cluster: RedisClusterServer, declared: String? = nil) -> String {
        let queues = declared.map { #""queues": {"\#($0)": {"capacity": 1, "backend": "redis"}},"# } ?? ""
        return """
            {"redis": {"url": "\(cluster.seedURL)", "cluster": true}, \(queues)
             "definitions": {"gate": {"initial": "closed",
               "transitions": [{"event": "open", "from": "closed", "to": "opened"},
                               {"event": "close", "from": "opened", "to": "closed"}]}}}
            """
    }

    /// The master that holds a resource's keys (at the start).
    static func node(_ kind: String, _ name: String) -> Int {
        RedisClusterServer.nodeIndex(ofKey: "usher:{\(kind):\(name)}:meta")
    }

    /// Names whose resources of `kind` lie on `node`, `count` of them.
    static func names(_ kind: String, on node: Int, count: Int = 2) -> [String] {
        var found: [String] = []
        var number = 0
        while found.count < count {
            let name = "\(kind.prefix(1))\(number)"
            if Self.node(kind, name) == node { found.append(name) }
            number += 1
        }
        return found
    }

    @Test func queuesAndMachinesOnEveryMasterWakeWaitersOnTheOtherServer() async throws {
        let cluster = try await RedisClusterServer()
        let a = try LiveServer(Self.config(cluster))
        let b = try LiveServer(Self.config(cluster))
        for master in 0..<3 {
            for name in Self.names("queue", on: master) {
                let put = try await a.send("PUT", "/v1/queues/\(name)", #"{"capacity": 1, "backend": "redis"}"#)
                #expect(put.status == 201, "\(name)")
                let holder = try await a.send("POST", "/v1/queues/\(name)/visitors", #"{"id": "h"}"#)
                #expect(holder.json["status"] as? String == "granted")
                // A long-poll parked on A, answered when B completes the holder.
                let started = Date()
                async let waited = a.send("POST", "/v1/queues/\(name)/visitors?wait=10", #"{"id": "w"}"#)
                #expect(
                    try await poll(5) {
                        try await b.send("GET", "/v1/queues/\(name)/visitors/w").json["status"] as? String == "waiting"
                    })
                #expect(try await b.send("POST", "/v1/queues/\(name)/visitors/h/complete").status == 200)
                let granted = try await waited
                #expect(granted.status == 201 && granted.json["status"] as? String == "granted", "\(name)")
                #expect(Date().timeIntervalSince(started) < 5)
            }
            for name in Self.names("machine", on: master) {
                let put = try await b.send(
                    "PUT", "/v1/machines/\(name)", #"{"definition": "gate", "backend": "redis"}"#)
                #expect(put.status == 201, "\(name)")
                let version = try #require(put.json["version"] as? Int)
                async let waited = a.send("GET", "/v1/machines/\(name)?wait=10&version=\(version)")
                #expect(await poll(5) { a.server.suspendedRequests >= 1 })
                let fired = try await b.send("POST", "/v1/machines/\(name)/events/open")
                #expect(try await waited.json["version"] as? Int == fired.json["version"] as? Int)
            }
        }
        // Both servers list all of them (the index hash is one key, on one master).
        let queues = try await b.send("GET", "/v1/queues").json["queues"] as? [[String: Any]]
        #expect(queues?.count == 6)
        let machines = try await a.send("GET", "/v1/machines").json["machines"] as? [[String: Any]]
        #expect(machines?.count == 6)
        #expect(try await a.send("GET", "/readyz").status == 200)
    }

    @Test func aStoppedMasterFailsOnlyItsResourcesUntilItIsBack() async throws {
        let cluster = try await RedisClusterServer()
        let a = try AppTester(Self.config(cluster))
        // Not the seed (the subscriber's first node) nor the index hash's master.
        let index = RedisClusterServer.nodeIndex(ofKey: "usher:resources")
        let down = try #require([1, 2].first { $0 != index })
        let up = (0..<3).filter { $0 != down }.flatMap { Self.names("queue", on: $0, count: 1) }
        let lost = Self.names("queue", on: down, count: 1)[0]
        for name in up + [lost] {
            #expect(
                try await a.send("PUT", "/v1/queues/\(name)", #"{"capacity": 1, "backend": "redis"}"#).status == 201)
        }
        #expect(try await a.send("PUT", "/v1/queues/local", #"{"capacity": 1, "backend": "memory"}"#).status == 201)
        cluster.nodes[down].stop()
        let failed = try await a.send("POST", "/v1/queues/\(lost)/visitors", #"{"id": "v"}"#)
        #expect(failed.status == 503 && failed.code == "backend_unavailable")
        #expect(failed.headers["retry-after"] != nil)
        // Looked up anew (as by an instance that has not heard of it): 503 too, not 404.
        a.app.registry.forget(.queues, lost)
        #expect(try await a.send("GET", "/v1/queues/\(lost)").status == 503)
        for name in up {
            #expect(try await a.send("POST", "/v1/queues/\(name)/visitors", #"{"id": "v"}"#).status == 201, "\(name)")
        }
        #expect(try await a.send("POST", "/v1/queues/local/visitors", #"{"id": "v"}"#).status == 201)
        #expect(try await a.send("GET", "/readyz").status == 200)  // other masters answer

        // Back, empty (no persistence): the queue is gone, and so is its entry
        // in the index (on another master): 404, and a PUT makes it anew.
        try await cluster.nodes[down].start()
        try await cluster.waitUntilSettled()
        var answer: TestHTTPClient.Response?
        let answered = try await poll(10) {
            answer = try await a.send("GET", "/v1/queues/\(lost)")
            return answer?.status == 404
        }
        #expect(answered, "\(answer?.status ?? 0) \(answer?.text ?? "")")
        #expect(try await a.send("PUT", "/v1/queues/\(lost)", #"{"capacity": 1, "backend": "redis"}"#).status == 201)
        #expect(try await a.send("POST", "/v1/queues/\(lost)/visitors", #"{"id": "v"}"#).status == 201)

        // The seed, where the subscriber is, goes: it subscribes on another node.
        cluster.nodes[0].stop()
        let elsewhere = try #require(up.first { Self.node("queue", $0) != 0 })
        #expect(
            try await poll(10) {
                var subscribers: Int64 = 0
                for node in cluster.nodes.dropFirst() {
                    let reply = try await node.connection().command(["PUBSUB", "NUMSUB", "usher:notices"])
                    subscribers += reply.array?.last?.int ?? 0
                }
                return subscribers == 1
            })
        #expect(try await poll(10) { try await a.send("GET", "/readyz").status == 200 })
        #expect(try await a.send("POST", "/v1/queues/\(elsewhere)/visitors", #"{"id": "x"}"#).status == 201)
    }

    @Test func aMasterBackEmptyLosesItsResourcesForEveryInstanceAndRemakesTheDeclared() async throws {
        let cluster = try await RedisClusterServer()
        // Not the seed (the subscriber's node) nor the index hash's master.
        let index = RedisClusterServer.nodeIndex(ofKey: "usher:resources")
        let down = try #require([1, 2].first { $0 != index })
        let onDown = Self.names("queue", on: down, count: 2)
        let (lost, declared) = (onDown[0], onDown[1])
        let kept = Self.names("queue", on: index, count: 1)[0]
        let config = Self.config(cluster, declared: declared)
        let a = try AppTester(config)
        let b = try AppTester(config)
        #expect(try await poll(10) { try await a.send("GET", "/v1/queues/\(declared)").status == 200 })
        for name in [lost, kept] {
            #expect(
                try await a.send("PUT", "/v1/queues/\(name)", #"{"capacity": 1, "backend": "redis"}"#).status == 201)
        }
        for name in [lost, kept, declared] {
            #expect(try await a.send("POST", "/v1/queues/\(name)/visitors", #"{"id": "v"}"#).status == 201, "\(name)")
            #expect(try await b.send("GET", "/v1/queues/\(name)/visitors/v").status == 200, "\(name)")
        }

        // Restarted empty (no persistence) while both servers know its queues.
        cluster.nodes[down].stop()
        try await cluster.nodes[down].start()
        try await cluster.waitUntilSettled()
        let started = Date()
        #expect(
            try await poll(10) {
                let onA = try await a.send("GET", "/v1/queues/\(lost)").status
                let onB = try await b.send("GET", "/v1/queues/\(lost)").status
                return onA == 404 && onB == 404
            })
        #expect(Date().timeIntervalSince(started) < 5)
        for server in [a, b] {
            let answer = try await server.send("GET", "/v1/queues/\(lost)")
            #expect(answer.status == 404 && answer.code == "not_found", "\(answer.status) \(answer.text)")
            // The declared queue is made again, empty; the one on another master keeps its visitor.
            #expect(try await poll(5) { try await server.send("GET", "/v1/queues/\(declared)").status == 200 })
            let listed = try await server.send("GET", "/v1/queues").json["queues"] as? [[String: Any]]
            #expect(Set(listed?.compactMap { $0["name"] as? String } ?? []) == [kept, declared])
            #expect(try await server.send("GET", "/v1/queues/\(declared)/visitors/v").status == 404)
            #expect(try await server.send("GET", "/v1/queues/\(kept)/visitors/v").status == 200)
        }
        #expect(try await b.send("POST", "/v1/queues/\(declared)/visitors", #"{"id": "w"}"#).status == 201)
        #expect(try await a.send("GET", "/v1/queues/\(declared)/visitors/w").status == 200)
    }
}

extension UsherUnderTest {
    /// One request from async code, its blocking client on a thread of its own.
    fileprivate func send(_ method: String, _ path: String, _ body: String? = nil) async throws
        -> TestHTTPClient.Response
    {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try self.call(method, path, body) }) }.start()
        }
    }
}
