/// Where a command goes: a connection to a single Redis, or, on a cluster,
/// the master of a slot (redirections followed). A pool hands them out:
/// `route(keys:)` for commands on keys, `next()` for the rest.
package struct RedisRoute: Sendable {
    private enum Target: Sendable {
        case connection(RedisConnection)
        case cluster(RedisCluster, slot: Int?)
    }

    private let target: Target

    /// Every command on `connection`.
    package init(_ connection: RedisConnection) { target = .connection(connection) }

    /// Every command to the master of `slot` (any master when nil).
    init(cluster: RedisCluster, slot: Int?) { target = .cluster(cluster, slot: slot) }

    /// Sends one command; an error reply comes back as `.error`. Throws when
    /// no answer came (the command may or may not have run then).
    package func command(_ arguments: [[UInt8]]) async throws(RedisError) -> RedisReply {
        switch target {
        case .connection(let connection): try await connection.command(arguments)
        case .cluster(let cluster, let slot): try await cluster.command(arguments, slot: slot)
        }
    }

    /// `command` answered through `answer`: on a connection's queue, with no
    /// task (a cluster's redirections still go through one).
    func send(_ arguments: [[UInt8]], answer: @escaping @Sendable (Result<RedisReply, RedisError>) -> Void) {
        switch target {
        case .connection(let connection):
            connection.send([arguments]) { answer($0.map { $0[0] }) }
        case .cluster(let cluster, let slot):
            Task {
                do throws(RedisError) { answer(.success(try await cluster.command(arguments, slot: slot))) } catch {
                    answer(.failure(error))
                }
            }
        }
    }

    /// `command` with text arguments.
    package func command(_ arguments: [String]) async throws(RedisError) -> RedisReply {
        try await command(arguments.map { Array($0.utf8) })
    }
}
