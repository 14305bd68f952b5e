import Foundation
import UsherCore

/// A client's JSON value for `JSONEncoder`, as the stores keep it: numbers
/// as the value holds them, a non-finite one as `null`. (The wire's own,
/// tuned for the response path, lives in UsherAPI.)
struct StoredJSON: Encodable {
    let value: JSONValue
    init(_ value: JSONValue) { self.value = value }

    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    func encode(to encoder: any Encoder) throws {
        switch value {
        case .object(let members):
            var container = encoder.container(keyedBy: Key.self)
            for (name, member) in members { try container.encode(StoredJSON(member), forKey: Key(stringValue: name)) }
        case .array(let elements):
            var container = encoder.unkeyedContainer()
            for element in elements { try container.encode(StoredJSON(element)) }
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .bool(let b):
            var container = encoder.singleValueContainer()
            try container.encode(b)
        case .int(let i):
            var container = encoder.singleValueContainer()
            try container.encode(i)
        case .double(let d):
            var container = encoder.singleValueContainer()
            if d.isFinite { try container.encode(d) } else { try container.encodeNil() }
        case .string(let s):
            var container = encoder.singleValueContainer()
            try container.encode(s)
        }
    }
}
