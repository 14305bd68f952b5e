import Foundation
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// Pool stores on a three-master cluster (RedisClusterServer): every call
/// goes to its pool's master, and every key a pool script touches is in one slot.
@Suite(.serialized, .timeLimit(.minutes(2))) struct PoolClusterTests {
    @Test func poolsSpreadOverEveryMasterWithoutRedirections() async throws {
        let servers = try await RedisClusterServer()
        let cluster = RedisCluster(seed: servers.seed, connectTimeoutSeconds: 1, commandTimeoutSeconds: 2)
        let connections = RedisConnectionPool(cluster: cluster)
        let names = (0..<12).map { "p\($0)" }
        func node(_ name: String) -> Int {
            RedisClusterServer.nodeIndex(ofKey: ResourceKeys(prefix: "usher:", kind: "pool", name: name).key("meta"))
        }
        #expect(Set(names.map(node)) == [0, 1, 2])
        for name in names {
            let store = RedisPoolStore(
                keys: ResourceKeys(prefix: "usher:", kind: "pool", name: name), connections: connections,
                time: .server, channel: "usher:notices", onDeadline: { _ in })
            #expect(try await store.create(PoolConfig(elements: [PoolElementSpec(id: "e")])).created)
            #expect(try await store.fetch(FetchRequest(id: "a")).element == "e")
            #expect(try await store.fetch(FetchRequest(id: "w"), waiting: true).status == .waiting)
            _ = try await store.putElement("x", data: .int(1))
            #expect(try await store.lease(id: "w").element == "x")
            _ = try await store.removeElement("e", force: true)
            #expect(try await store.recycle(element: "x").id == "w")
            #expect(try await store.state(limit: 10).counts.revokedTotal == 1)
        }
        for (index, server) in servers.nodes.enumerated() {
            let keys = try await server.connection().command(["KEYS", "usher:*"]).array?.compactMap(\.string) ?? []
            let mine = names.filter { node($0) == index }
            #expect(Set(mine.map { "usher:{pool:\($0)}:el" }).isSubset(of: Set(keys)), "node \(index)")
            #expect(keys.allSatisfy { key in mine.contains { key.hasPrefix("usher:{pool:\($0)}:") } }, "node \(index)")
        }
        #expect(cluster.redirectionCount == RedisCluster.Redirections())
    }
}
