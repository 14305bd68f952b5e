import UsherCore

/// The manager of a Redis-backed resource, whatever its kind: its life in
/// this process follows the registry's.
protocol RedisManager: ManagedResource {
    /// Deleted (through any instance): waiters here are answered `gone`.
    func close()
    /// The server is stopping: waiters here are answered `shuttingDown`.
    func shutdown()
    /// Starts hearing notices about the resource.
    func listen()
}

extension RedisManager {
    /// What the registry's `created` event carries: the rest is in Redis.
    func summary() -> JSONValue {
        .object([("name", .string(name)), ("backend", .string("redis"))])
    }

    func markDeleted() { close() }
    func markShuttingDown() { shutdown() }
    func startListening() { listen() }
}

extension APIError {
    /// `"backend": "redis"` on a server without a `redis` block.
    static let noRedisBlock = APIError.badRequest(
        "backend: \"redis\" needs a top-level redis block (or USHER_REDIS_URL)", field: "backend")
}
