import Foundation
import RedisClient
import RedisTestServer
import Synchronization
import Testing

@testable import UsherCore
@testable import UsherRedis

/// Queue and machine stores on a three-master cluster (RedisClusterServer):
/// every call goes to its resource's master, and a slot migrated by hand
/// while in use is followed (ASK, TRYAGAIN, then MOVED).
@Suite(.serialized, .timeLimit(.minutes(2))) struct ClusterStoreTests {
    static let channel = "usher:notices"

    private static func pool(_ servers: RedisClusterServer) -> (RedisConnectionPool, RedisCluster) {
        let cluster = RedisCluster(seed: servers.seed, connectTimeoutSeconds: 1, commandTimeoutSeconds: 2)
        return (RedisConnectionPool(cluster: cluster), cluster)
    }

    private static func machine(_ name: String, _ pool: RedisConnectionPool) -> RedisMachineStore {
        RedisMachineStore(
            keys: ResourceKeys(prefix: "usher:", kind: "machine", name: name), connections: pool, time: .server,
            channel: channel, onDeadline: { _ in })
    }

    private static func queue(_ name: String, _ pool: RedisConnectionPool) -> RedisQueueStore {
        RedisQueueStore(
            keys: ResourceKeys(prefix: "usher:", kind: "queue", name: name), connections: pool, time: .server,
            channel: channel, onDeadline: { _ in })
    }

    /// The master a resource's keys live on at the start.
    private static func node(_ kind: String, _ name: String) -> Int {
        RedisClusterServer.nodeIndex(ofKey: ResourceKeys(prefix: "usher:", kind: kind, name: name).key("meta"))
    }

    @Test func resourcesSpreadOverEveryMasterWithoutRedirections() async throws {
        let servers = try await RedisClusterServer()
        let (pool, cluster) = Self.pool(servers)
        let names = (0..<12).map { "r\($0)" }
        #expect(Set(names.map { Self.node("queue", $0) }) == [0, 1, 2])
        for name in names {
            let q = Self.queue(name, pool)
            #expect(try await q.create(QueueConfig(capacity: 1)).created)
            #expect(try await q.enqueue(VisitorRequest(id: "a")).view.status == .granted)
            #expect(try await q.enqueue(VisitorRequest(id: "b")).view.status == .waiting)
            #expect(try await q.complete(id: "a").status == .completed)
            #expect(try await q.visitor(id: "b").status == .granted)
            let m = Self.machine(name, pool)
            _ = try await m.create(definitionName: nil, definition: RedisMachineFixtures.lock)
            #expect(try await m.fire(event: "claim").state == "Held")
        }
        for (index, node) in servers.nodes.enumerated() {
            let keys = try await node.connection().command(["KEYS", "usher:*"]).array?.compactMap(\.string) ?? []
            let mine = names.filter { Self.node("queue", $0) == index }.map { "usher:{queue:\($0)}:meta" }
            #expect(Set(mine).isSubset(of: Set(keys)), "node \(index)")
        }
        #expect(cluster.redirectionCount == RedisCluster.Redirections())
        // Each node's script cache is its own: emptied on one, EVAL there (NOSCRIPT).
        _ = try await servers.nodes[1].connection().command(["SCRIPT", "FLUSH"])
        for name in names { #expect(try await Self.machine(name, pool).fire(event: "release").state == "Idle") }
        #expect(cluster.redirectionCount == RedisCluster.Redirections())
    }

    @Test func aMachineInUseFollowsItsSlotToAnotherMaster() async throws {
        let servers = try await RedisClusterServer()
        let (pool, cluster) = Self.pool(servers)
        let store = Self.machine("door", pool)
        let slot = ClusterSlot.of(store.keys.key("meta"))
        let source = RedisClusterServer.nodeIndex(ofSlot: slot)
        let target = (source + 1) % 3
        _ = try await store.create(definitionName: nil, definition: RedisMachineFixtures.lock)
        _ = try await store.fire(event: "claim")
        // Clients fire on while the slot moves; every call must be answered.
        let running = Atomic<Bool>(true)
        let firing = Task {
            var versions: [Int64] = []
            var held = true
            while running.load(ordering: .relaxed) {
                let result = try await store.fire(event: held ? "release" : "claim")
                versions.append(result.version)
                held.toggle()
            }
            return versions
        }
        try await Task.sleep(for: .milliseconds(50))
        try await servers.beginMigration(slot: slot, from: source, to: target)
        try await Task.sleep(for: .milliseconds(50))
        try await servers.moveKeys(slot: slot, from: source, to: target)
        try await Task.sleep(for: .milliseconds(100))  // served on the target through ASK
        try await servers.finishMigration(slot: slot, to: target)
        try await Task.sleep(for: .milliseconds(100))  // MOVED once, then straight there
        running.store(false, ordering: .relaxed)
        let versions = try await firing.value
        #expect(versions.count > 10)
        #expect(zip(versions, versions.dropFirst()).allSatisfy { $0 < $1 })
        let counts = cluster.redirectionCount
        #expect(counts.asked >= 1)
        #expect(counts.moved >= 1)
        let keys = try await servers.nodes[target].connection().command(["KEYS", "usher:{machine:door}:*"])
        #expect(keys.array?.count == 2)
        #expect(try await store.snapshot().version == versions.last)
    }

    @Test func aQueueWaitsOutAHalfMigratedSlot() async throws {
        let servers = try await RedisClusterServer()
        let (pool, cluster) = Self.pool(servers)
        let store = Self.queue("line", pool)
        let slot = ClusterSlot.of(store.keys.key("meta"))
        let source = RedisClusterServer.nodeIndex(ofSlot: slot)
        let target = (source + 2) % 3
        _ = try await store.create(QueueConfig(capacity: 1))
        _ = try await store.enqueue(VisitorRequest(id: "a"))
        try await servers.beginMigration(slot: slot, from: source, to: target)
        try await servers.moveKeys(slot: slot, from: source, to: target)
        // Some of the queue's eleven keys do not exist (empty): the target
        // answers TRYAGAIN until the slot is its own.
        let enqueue = Task { try await store.enqueue(VisitorRequest(id: "b")).view }
        try await Task.sleep(for: .milliseconds(150))
        try await servers.finishMigration(slot: slot, to: target)
        #expect(try await enqueue.value.status == .waiting)
        #expect(try await store.complete(id: "a").status == .completed)
        #expect(try await store.visitor(id: "b").status == .granted)
        let counts = cluster.redirectionCount
        #expect(counts.retried >= 1)
        #expect(counts.moved >= 1)
    }

    @Test func aStoppedMasterAnswersUnavailableForItsResourcesOnly() async throws {
        let servers = try await RedisClusterServer()
        let (pool, _) = Self.pool(servers)
        let names = (0..<9).map { "m\($0)" }
        for name in names {
            _ = try await Self.machine(name, pool).create(definitionName: nil, definition: RedisMachineFixtures.lock)
        }
        let down = Self.node("machine", names[0])
        servers.nodes[down].stop()
        for name in names {
            let error = await Self.snapshotError(Self.machine(name, pool))
            if Self.node("machine", name) == down {
                guard case .backendUnavailable = error else {
                    Issue.record("\(name): \(String(describing: error))")
                    continue
                }
            } else {
                #expect(error == nil, "\(name)")
            }
        }
        try await servers.nodes[down].start()
        try await servers.waitUntilSettled()
        // Back, empty (no persistence): the master answers again, that the machine is gone.
        var error = await Self.snapshotError(Self.machine(names[0], pool))
        for _ in 0..<100 {
            guard case .backendUnavailable = error else { break }
            try await Task.sleep(for: .milliseconds(50))
            error = await Self.snapshotError(Self.machine(names[0], pool))
        }
        #expect(error == .gone)
        let elsewhere = try #require(names.first { Self.node("machine", $0) != down })
        #expect(await Self.snapshotError(Self.machine(elsewhere, pool)) == nil)
    }

    private static func snapshotError(_ store: RedisMachineStore) async -> MachineError? {
        do throws(MachineError) {
            _ = try await store.snapshot()
            return nil
        } catch {
            return error
        }
    }
}
