import Synchronization

/// Several connections to one server, handed out in turn: one connection
/// waits for each reply before the next command, so it carries about
/// 14,000 round trips a second; callers that need more share a pool.
package final class RedisConnectionPool: Sendable {
    package let connections: [RedisConnection]
    private let turn = Atomic<Int>(0)

    package init(_ connections: [RedisConnection]) {
        precondition(!connections.isEmpty, "a pool needs a connection")
        self.connections = connections
    }

    /// The next connection, in turn.
    package func next() -> RedisConnection {
        connections[turn.wrappingAdd(1, ordering: .relaxed).oldValue % connections.count]
    }

    /// Closes every connection.
    package func close() async {
        for connection in connections { await connection.close() }
    }
}
