import Foundation
import Locking
import RedisTestServer
import TestSupport
import Testing

@testable import RedisClient

/// Against a three-master cluster the tests start (RedisClusterServer).
@Suite(.serialized, .timeLimit(.minutes(1))) struct RedisClusterTests {
    private func client(_ servers: RedisClusterServer) -> RedisCluster {
        RedisCluster(seed: servers.seed, connectTimeoutSeconds: 1, commandTimeoutSeconds: 2)
    }

    private func command(_ cluster: RedisCluster, _ arguments: [String], key: String) async throws -> RedisReply {
        try await RedisRoute(cluster: cluster, slot: ClusterSlot.of(key)).command(arguments)
    }

    @Test func commandsGoToTheirSlotsMaster() async throws {
        let servers = try await RedisClusterServer()
        let cluster = client(servers)
        let keys = (0..<30).map { "key\($0)" }
        for key in keys { #expect(try await command(cluster, ["SET", key, "v-\(key)"], key: key) == .status("OK")) }
        #expect(Set(keys.map(RedisClusterServer.nodeIndex(ofKey:))) == [0, 1, 2])
        for key in keys {
            let owner = servers.nodes[RedisClusterServer.nodeIndex(ofKey: key)].connection()
            #expect(try await owner.command(["GET", key]) == .bulk(Array("v-\(key)".utf8)))
        }
        #expect(cluster.redirectionCount == RedisCluster.Redirections())
        #expect(cluster.masters.count == 3)
    }

    @Test func followsAskDuringAMigrationThenMoved() async throws {
        let servers = try await RedisClusterServer()
        let cluster = client(servers)
        let key = "{migrating}k"
        let slot = ClusterSlot.of(key)
        let source = RedisClusterServer.nodeIndex(ofSlot: slot)
        let target = (source + 1) % 3
        #expect(try await command(cluster, ["SET", key, "v"], key: key) == .status("OK"))
        try await servers.beginMigration(slot: slot, from: source, to: target)
        try await servers.moveKeys(slot: slot, from: source, to: target)
        // The source no longer has the key: ASK, then ASKING + GET on the target; the map stays.
        #expect(try await command(cluster, ["GET", key], key: key) == .bulk(Array("v".utf8)))
        #expect(try await command(cluster, ["GET", key], key: key) == .bulk(Array("v".utf8)))
        #expect(cluster.redirectionCount == RedisCluster.Redirections(moved: 0, asked: 2, retried: 0))
        try await servers.finishMigration(slot: slot, to: target)
        // The source now answers MOVED: followed once, then the map sends it straight there.
        #expect(try await command(cluster, ["GET", key], key: key) == .bulk(Array("v".utf8)))
        #expect(try await command(cluster, ["GET", key], key: key) == .bulk(Array("v".utf8)))
        #expect(cluster.redirectionCount == RedisCluster.Redirections(moved: 1, asked: 2, retried: 0))
    }

    @Test func retriesTryAgainUntilTheMigrationEnds() async throws {
        let servers = try await RedisClusterServer()
        let cluster = client(servers)
        let (present, missing) = ("{half}present", "{half}missing")
        let slot = ClusterSlot.of(present)
        let source = RedisClusterServer.nodeIndex(ofSlot: slot)
        let target = (source + 2) % 3
        _ = try await command(cluster, ["SET", present, "1"], key: present)
        try await servers.beginMigration(slot: slot, from: source, to: target)
        try await servers.moveKeys(slot: slot, from: source, to: target)
        // Two keys, one missing, on a slot being imported: TRYAGAIN until the migration ends.
        let script = "return redis.call('EXISTS', KEYS[1], KEYS[2])"
        let call = Task {
            try await command(cluster, ["EVAL", script, "2", present, missing], key: present)
        }
        try await Task.sleep(for: .milliseconds(150))
        try await servers.finishMigration(slot: slot, to: target)
        #expect(try await call.value == .integer(1))
        // The retry after the last TRYAGAIN met either MOVED or an ASK that the
        // new owner served; either way the next command learns the move once.
        #expect(try await command(cluster, ["GET", present], key: present) == .bulk(Array("1".utf8)))
        #expect(try await command(cluster, ["GET", present], key: present) == .bulk(Array("1".utf8)))
        let counts = cluster.redirectionCount
        #expect(counts.retried >= 1)
        #expect(counts.moved == 1)
    }

    @Test func aStoppedMasterFailsOnlyItsSlotsAndComesBack() async throws {
        let servers = try await RedisClusterServer()
        let cluster = client(servers)
        let keys = ["a", "b", "c", "d", "e", "f", "g", "h"]
        for key in keys { _ = try await command(cluster, ["SET", key, "1"], key: key) }
        let down = RedisClusterServer.nodeIndex(ofKey: "a")
        let recovered = Locked<[RedisCluster.Address]>([])
        cluster.onRecovery { address in recovered.withLock { $0.append(address) } }
        servers.nodes[down].stop()
        for key in keys {
            if RedisClusterServer.nodeIndex(ofKey: key) == down {
                await #expect(throws: RedisError.self) { try await command(cluster, ["GET", key], key: key) }
            } else {
                #expect(try await command(cluster, ["GET", key], key: key) == .bulk(Array("1".utf8)))
            }
        }
        try await servers.nodes[down].start()
        try await servers.waitUntilSettled()
        // Back, empty (no persistence), after the connections' back-off.
        var answered: RedisReply?
        for _ in 0..<100 where answered == nil {
            answered = try? await command(cluster, ["GET", "a"], key: "a")
            if answered == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(answered == .null)
        // Told once that the node answers again (it may have lost its keys).
        #expect(recovered.withLock { $0 } == [RedisCluster.Address(host: "127.0.0.1", port: servers.nodes[down].port)])
    }

    @Test func theSubscriberMovesToAnotherNode() async throws {
        let servers = try await RedisClusterServer()
        let cluster = client(servers)
        try await cluster.readSlotMap()
        let events = Locked<[RedisSubscriber.Event]>([])
        let next: @Sendable () -> RedisEndpoint = { cluster.nextSubscriberEndpoint() }
        let subscriber = try RedisSubscriber(
            endpoints: next, connectTimeoutSeconds: 1, healthCheckSeconds: 0.5, channels: ["c"]
        ) { event in events.withLock { $0.append(event) } }
        defer { subscriber.stop() }
        func subscribedCount() -> Int {
            events.withLock { $0.filter { if case .subscribed = $0 { true } else { false } }.count }
        }
        func heard(_ text: String) -> Bool {
            events.withLock { $0.contains(.message(channel: "c", payload: Array(text.utf8))) }
        }
        #expect(await poll { subscribedCount() == 1 })
        // Published on another node: the cluster bus carries it.
        _ = try await servers.nodes[2].connection().command(["PUBLISH", "c", "one"])
        #expect(await poll { heard("one") })
        servers.nodes[0].stop()  // the seed, where it subscribed first
        #expect(await poll { subscribedCount() == 2 })
        _ = try await servers.nodes[1].connection().command(["PUBLISH", "c", "two"])
        #expect(await poll { heard("two") })
    }

    /// Checks `condition` every 20 ms for at most 5 s.
    private func poll(_ condition: () -> Bool) async -> Bool {
        await TestSupport.poll(5, every: .milliseconds(20), condition)
    }
}
