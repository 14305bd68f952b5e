import Synchronization

/// The command connections of a process: several connections to one server,
/// handed out in turn (while one waits for a batch's replies, another can
/// write the next batch), or a Redis Cluster, where a command goes to the
/// master that holds its keys' slot.
package final class RedisConnectionPool: Sendable {
    /// The connections to a single server (empty on a cluster).
    let connections: [RedisConnection]
    /// The cluster, when the pool is one.
    package let cluster: RedisCluster?
    private let turn = Atomic<Int>(0)

    package init(_ connections: [RedisConnection]) {
        precondition(!connections.isEmpty, "a pool needs a connection")
        self.connections = connections
        self.cluster = nil
    }

    /// A pool over `cluster`'s masters (the cluster keeps connections per master).
    package init(cluster: RedisCluster) {
        self.connections = []
        self.cluster = cluster
    }

    /// Where to send a command on `keys` (which must share a slot: one hash
    /// tag): the next connection in turn, or on a cluster the keys' master.
    package func route(keys: [String]) -> RedisRoute {
        guard let cluster else { return next() }
        let slot = keys.first.map(ClusterSlot.of)
        assert(keys.allSatisfy { ClusterSlot.of($0) == slot }, "keys of one command in several slots: \(keys)")
        return RedisRoute(cluster: cluster, slot: slot)
    }

    /// Where to send a command on no key: the next connection in turn, or
    /// on a cluster any master (a command on keys sent there is redirected).
    package func next() -> RedisRoute {
        if let cluster { return RedisRoute(cluster: cluster, slot: nil) }
        return RedisRoute(connections[turn.wrappingAdd(1, ordering: .relaxed).oldValue % connections.count])
    }

    /// Closes every connection.
    package func close() async {
        for connection in connections { await connection.close() }
        await cluster?.close()
    }
}
