/// A Lua script run atomically inside Redis, by its SHA1 (`EVALSHA`); when the
/// server does not have it (`NOSCRIPT`: a restart, a failover or `SCRIPT FLUSH`
/// emptied its cache), by its source (`EVAL`, which caches it again).
package struct RedisScript: Sendable {
    let source: String
    /// The lowercase hex SHA1 of `source`, as Redis names the script.
    package let sha1: String

    package init(_ source: String) {
        self.source = source
        self.sha1 = SHA1.hex(Array(source.utf8))
    }

    /// Runs the script with `keys` (`KEYS[i]`) and `arguments` (`ARGV[i]`).
    /// Error replies other than `NOSCRIPT` come back as `.error`.
    /// On a cluster each node has a script cache of its own: `NOSCRIPT` is per node.
    func run(
        on route: RedisRoute, keys: [[UInt8]], arguments: [[UInt8]]
    ) async throws(RedisError) -> RedisReply {
        let tail = [Array(String(keys.count).utf8)] + keys + arguments
        let reply = try await route.command([Array("EVALSHA".utf8), Array(sha1.utf8)] + tail)
        if let message = reply.errorMessage, message.hasPrefix("NOSCRIPT") {
            return try await route.command([Array("EVAL".utf8), Array(source.utf8)] + tail)
        }
        return reply
    }

    /// `run` answered through `answer`, from the connection's queue (no task).
    package func send(
        on route: RedisRoute, keys: [[UInt8]], arguments: [[UInt8]],
        answer: @escaping @Sendable (Result<RedisReply, RedisError>) -> Void
    ) {
        let tail = [Array(String(keys.count).utf8)] + keys + arguments
        let source = source
        route.send([Array("EVALSHA".utf8), Array(sha1.utf8)] + tail) { result in
            if case .success(let reply) = result, let message = reply.errorMessage, message.hasPrefix("NOSCRIPT") {
                route.send([Array("EVAL".utf8), Array(source.utf8)] + tail, answer: answer)
            } else {
                answer(result)
            }
        }
    }

    /// `run` on one connection.
    func run(
        on connection: RedisConnection, keys: [[UInt8]], arguments: [[UInt8]]
    ) async throws(RedisError) -> RedisReply {
        try await run(on: RedisRoute(connection), keys: keys, arguments: arguments)
    }

    /// `run` with text keys and arguments.
    package func run(
        on route: RedisRoute, keys: [String] = [], arguments: [String] = []
    ) async throws(RedisError) -> RedisReply {
        try await run(on: route, keys: keys.map { Array($0.utf8) }, arguments: arguments.map { Array($0.utf8) })
    }

    /// `run` on one connection with text keys and arguments.
    func run(
        on connection: RedisConnection, keys: [String] = [], arguments: [String] = []
    ) async throws(RedisError) -> RedisReply {
        try await run(on: connection, keys: keys.map { Array($0.utf8) }, arguments: arguments.map { Array($0.utf8) })
    }
}

/// SHA1 (FIPS 180-4), only to name scripts the way Redis does: no security rests on it.
enum SHA1 {
    static func hex(_ message: [UInt8]) -> String {
        var h: (UInt32, UInt32, UInt32, UInt32, UInt32) = (
            0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0
        )
        var padded = message
        padded.append(0x80)
        while padded.count % 64 != 56 { padded.append(0) }
        let bits = UInt64(message.count) * 8
        for shift in stride(from: 56, through: 0, by: -8) {
            padded.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift)))
        }
        var w = [UInt32](repeating: 0, count: 80)
        for chunk in stride(from: 0, to: padded.count, by: 64) {
            for i in 0..<16 {
                let j = chunk + i * 4
                w[i] =
                    UInt32(padded[j]) << 24 | UInt32(padded[j + 1]) << 16 | UInt32(padded[j + 2]) << 8
                    | UInt32(padded[j + 3])
            }
            for i in 16..<80 { w[i] = rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1) }
            var (a, b, c, d, e) = h
            for i in 0..<80 {
                let (f, k): (UInt32, UInt32) =
                    switch i {
                    case 0..<20: ((b & c) | (~b & d), 0x5A82_7999)
                    case 20..<40: (b ^ c ^ d, 0x6ED9_EBA1)
                    case 40..<60: ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC)
                    default: (b ^ c ^ d, 0xCA62_C1D6)
                    }
                let t = rotl(a, 5) &+ f &+ e &+ k &+ w[i]
                (e, d, c, b, a) = (d, c, rotl(b, 30), a, t)
            }
            h = (h.0 &+ a, h.1 &+ b, h.2 &+ c, h.3 &+ d, h.4 &+ e)
        }
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for word in [h.0, h.1, h.2, h.3, h.4] {
            for shift in stride(from: 28, through: 0, by: -4) { out.append(digits[Int(word >> UInt32(shift) & 0xF)]) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func rotl(_ x: UInt32, _ n: UInt32) -> UInt32 { x << n | x >> (32 - n) }
}
