import CHiredis
import Dispatch

#if canImport(Glibc)
    import Glibc
#endif

/// One `redisContext`, connected, logged in and on its database. Not
/// thread-safe: one thread at a time (its owner's). Dead once `isDead`.
///
/// Every call that touches the context first checks that it runs on its
/// owner, as GRDB's `SerializedDatabase` checks its queue: a connection's
/// serial queue (`dispatchPrecondition`) or the subscriber's thread.
final class HiredisContext {
    /// Where the context may be used.
    enum Owner {
        /// A serial dispatch queue (a `RedisConnection`'s).
        case queue(DispatchQueue)
        /// One thread (a `RedisSubscriber`'s).
        case thread(pthread_t)

        /// The calling thread.
        static var currentThread: Owner { .thread(pthread_self()) }
    }

    private let uncheckedRaw: UnsafeMutablePointer<redisContext>
    private let owner: Owner

    /// The C context, after the owner check.
    var raw: UnsafeMutablePointer<redisContext> {
        preconditionOnOwner()
        return uncheckedRaw
    }

    private init(raw: UnsafeMutablePointer<redisContext>, owner: Owner) {
        self.uncheckedRaw = raw
        self.owner = owner
    }

    // Not checked: the last reference may go anywhere, and then no one else uses it.
    deinit { redisFree(uncheckedRaw) }

    /// Stops the process when the caller is not the owner.
    @inline(__always)
    private func preconditionOnOwner() {
        switch owner {
        case .queue(let queue):
            dispatchPrecondition(condition: .onQueue(queue))
        case .thread(let thread):
            precondition(pthread_equal(pthread_self(), thread) != 0, "a hiredis context used off its thread")
        }
    }

    /// Connects within `connectTimeout`, sets `commandTimeout` on the socket,
    /// then sends `AUTH` (when there is a password) and `SELECT` (database ≠ 0).
    /// On `owner`, which every later call must run on too.
    static func connect(
        to endpoint: RedisEndpoint, connectTimeout: Double, commandTimeout: Double, owner: Owner
    ) throws(RedisError) -> HiredisContext {
        guard let raw = redisConnectWithTimeout(endpoint.host, Int32(endpoint.port), timeval(seconds: connectTimeout))
        else { throw .unavailable("cannot allocate a hiredis context") }
        let context = HiredisContext(raw: raw, owner: owner)
        context.preconditionOnOwner()
        let target = "\(endpoint.host):\(endpoint.port)"
        guard !context.isDead else { throw .unavailable("connecting to \(target): \(context.errorMessage)") }
        guard redisSetTimeout(raw, timeval(seconds: commandTimeout)) == REDIS_OK else {
            throw .unavailable("setting the timeout on \(target): \(context.errorMessage)")
        }
        if let password = endpoint.password {
            let auth = endpoint.user.map { ["AUTH", $0, password] } ?? ["AUTH", password]
            if case .error(let message) = try context.command(auth.map { Array($0.utf8) }) {
                throw .handshake("AUTH at \(target): \(message)")
            }
        }
        if endpoint.database != 0 {
            if case .error(let message) = try context.command([
                Array("SELECT".utf8), Array("\(endpoint.database)".utf8),
            ]) {
                throw .handshake("SELECT \(endpoint.database) at \(target): \(message)")
            }
        }
        return context
    }

    /// True after any I/O or protocol error: hiredis cannot use it again.
    var isDead: Bool { raw.pointee.err != 0 }

    var errorMessage: String { String(cString: CUsherRedis_errstr(raw)) }

    /// Sends one command and waits for its reply (error replies are values).
    func command(_ arguments: [[UInt8]]) throws(RedisError) -> RedisReply {
        let reply = Self.withArgv(arguments) { argc, argv, lengths in redisCommandArgv(raw, argc, argv, lengths) }
        guard let reply else { throw .unavailable(errorMessage) }
        return RedisReply.take(reply)
    }

    /// Sends every command, then reads their replies in order.
    func pipeline(_ commands: [[[UInt8]]]) throws(RedisError) -> [RedisReply] {
        for arguments in commands { try append(arguments) }
        var replies: [RedisReply] = []
        replies.reserveCapacity(commands.count)
        for _ in commands { replies.append(try reply()) }
        return replies
    }

    /// The next reply: from the buffer, else written what is pending and read (blocking).
    func reply() throws(RedisError) -> RedisReply {
        var reply: UnsafeMutableRawPointer?
        guard redisGetReply(raw, &reply) == REDIS_OK, let reply else { throw .unavailable(errorMessage) }
        return RedisReply.take(reply)
    }

    /// Adds a command to the output buffer without sending it.
    func append(_ arguments: [[UInt8]]) throws(RedisError) {
        let status = Self.withArgv(arguments) { argc, argv, lengths in
            redisAppendCommandArgv(raw, argc, argv, lengths)
        }
        guard status == REDIS_OK else { throw .unavailable(errorMessage) }
    }

    /// Writes the whole output buffer.
    func flush() throws(RedisError) {
        var done: Int32 = 0
        repeat {
            guard redisBufferWrite(raw, &done) == REDIS_OK else { throw .unavailable(errorMessage) }
        } while done == 0
    }

    /// A reply already read into the buffer, without touching the socket; nil when none is complete.
    func bufferedReply() throws(RedisError) -> RedisReply? {
        var reply: UnsafeMutableRawPointer?
        guard redisReaderGetReply(raw.pointee.reader, &reply) == REDIS_OK else {
            throw .unavailable("protocol error")
        }
        return reply.map(RedisReply.take)
    }

    /// Reads what the socket has into the buffer (blocks when it has nothing).
    func read() throws(RedisError) {
        guard redisBufferRead(raw) == REDIS_OK else { throw .unavailable(errorMessage) }
    }

    /// Calls `body` with the C argument vector of `arguments`: pointers into
    /// one buffer holding every argument's bytes, and their lengths (binary-safe).
    static func withArgv<R>(
        _ arguments: [[UInt8]],
        _ body: (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> R
    ) -> R {
        var storage: [UInt8] = []
        storage.reserveCapacity(arguments.reduce(1) { $0 + $1.count })
        var offsets: [Int] = []
        var lengths: [Int] = []
        for argument in arguments {
            offsets.append(storage.count)
            lengths.append(argument.count)
            storage.append(contentsOf: argument)
        }
        storage.append(0)  // never empty, so each buffer has an address
        lengths.append(0)
        return storage.withUnsafeBufferPointer { bytes in
            let base = UnsafeRawPointer(bytes.baseAddress!)
            var pointers: [UnsafePointer<CChar>?] = offsets.map {
                (base + $0).assumingMemoryBound(to: CChar.self)
            }
            pointers.append(nil)
            return pointers.withUnsafeMutableBufferPointer { argv in
                lengths.withUnsafeBufferPointer { lengths in
                    body(Int32(arguments.count), argv.baseAddress!, lengths.baseAddress!)
                }
            }
        }
    }
}

extension timeval {
    init(seconds: Double) {
        let whole = seconds.rounded(.down)
        self.init(tv_sec: Int(whole), tv_usec: Int((seconds - whole) * 1_000_000))
    }
}
