import Dispatch
import Locking

/// One connection to Redis. Its blocking hiredis calls run on a serial
/// dispatch queue of its own, never on Swift's cooperative threads, which a
/// blocking read would starve. Callers `await` the reply, which is handed
/// over straight from that queue.
///
/// Commands sent while a round trip is in flight wait, then go out together:
/// one write for all of them, then their replies read in order (a batch). A
/// connection that an I/O error or timeout killed is replaced on the next
/// command; the commands behind the one that failed (in its batch, or
/// queued while it waited) fail with it, at once. When connecting fails,
/// commands fail fast until a back-off (50 ms doubling to 2 s) has passed,
/// then the next one tries again.
package final class RedisConnection: @unchecked Sendable {
    /// What a request's sender is told: the replies of its commands, in order, or why not.
    typealias Answer = @Sendable (Result<[RedisReply], RedisError>) -> Void

    /// Commands written in one batch at most (a request is never split).
    static let batchLimit = 256

    private struct Request {
        let commands: [[[UInt8]]]
        let queuedAt: ContinuousClock.Instant
        let answer: Answer
    }

    private struct Waiting {
        var requests: [Request] = []
        /// A drain is scheduled or running on `queue`: it takes what is added.
        var draining = false
        var batches = 0
    }

    private let endpoint: RedisEndpoint
    private let connectTimeout: Double
    private let commandTimeout: Double
    private let queue: DispatchQueue
    private let waiting = Locked(Waiting())

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
        try await pipeline([arguments])[0]
    }

    /// `command` with text arguments.
    package func command(_ arguments: [String]) async throws(RedisError) -> RedisReply {
        try await command(arguments.map { Array($0.utf8) })
    }

    /// Sends every command in one write, then reads all the replies, in order.
    func pipeline(_ commands: [[[UInt8]]]) async throws(RedisError) -> [RedisReply] {
        guard !commands.isEmpty else { return [] }
        let result: Result<[RedisReply], RedisError> = await withCheckedContinuation { done in
            send(commands) { done.resume(returning: $0) }
        }
        return try result.get()
    }

    /// `pipeline` with text arguments.
    package func pipeline(_ commands: [[String]]) async throws(RedisError) -> [RedisReply] {
        try await pipeline(commands.map { $0.map { Array($0.utf8) } })
    }

    /// Queues `commands` (at least one) behind those already sent; `answer`
    /// is called once, on the connection's queue (it must be quick), with
    /// their replies or the reason there are none.
    func send(_ commands: [[[UInt8]]], answer: @escaping Answer) {
        precondition(!commands.isEmpty, "a request needs a command")
        let request = Request(commands: commands, queuedAt: .now, answer: answer)
        let start = waiting.withLock { w in
            w.requests.append(request)
            defer { w.draining = true }
            return !w.draining
        }
        if start { queue.async { self.drain() } }
    }

    /// How many times it has connected (1 after the first command, more after reconnects).
    package var connectCount: Int {
        get async { await withCheckedContinuation { done in queue.async { done.resume(returning: self.connects) } } }
    }

    /// How many batches it has written (for tests).
    var batchCount: Int { waiting.withLock { $0.batches } }

    /// Closes the socket; the next command connects again.
    func close() async {
        await withCheckedContinuation { done in
            queue.async {
                self.context = nil
                done.resume()
            }
        }
    }

    /// Sends what is waiting, batch after batch, until nothing is; on `queue`.
    private func drain() {
        while true {
            let batch = waiting.withLock { w -> ArraySlice<Request> in
                var commands = 0
                var taken = 0
                for request in w.requests {
                    if taken > 0, commands + request.commands.count > Self.batchLimit { break }
                    commands += request.commands.count
                    taken += 1
                }
                if taken == 0 {
                    w.draining = false
                    return []
                }
                w.batches += 1
                defer { w.requests.removeFirst(taken) }
                return w.requests[0..<taken]
            }
            if batch.isEmpty { return }
            run(batch)
        }
    }

    /// Writes the batch's commands at once and answers each request as its replies are read.
    private func run(_ batch: ArraySlice<Request>) {
        var live: [Request] = []
        live.reserveCapacity(batch.count)
        for request in batch {
            // It waited behind a command that failed: it fails too, at once, rather
            // than wait out its own timeout (a stalled server would hold each in turn).
            if let failedAt, request.queuedAt < failedAt {
                request.answer(.failure(.unavailable("\(lastError.message) (on this connection, while it waited)")))
            } else {
                live.append(request)
            }
        }
        guard !live.isEmpty else { return }
        let context: HiredisContext
        do throws(RedisError) { context = try liveContext() } catch {
            for request in live { request.answer(.failure(error)) }
            return
        }
        var answered = 0
        do throws(RedisError) {
            for request in live {
                for arguments in request.commands { try context.append(arguments) }
            }
            try context.flush()
            for request in live {
                var replies: [RedisReply] = []
                replies.reserveCapacity(request.commands.count)
                for _ in request.commands { replies.append(try context.reply()) }
                answered += 1
                request.answer(.success(replies))
            }
        } catch {
            // Dead, or with requests whose replies were not read: unusable.
            self.context = nil
            lastError = error
            failedAt = .now
            for request in live[answered...] { request.answer(.failure(error)) }
        }
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
                to: endpoint, connectTimeout: connectTimeout, commandTimeout: commandTimeout, owner: .queue(queue))
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
