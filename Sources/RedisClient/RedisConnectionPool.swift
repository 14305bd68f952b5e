import Synchronization

/// Several connections to one server, handed out in turn: while one waits
/// for a batch's replies, another can write the next batch.
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
