import Foundation

/// A request body that is not valid JSON.
public struct JSONSyntaxError: Error, Sendable {
    /// What the parser said.
    public var message: String
}

extension JSONValue {
    /// Parses JSON text with Foundation's `JSONSerialization` (fragments
    /// allowed), strictly: trailing commas and repeated member names are
    /// errors too (`StrictJSON`). Errors give a line and column.
    public static func parse(_ data: Data) throws(JSONSyntaxError) -> JSONValue {
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        } catch {
            throw JSONSyntaxError(message: StrictJSON.describe(error as NSError, in: data))
        }
        let value = JSONValue(foundation: object)
        try StrictJSON.check(data, parsed: value)
        return value
    }

    /// Parses JSON text given as a string.
    public static func parse(_ text: String) throws(JSONSyntaxError) -> JSONValue {
        try parse(Data(text.utf8))
    }

    /// Converts what `JSONSerialization` produced.
    init(foundation object: Any) {
        // The parser hands back Swift dictionaries, arrays and strings, and
        // NSNumber for numbers. Matching the exact type first keeps every
        // cast on its fast path: a failed `as?` tries bridging (testing a
        // Swift dictionary against a class bridges it to NSDictionary), which
        // cost more than the parse itself.
        let type = ObjectIdentifier(Swift.type(of: object))
        if type == Self.dictionaryType {
            let dictionary = object as! [String: Any]
            var members = dictionary.map { ($0.key, JSONValue(foundation: $0.value)) }
            if members.count > 1 { members.sort { $0.0 < $1.0 } }
            self = .object(members)
        } else if type == Self.stringType {
            self = .string(object as! String)
        } else if type == Self.arrayType {
            self = .array((object as! [Any]).map(JSONValue.init(foundation:)))
        } else if let n = object as? NSNumber {
            switch UInt8(bitPattern: n.objCType.pointee) {
            case UInt8(ascii: "c"), UInt8(ascii: "B"):
                self = .bool(n.boolValue)
            case UInt8(ascii: "d"), UInt8(ascii: "f"):
                self = .double(n.doubleValue)
            case UInt8(ascii: "Q"):
                let u = n.uint64Value
                self = u <= UInt64(Int.max) ? .int(Int(u)) : .double(n.doubleValue)
            default:
                self = .int(n.intValue)
            }
        } else if object is NSNull {
            self = .null
        } else if let d = object as? [String: Any] {
            self = JSONValue(foundation: d as Any)
        } else if let s = object as? String {
            self = .string(s)
        } else if let a = object as? [Any] {
            self = .array(a.map(JSONValue.init(foundation:)))
        } else {
            self = .string(String(describing: object))
        }
    }

    private static let dictionaryType = ObjectIdentifier([String: Any].self)
    private static let stringType = ObjectIdentifier(String.self)
    private static let arrayType = ObjectIdentifier([Any].self)

    /// Compact JSON text.
    public var jsonString: String { String(decoding: jsonBytes, as: UTF8.self) }

    /// Compact JSON text as UTF-8 bytes (what responses carry).
    public var jsonBytes: [UInt8] { encodedJSON }

    /// Appends compact JSON text to `out`.
    public func write(to out: inout [UInt8]) { out.append(contentsOf: encodedJSON) }

    /// Appends a JSON string literal, escaping what RFC 8259 requires.
    public static func writeString(_ s: String, to out: inout [UInt8]) {
        out.append(0x22)
        // Most strings need no escape: check and copy the contiguous bytes.
        let copied = s.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            for b in bytes where b < 0x20 || b == 0x22 || b == 0x5C { return false }
            out.append(contentsOf: bytes)
            return true
        }
        if copied != true { writeEscaped(s, to: &out) }
        out.append(0x22)
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    private static func writeEscaped(_ s: String, to out: inout [UInt8]) {
        for b in s.utf8 {
            switch b {
            case 0x22: out.append(0x5C); out.append(0x22)
            case 0x5C: out.append(0x5C); out.append(0x5C)
            case 0x0A: out.append(0x5C); out.append(0x6E)
            case 0x0D: out.append(0x5C); out.append(0x72)
            case 0x09: out.append(0x5C); out.append(0x74)
            case 0..<0x20:
                out.append(contentsOf: [0x5C, 0x75, 0x30, 0x30, hexDigits[Int(b >> 4)], hexDigits[Int(b & 0xF)]])
            default: out.append(b)
            }
        }
    }
}
