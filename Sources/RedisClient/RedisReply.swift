import CHiredis

/// One Redis reply, copied out of hiredis's `redisReply` (which is freed at once).
package enum RedisReply: Sendable, Hashable {
    /// A bulk string, binary-safe.
    case bulk([UInt8])
    /// A status line such as `OK` or `PONG`.
    case status(String)
    /// An error reply such as `ERR unknown command` or `NOSCRIPT ...`.
    case error(String)
    case integer(Int64)
    case array([RedisReply])
    /// A nil bulk string or nil array.
    case null

    /// Copies `reply` and everything it holds.
    init(copying reply: UnsafePointer<redisReply>) {
        let r = reply.pointee
        func bytes() -> [UInt8] {
            guard let str = r.str, r.len > 0 else { return [] }
            return str.withMemoryRebound(to: UInt8.self, capacity: r.len) {
                Array(UnsafeBufferPointer(start: $0, count: r.len))
            }
        }
        switch r.type {
        case REDIS_REPLY_STRING: self = .bulk(bytes())
        case REDIS_REPLY_STATUS: self = .status(String(decoding: bytes(), as: UTF8.self))
        case REDIS_REPLY_ERROR: self = .error(String(decoding: bytes(), as: UTF8.self))
        case REDIS_REPLY_INTEGER: self = .integer(Int64(r.integer))
        case REDIS_REPLY_ARRAY:
            var elements: [RedisReply] = []
            elements.reserveCapacity(r.elements)
            for i in 0..<r.elements {
                if let element = r.element[i] {
                    elements.append(RedisReply(copying: element))
                } else {
                    elements.append(.null)
                }
            }
            self = .array(elements)
        default: self = .null
        }
    }

    /// Takes a reply hiredis handed over: copies it, then frees it.
    static func take(_ raw: UnsafeMutableRawPointer) -> RedisReply {
        defer { freeReplyObject(raw) }
        return RedisReply(copying: raw.assumingMemoryBound(to: redisReply.self))
    }

    /// A bulk string or status as text (UTF-8, invalid bytes replaced); nil otherwise.
    package var string: String? {
        switch self {
        case .bulk(let b): String(decoding: b, as: UTF8.self)
        case .status(let s): s
        default: nil
        }
    }

    /// An integer reply, or a bulk string that spells one; nil otherwise.
    package var int: Int64? {
        switch self {
        case .integer(let i): i
        case .bulk(let b): Int64(String(decoding: b, as: UTF8.self))
        default: nil
        }
    }

    /// The elements of an array reply; nil otherwise.
    package var array: [RedisReply]? {
        if case .array(let a) = self { a } else { nil }
    }

    /// The message of an error reply; nil otherwise.
    package var errorMessage: String? {
        if case .error(let e) = self { e } else { nil }
    }

    /// This reply, or `RedisError.reply` when it is an error reply.
    func checked() throws(RedisError) -> RedisReply {
        if case .error(let message) = self { throw .reply(message) }
        return self
    }
}
