import Foundation

/// Any JSON value, as carried in payloads and `data` fields.
///
/// Objects keep their members in the order given; numbers keep the
/// integer/fraction distinction so that `1` is echoed as `1`, not `1.0`.
///
/// Comparing, hashing, writing and releasing a value recurse once per level;
/// what clients send or make the server build is at most `max_json_depth`
/// deep (`JSONLimits`), which keeps that recursion short.
package enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    package static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.int(let a), .int(let b)): return a == b
        case (.double(let a), .double(let b)): return a == b
        case (.int(let a), .double(let b)), (.double(let b), .int(let a)): return Double(a) == b
        case (.string(let a), .string(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)):
            guard a.count == b.count else { return false }
            let bd = Dictionary(b, uniquingKeysWith: { x, _ in x })
            return a.allSatisfy { k, v in bd[k] == v }
        default: return false
        }
    }

    package func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let b): hasher.combine(b)
        case .int(let i): hasher.combine(Double(i))
        case .double(let d): hasher.combine(d)
        case .string(let s): hasher.combine(s)
        case .array(let a): hasher.combine(a)
        case .object(let o):
            hasher.combine(o.count)
            for (k, _) in o.sorted(by: { $0.0 < $1.0 }) { hasher.combine(k) }
        }
    }

    /// The member named `key` of an object, or nil.
    package subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first(where: { $0.0 == key })?.1
    }

    /// True for `.null`.
    var isNull: Bool { if case .null = self { return true } else { return false } }
}
