import Dispatch

/// One connection to Redis. Its blocking hiredis calls run on a serial
/// dispatch queue of its own, never on Swift's cooperative threads, which a
/// blocking read would starve. Callers `await` the reply.
///
/// A connection that an I/O error or timeout killed is replaced on the next
/// command; the commands that were queued behind the one that failed fail
/// with it, at once. When connecting fails, commands fail fast until a
/// back-off (50 ms doubling to 2 s) has passed, then the next one tries again.
package final class RedisConnection: @unchecked Sendable {
    private let endpoint: RedisEndpoint
    private let connectTimeout: Double
    private let commandTimeout: Double
    private let queue: DispatchQueue

    // Touched on `queue` only.
    private var context: HiredisContext?
    private var backoff = RedisBackoff()
    private var retryAt: ContinuousClock.Instant?
    private var lastError = RedisError.unavailable("")
    private var connects = 0
    /// When the last command failed (timeout, I/O error).
    private var failedAt: ContinuousClock.Instant?

    package init(endpoint: RedisEndpoint, connectTimeoutSeconds: Double, commandTimeoutSeconds: Double) {
        self.endpoint = endpoint
        self.connectTimeout = connectTimeoutSeconds
        self.commandTimeout = commandTimeoutSeconds
        self.queue = DispatchQueue(label: "usher.redis.\(endpoint.host):\(endpoint.port)")
    }

    /// A connection as `settings` describe it (the password already resolved).
    package convenience init(settings: RedisSettings) throws(RedisError) {
        self.init(
            endpoint: try settings.endpoint(), connectTimeoutSeconds: settings.connectTimeoutSeconds,
            commandTimeoutSeconds: settings.commandTimeoutSeconds)
    }

    /// Sends one command; an error reply comes back as `.error`. Throws when
    /// there is no connection or it died meanwhile (the command may or may
    /// not have run then).
    package func command(_ arguments: [[UInt8]]) async throws(RedisError) -> RedisReply {
        try await onQueue { context throws(RedisError) in try context.command(arguments) }
    }

    /// `command` with text arguments.
    package func command(_ arguments: [String]) async throws(RedisError) -> RedisReply {
        try await command(arguments.map { Array($0.utf8) })
    }

    /// Sends every command in one write, then reads all the replies, in order.
    package func pipeline(_ commands: [[[UInt8]]]) async throws(RedisError) -> [RedisReply] {
        try await onQueue { context throws(RedisError) in try context.pipeline(commands) }
    }

    /// `pipeline` with text arguments.
    package func pipeline(_ commands: [[String]]) async throws(RedisError) -> [RedisReply] {
        try await pipeline(commands.map { $0.map { Array($0.utf8) } })
    }

    /// How many times it has connected (1 after the first command, more after reconnects).
    package var connectCount: Int {
        get async { await withCheckedContinuation { done in queue.async { done.resume(returning: self.connects) } } }
    }

    /// Closes the socket; the next command connects again.
    package func close() async {
        await withCheckedContinuation { done in
            queue.async {
                self.context = nil
                done.resume()
            }
        }
    }

    /// Runs `body` on the queue with a live context, connecting first when needed.
    private func onQueue<R: Sendable>(
        _ body: @escaping @Sendable (HiredisContext) throws(RedisError) -> R
    ) async throws(RedisError) -> R {
        let queuedAt = ContinuousClock.now
        let result: Result<R, RedisError> = await withCheckedContinuation { done in
            queue.async {
                done.resume(
                    returning: Result { () throws(RedisError) -> R in
                        // It waited behind a command that failed: it fails too, at once, rather
                        // than wait out its own timeout (a stalled server would hold each in turn).
                        if let failedAt = self.failedAt, queuedAt < failedAt {
                            throw .unavailable("\(self.lastError.message) (on this connection, while it waited)")
                        }
                        let context = try self.liveContext()
                        do throws(RedisError) { return try body(context) } catch {
                            // Dead, or with requests whose replies were not read: unusable.
                            self.context = nil
                            self.lastError = error
                            self.failedAt = .now
                            throw error
                        }
                    })
            }
        }
        return try result.get()
    }

    /// The current context, or a new one; on `queue`.
    private func liveContext() throws(RedisError) -> HiredisContext {
        if let context, !context.isDead { return context }
        context = nil
        if let retryAt, ContinuousClock.now < retryAt {
            throw .unavailable("\(lastError.message) (next attempt after a back-off)")
        }
        do {
            let fresh = try HiredisContext.connect(
                to: endpoint, connectTimeout: connectTimeout, commandTimeout: commandTimeout)
            context = fresh
            connects += 1
            backoff.reset()
            retryAt = nil
            return fresh
        } catch {
            lastError = error
            retryAt = .now + backoff.next()
            throw error
        }
    }
}

/// Delays between failed connection attempts: 50 ms doubling to 2 s, reset by a success.
struct RedisBackoff: Sendable {
    static let first = Duration.milliseconds(50)
    static let limit = Duration.seconds(2)
    private var delay = first

    /// The delay before the next attempt; doubles the one after.
    mutating func next() -> Duration {
        defer { delay = min(delay * 2, Self.limit) }
        return delay
    }

    mutating func reset() { delay = Self.first }
}
