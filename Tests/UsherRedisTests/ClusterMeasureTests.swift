import Foundation
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// Enqueue+complete cycles per second through the queue store, on one
/// redis-server and on a three-master cluster (printed, for the record; the
/// only checks are that the cycles work). On the two-core development
/// machine every redis-server shares the cores with the test process.
@Suite(.serialized, .timeLimit(.minutes(1))) struct ClusterMeasureTests {
    static let seconds = 2.0
    static let workersPerQueue = 8

    @Test func cyclesPerSecondOnOneServerAndOnACluster() async throws {
        let single = try await RedisServer()
        let singlePool = RedisConnectionPool((0..<4).map { _ in single.connection() })
        let cluster = try await RedisClusterServer()
        let clusterPool = RedisConnectionPool(
            cluster: RedisCluster(
                seed: cluster.seed, connectTimeoutSeconds: 1, commandTimeoutSeconds: 2, connectionsPerNode: 4))
        // Three queue names, one on each master.
        var spread: [String?] = [nil, nil, nil]
        for number in 0..<100 {
            let name = "q\(number)"
            let master = RedisClusterServer.nodeIndex(ofKey: "usher:{queue:\(name)}:meta")
            if spread[master] == nil { spread[master] = name }
        }
        let names = try spread.map { try #require($0) }
        for (label, pool, queues) in [
            ("one server, one queue", singlePool, [names[0]]), ("cluster, one queue", clusterPool, [names[0]]),
            ("one server, three queues", singlePool, names),
            ("cluster, three queues on three masters", clusterPool, names),
        ] {
            let rate = try await Self.cycles(pool, names: queues)
            print("cluster measure: \(label): \(Int(rate)) cycles/s")
            #expect(rate > 0)
        }
    }

    private static func cycles(_ pool: RedisConnectionPool, names: [String]) async throws -> Double {
        let stores = names.map { name in
            RedisQueueStore(
                keys: ResourceKeys(prefix: "usher:", kind: "queue", name: name), connections: pool,
                time: .server, channel: "usher:notices", onDeadline: { _ in })
        }
        for store in stores { _ = try await store.create(QueueConfig(capacity: 10_000)) }
        let deadline = ContinuousClock.now + .seconds(seconds)
        let done = try await withThrowingTaskGroup(of: Int.self) { group in
            for (q, store) in stores.enumerated() {
                for worker in 0..<workersPerQueue {
                    group.addTask {
                        var n = 0
                        while ContinuousClock.now < deadline {
                            let id = "\(q)-\(worker)-\(n)"
                            _ = try await store.enqueue(VisitorRequest(id: id))
                            _ = try await store.complete(id: id)
                            n += 1
                        }
                        return n
                    }
                }
            }
            return try await group.reduce(0, +)
        }
        for store in stores { _ = try await store.delete() }
        return Double(done) / seconds
    }
}
