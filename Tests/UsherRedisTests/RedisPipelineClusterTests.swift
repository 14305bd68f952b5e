import Foundation
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// Pipeline stores on a three-master cluster (RedisClusterServer): every
/// call, a take's second call for its filters included, goes to the
/// pipeline's master.
@Suite(.serialized, .timeLimit(.minutes(2))) struct RedisPipelineClusterTests {
    @Test func pipelinesSpreadOverEveryMasterWithoutRedirections() async throws {
        let servers = try await RedisClusterServer()
        let cluster = RedisCluster(seed: servers.seed, connectTimeoutSeconds: 1, commandTimeoutSeconds: 2)
        let pool = RedisConnectionPool(cluster: cluster)
        let names = (0..<12).map { "p\($0)" }
        let nodes = names.map {
            RedisClusterServer.nodeIndex(ofKey: ResourceKeys(prefix: "usher:", kind: "pipeline", name: $0).key("meta"))
        }
        #expect(Set(nodes) == [0, 1, 2])
        let drop = PipelineFilter(when: .init(field: .init(tokens: ["skip"]), test: .exists(true)), action: .drop)
        for name in names {
            let store = RedisPipelineStore(
                keys: ResourceKeys(prefix: "usher:", kind: "pipeline", name: name), connections: pool, time: .server,
                channel: "usher:notices", onDeadline: { _ in })
            #expect(try await store.create(PipelineConfig(maxInFlight: 5, filters: ["skip": drop])).created)
            _ = try await store.pushBatch([
                PipelinePushRequest(id: "a", payload: .object([("skip", .bool(true))])),
                PipelinePushRequest(id: "b", payload: .int(1)),
            ])
            let taken = try await store.take(max: 5)
            #expect(taken.map(\.id) == ["b"])
            #expect(try await store.consume("b", fence: taken[0].fence).status == .consumed)
            #expect(try await store.state(limit: 0).counts.filteredTotal == 1)
        }
        for (index, node) in servers.nodes.enumerated() {
            let keys = try await node.connection().command(["KEYS", "usher:*"]).array?.compactMap(\.string) ?? []
            let mine = names.indices.filter { nodes[$0] == index }.map { "usher:{pipeline:\(names[$0])}:meta" }
            #expect(Set(mine).isSubset(of: Set(keys)), "node \(index)")
        }
        #expect(cluster.redirectionCount == RedisCluster.Redirections())
    }
}
