import Foundation

/// A request body that is not valid JSON, or nests deeper than allowed.
package struct JSONSyntaxError: Error, Sendable {
    /// What the parser said.
    package var message: String
    /// True when the text is JSON but nests deeper than `max_json_depth`.
    package var isTooDeep = false
    /// The member a refused number sits at (`payload.n`), when that is the error.
    package var field: String?
}

extension JSONValue {
    /// Parses JSON text with Foundation's `JSONSerialization` (fragments
    /// allowed), strictly: trailing commas and repeated member names are
    /// errors too (`StrictJSON`). Errors give a line and column.
    ///
    /// - Parameter maxDepth: deeper nesting is an error (`JSONLimits.maxDepth`);
    ///   the default is the most any setting allows.
    package static func parse(
        _ data: Data, maxDepth: Int = JSONLimits.maxDepthRange.upperBound
    ) throws(JSONSyntaxError) -> JSONValue {
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        } catch {
            throw JSONSyntaxError(message: StrictJSON.describe(error as NSError, in: data))
        }
        guard let value = JSONValue(foundation: object, levelsLeft: maxDepth) else {
            throw JSONSyntaxError(
                message: "JSON nested deeper than \(maxDepth) levels (max_json_depth)", isTooDeep: true)
        }
        let scan = try StrictJSON.check(data, parsed: value)
        guard value.containsDouble || scan.hasNegativeZero else { return value }
        switch data.withUnsafeBytes({ ExactNumbers.readings($0) }) {
        case .success(let readings):
            return readings.isEmpty ? value : value.restoring(readings)
        case .failure(let inexact):
            throw JSONSyntaxError(
                message:
                    "\(inexact.field): the number \(inexact.text) cannot be kept exactly (a 64-bit integer, or a double written to the digits given: its shortest form or its exact value rounded to them)",
                field: inexact.field)
        }
    }

    /// Parses JSON text given as a string.
    package static func parse(
        _ text: String, maxDepth: Int = JSONLimits.maxDepthRange.upperBound
    ) throws(JSONSyntaxError) -> JSONValue {
        try parse(Data(text.utf8), maxDepth: maxDepth)
    }

    /// Converts what `JSONSerialization` produced; nil when it nests more than
    /// `levelsLeft` levels (each container spends one).
    init?(foundation object: Any, levelsLeft: Int) {
        // The parser hands back Swift dictionaries, arrays and strings, and
        // NSNumber for numbers. Matching the exact type first keeps every
        // cast on its fast path: a failed `as?` tries bridging (testing a
        // Swift dictionary against a class bridges it to NSDictionary), which
        // can cost more than the parse itself.
        let type = ObjectIdentifier(Swift.type(of: object))
        if type == Self.dictionaryType {
            guard let members = Self.members(object as! [String: Any], levelsLeft: levelsLeft) else { return nil }
            self = .object(members)
        } else if type == Self.stringType {
            self = .string(object as! String)
        } else if type == Self.arrayType {
            guard let elements = Self.elements(object as! [Any], levelsLeft: levelsLeft) else { return nil }
            self = .array(elements)
        } else if let n = object as? NSNumber {
            switch UInt8(bitPattern: n.objCType.pointee) {
            case UInt8(ascii: "c"), UInt8(ascii: "B"):
                self = .bool(n.boolValue)
            case UInt8(ascii: "d"), UInt8(ascii: "f"):
                // Also some integers, and some fractions read inexactly (`parse` reads those again).
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
            guard let members = Self.members(d, levelsLeft: levelsLeft) else { return nil }
            self = .object(members)
        } else if let s = object as? String {
            self = .string(s)
        } else if let a = object as? [Any] {
            guard let elements = Self.elements(a, levelsLeft: levelsLeft) else { return nil }
            self = .array(elements)
        } else {
            self = .string(String(describing: object))
        }
    }

    /// An object's members sorted by name, or nil when one nests too deep.
    private static func members(_ dictionary: [String: Any], levelsLeft: Int) -> [(String, JSONValue)]? {
        guard levelsLeft > 0 else { return nil }
        var members: [(String, JSONValue)] = []
        members.reserveCapacity(dictionary.count)
        for (key, value) in dictionary {
            guard let member = JSONValue(foundation: value, levelsLeft: levelsLeft - 1) else { return nil }
            members.append((key, member))
        }
        if members.count > 1 { members.sort { $0.0 < $1.0 } }
        return members
    }

    /// An array's elements, or nil when one nests too deep.
    private static func elements(_ array: [Any], levelsLeft: Int) -> [JSONValue]? {
        guard levelsLeft > 0 else { return nil }
        var elements: [JSONValue] = []
        elements.reserveCapacity(array.count)
        for element in array {
            guard let value = JSONValue(foundation: element, levelsLeft: levelsLeft - 1) else { return nil }
            elements.append(value)
        }
        return elements
    }

    private static let dictionaryType = ObjectIdentifier([String: Any].self)
    private static let stringType = ObjectIdentifier(String.self)
    private static let arrayType = ObjectIdentifier([Any].self)
}
