import Foundation
import RedisClient
import UsherCore

/// A reply that does not have the shape its operation's script gives.
struct ReplyShapeError: Error, Sendable {
    /// The value that was missing or unreadable.
    let what: String
}

/// Reads a script's reply front to back, one named value at a time: a
/// decoder says what it reads (`int("capacity")`), never where it sits.
struct ReplyReader {
    private var rest: ArraySlice<RedisReply>

    init(_ items: [RedisReply]) { rest = items[...] }

    /// Texts as a script returns them (a notice's config fields).
    init(texts: [String]) { rest = texts.map { RedisReply.bulk(Array($0.utf8)) }[...] }

    /// True once every value was read.
    var isAtEnd: Bool { rest.isEmpty }

    /// The next value as it came.
    mutating func next(_ what: String) throws(ReplyShapeError) -> RedisReply {
        guard let item = rest.popFirst() else { throw ReplyShapeError(what: what) }
        return item
    }

    /// The next value as text.
    mutating func text(_ what: String) throws(ReplyShapeError) -> String {
        guard let text = try next(what).string else { throw ReplyShapeError(what: what) }
        return text
    }

    /// The next value as bytes (a JSON text).
    mutating func bytes(_ what: String) throws(ReplyShapeError) -> [UInt8] {
        guard case .bulk(let bytes) = try next(what) else { throw ReplyShapeError(what: what) }
        return bytes
    }

    /// The next value as an integer (a script's decimal text or a Redis integer).
    mutating func int64(_ what: String) throws(ReplyShapeError) -> Int64 {
        guard let n = try next(what).int else { throw ReplyShapeError(what: what) }
        return n
    }

    mutating func int(_ what: String) throws(ReplyShapeError) -> Int {
        Int(try int64(what))
    }

    /// The next value read with `parse` (`Double.init`, an enum's `init(rawValue:)`, …).
    mutating func value<T>(_ what: String, _ parse: (String) -> T?) throws(ReplyShapeError) -> T {
        guard let value = parse(try text(what)) else { throw ReplyShapeError(what: what) }
        return value
    }

    /// The next value as JSON text decoded into `type`.
    mutating func json<T: Decodable>(_ type: T.Type, _ what: String) throws(ReplyShapeError) -> T {
        let bytes = try bytes(what)
        do {
            return try JSONDecoder().decode(type, from: Data(bytes))
        } catch {
            throw ReplyShapeError(what: what)
        }
    }

    /// A flag: `"1"` is true.
    mutating func flag(_ what: String) throws(ReplyShapeError) -> Bool { try text(what) == "1" }

    /// A time in µs, or nil where the script has none (`""`).
    mutating func timestamp(_ what: String) throws(ReplyShapeError) -> Timestamp? {
        try next(what).int.map(Timestamp.init(micros:))
    }

    /// A value read by `read`, or nil where the script put `""` (none).
    mutating func optional<T>(_ read: (inout ReplyReader) throws(ReplyShapeError) -> T) throws(ReplyShapeError)
        -> T?
    {
        if case .bulk(let bytes)? = rest.first, bytes.isEmpty {
            rest.removeFirst()
            return nil
        }
        return try read(&self)
    }

    /// `count` values, each read by `read`.
    mutating func list<T>(_ count: Int, _ read: (inout ReplyReader) throws(ReplyShapeError) -> T)
        throws(ReplyShapeError) -> [T]
    {
        guard count >= 0, count <= rest.count else { throw ReplyShapeError(what: "list of \(count)") }
        var out: [T] = []
        out.reserveCapacity(count)
        for _ in 0..<count { out.append(try read(&self)) }
        return out
    }

    /// Every value left, each read by `read`.
    mutating func remaining<T>(_ read: (inout ReplyReader) throws(ReplyShapeError) -> T) throws(ReplyShapeError)
        -> [T]
    {
        var out: [T] = []
        while !rest.isEmpty { out.append(try read(&self)) }
        return out
    }
}
