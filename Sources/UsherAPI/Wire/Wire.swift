import Foundation
import HTTPServer
import UsherCore

/// The one JSON encoder configuration of response bodies: members sorted by
/// name (Foundation's encoder keeps no order of its own), slashes unescaped.
/// Wire types spell their members in snake_case through explicit `CodingKeys`;
/// times are RFC 3339 strings with milliseconds (`WireTime`).
enum Wire {
    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// A body the encoder refused (only a bug in a wire type can cause it).
    private static let unencodable = Array(#"{"code":"internal_error","detail":"response could not be encoded"}"#.utf8)

    /// `value` as compact JSON text.
    static func bytes(_ value: some Encodable) -> [UInt8] {
        guard let data = try? encoder.encode(value) else { return unencodable }
        return [UInt8](data)
    }

    /// `value`'s wire form as a `JSONValue`, to nest in a summary.
    static func value(_ value: some Encodable) -> JSONValue {
        guard let data = try? encoder.encode(value), let parsed = try? JSONValue.parse(data) else { return .null }
        return parsed
    }
}

extension Reply {
    /// `application/json; charset=utf-8`: `value` encoded by `Wire`.
    static func encoded(_ value: some Encodable, status: Int = 200, headers: [(name: String, value: String)] = [])
        -> HTTPResponse
    {
        HTTPResponse(status: status, headers: jsonHeaders(headers), body: Wire.bytes(value))
    }
}

/// A member name known only at run time (payload members, problem extras).
struct WireKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ name: String) { stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// A time on the wire: RFC 3339 UTC with milliseconds.
struct WireTime: Encodable {
    let time: Timestamp
    init(_ time: Timestamp) { self.time = time }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(time.rfc3339)
    }
}

extension KeyedEncodingContainer {
    /// A member documented as always present: `null` when there is no value.
    mutating func encodeAlways(_ value: (some Encodable)?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }

    /// A string always present. Strings and integers take the encoder's
    /// concrete entry points; the generic one builds an encoder per value.
    mutating func encodeAlways(_ value: String?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }

    /// `next_cursor`, always present: the position sealed (`PageCursor`), or null.
    mutating func encodeCursor(_ position: String?, forKey key: Key) throws {
        try encodeAlways(position.map(PageCursor.seal), forKey: key)
    }

    /// An integer always present.
    mutating func encodeAlways(_ value: Int64?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }

    /// A time, as its RFC 3339 text.
    mutating func encodeTime(_ time: Timestamp, forKey key: Key) throws {
        try encode(time.rfc3339, forKey: key)
    }

    /// A time always present, `null` when absent.
    mutating func encodeTime(_ time: Timestamp?, forKey key: Key) throws {
        if let time { try encode(time.rfc3339, forKey: key) } else { try encodeNil(forKey: key) }
    }

    /// A duration in seconds: an integer when it has no fraction (`30`, not `30.0`).
    mutating func encodeSeconds(_ seconds: Double, forKey key: Key) throws {
        if seconds.rounded() == seconds && abs(seconds) < 9e15 {
            try encode(Int(seconds), forKey: key)
        } else {
            try encode(seconds, forKey: key)
        }
    }
}

/// Any JSON value (payloads, `data`, summaries): a non-finite number, which
/// JSON cannot carry, is `null`. Members and elements go through nested
/// containers and the encoder's concrete entry points: the generic `encode`
/// builds a nested encoder for every value.
extension JSONValue: Encodable {
    package func encode(to encoder: any Encoder) throws {
        switch self {
        case .object(let members):
            var container = encoder.container(keyedBy: WireKey.self)
            for (name, member) in members { try container.encode(member, forKey: WireKey(name)) }
        case .array(let elements):
            var container = encoder.unkeyedContainer()
            for element in elements { try container.encodeJSON(element) }
        default:
            var container = encoder.singleValueContainer()
            switch self {
            case .null: try container.encodeNil()
            case .bool(let b): try container.encode(b)
            case .int(let i): try container.encode(i)
            case .double(let d): if d.isFinite { try container.encode(d) } else { try container.encodeNil() }
            case .string(let s): try container.encode(s)
            case .array, .object: break
            }
        }
    }
}

extension KeyedEncodingContainer {
    /// A JSON value as a member, without the generic entry point's nested
    /// encoder (this overload is chosen wherever the value is a `JSONValue`).
    mutating func encode(_ value: JSONValue, forKey key: Key) throws {
        switch value {
        case .null: try encodeNil(forKey: key)
        case .bool(let b): try encode(b, forKey: key)
        case .int(let i): try encode(i, forKey: key)
        case .double(let d): if d.isFinite { try encode(d, forKey: key) } else { try encodeNil(forKey: key) }
        case .string(let s): try encode(s, forKey: key)
        case .array(let elements):
            var nested = nestedUnkeyedContainer(forKey: key)
            for element in elements { try nested.encodeJSON(element) }
        case .object(let members):
            var nested = nestedContainer(keyedBy: WireKey.self, forKey: key)
            for (name, member) in members { try nested.encode(member, forKey: WireKey(name)) }
        }
    }

    /// A JSON value when there is one, else nothing.
    mutating func encodeIfPresent(_ value: JSONValue?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) }
    }

    /// A JSON value always present: `null` when there is none.
    mutating func encodeAlways(_ value: JSONValue?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
}

extension UnkeyedEncodingContainer {
    /// A JSON value as the next element (see `KeyedEncodingContainer.encode(_:forKey:)`).
    mutating func encodeJSON(_ value: JSONValue) throws {
        switch value {
        case .null: try encodeNil()
        case .bool(let b): try encode(b)
        case .int(let i): try encode(i)
        case .double(let d): if d.isFinite { try encode(d) } else { try encodeNil() }
        case .string(let s): try encode(s)
        case .array(let elements):
            var nested = nestedUnkeyedContainer()
            for element in elements { try nested.encodeJSON(element) }
        case .object(let members):
            var nested = nestedContainer(keyedBy: WireKey.self)
            for (name, member) in members { try nested.encode(member, forKey: WireKey(name)) }
        }
    }
}
