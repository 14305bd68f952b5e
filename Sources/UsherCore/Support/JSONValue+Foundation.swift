import Foundation

/// A request body that is not valid JSON.
public struct JSONSyntaxError: Error, Sendable {
    /// What the parser said.
    public var message: String
}

extension JSONValue {
    /// Parses JSON text with Foundation's `JSONSerialization` (fragments allowed).
    public static func parse(_ data: Data) throws(JSONSyntaxError) -> JSONValue {
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        } catch {
            let ns = error as NSError
            let detail = (ns.userInfo[NSDebugDescriptionErrorKey] as? String) ?? "not valid JSON"
            throw JSONSyntaxError(message: "malformed JSON: \(detail)")
        }
        return JSONValue(foundation: object)
    }

    /// Parses JSON text given as a string.
    public static func parse(_ text: String) throws(JSONSyntaxError) -> JSONValue {
        try parse(Data(text.utf8))
    }

    /// Converts what `JSONSerialization` produced.
    init(foundation object: Any) {
        switch object {
        case is NSNull:
            self = .null
        case let s as String:
            self = .string(s)
        case let n as NSNumber:
            switch String(cString: n.objCType) {
            case "c", "B":
                self = .bool(n.boolValue)
            case "d", "f":
                let d = n.doubleValue
                self = .double(d)
            case "Q":
                let u = n.uint64Value
                self = u <= UInt64(Int.max) ? .int(Int(u)) : .double(n.doubleValue)
            default:
                self = .int(n.intValue)
            }
        case let a as [Any]:
            self = .array(a.map(JSONValue.init(foundation:)))
        case let d as [String: Any]:
            // Foundation does not keep member order; sort for stable output.
            self = .object(d.keys.sorted().map { ($0, JSONValue(foundation: d[$0]!)) })
        default:
            self = .string(String(describing: object))
        }
    }

    /// Compact JSON text.
    public var jsonString: String {
        var out = ""
        write(to: &out)
        return out
    }

    /// Appends compact JSON text to `out`.
    public func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        case .double(let d):
            if d.isFinite { out += d.description } else { out += "null" }
        case .string(let s): JSONValue.writeString(s, to: &out)
        case .array(let a):
            out += "["
            for (i, v) in a.enumerated() {
                if i > 0 { out += "," }
                v.write(to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (i, (k, v)) in members.enumerated() {
                if i > 0 { out += "," }
                JSONValue.writeString(k, to: &out)
                out += ":"
                v.write(to: &out)
            }
            out += "}"
        }
    }

    /// Appends a JSON string literal, escaping what RFC 8259 requires.
    public static func writeString(_ s: String, to out: inout String) {
        out += "\""
        var needsEscape = false
        for b in s.utf8 where b < 0x20 || b == 0x22 || b == 0x5C {
            needsEscape = true
            break
        }
        if !needsEscape {
            out += s
        } else {
            for scalar in s.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case "\r": out += "\\r"
                case "\t": out += "\\t"
                default:
                    if scalar.value < 0x20 {
                        let hex = String(scalar.value, radix: 16)
                        out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                    } else {
                        out.unicodeScalars.append(scalar)
                    }
                }
            }
        }
        out += "\""
    }
}
