/// A request or config field that is missing, of the wrong type, out of range,
/// or unknown. `field` is a dotted path (`queues.jobs.capacity`).
package struct FieldError: Error, Sendable, Equatable {
    /// The offending field, as a dotted path; empty for the body itself.
    package var field: String
    /// What is wrong with it.
    package var message: String

    package init(field: String, message: String) {
        self.field = field
        self.message = message
    }

    /// A one-line description naming the field.
    package var description: String { field.isEmpty ? message : "\(field): \(message)" }
}

/// Names of resources, visitors, items, leases, elements, filters and states.
package enum Names {
    /// `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`
    package static func isValid(_ name: String) -> Bool {
        // Over the contiguous bytes (iterating `utf8` checks the storage per byte).
        var name = name
        return name.withUTF8 { bytes in
            guard !bytes.isEmpty, bytes.count <= 128 else { return false }
            for i in 0..<bytes.count {
                let b = bytes[i]
                let alnum = (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
                if alnum { continue }
                if i > 0 && (b == 0x2E || b == 0x5F || b == 0x3A || b == 0x2D) { continue }
                return false
            }
            return true
        }
    }

    /// Keys and actions: 1–256 characters.
    static func isValidKey(_ key: String) -> Bool {
        let n = key.count
        return n >= 1 && n <= 256
    }
}

/// Reads the members of a JSON object field by field, with typed checks, and
/// rejects members nobody asked for (`finish()`), so a typo such as
/// `capactiy` is an error naming the field instead of being ignored.
package struct FieldReader {
    private let members: [(String, JSONValue)]
    /// Bit `i`: some accessor asked for `members[i]` (flags by index: no
    /// hashing on the request path); members past 64 in `usedBeyond`.
    private var used: UInt64 = 0
    private var usedBeyond: [Bool] = []
    /// The dotted path of this object, used as the prefix of field names.
    package let path: String

    /// Reads `value`, which must be an object; nil or `null` reads as `{}`.
    package init(_ value: JSONValue?, path: String = "") throws(FieldError) {
        self.path = path
        switch value {
        case nil, .null?: members = []
        case .object(let m)?: members = m
        default:
            throw FieldError(
                field: path, message: path.isEmpty ? "the body must be a JSON object" : "must be an object")
        }
        if members.count > 64 { usedBeyond = [Bool](repeating: false, count: members.count - 64) }
    }

    private mutating func markUsed(_ i: Int) {
        if i < 64 { used |= 1 << UInt64(i) } else { usedBeyond[i - 64] = true }
    }

    private func isUsed(_ i: Int) -> Bool {
        i < 64 ? used & (1 << UInt64(i)) != 0 : usedBeyond[i - 64]
    }

    /// The names of all members, in order.
    package var keys: [String] { members.map(\.0) }

    /// The dotted path of a member.
    package func fieldPath(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    /// The raw value of a member; `null` reads as absent.
    package mutating func value(_ key: String) -> JSONValue? {
        guard let i = index(of: key) else { return nil }
        markUsed(i)
        let v = members[i].1
        return v.isNull ? nil : v
    }

    /// True when the member is present with the value `null` (which reads as absent).
    package func isNull(_ key: String) -> Bool {
        index(of: key).map { members[$0].1.isNull } ?? false
    }

    /// True when the member is present (and not null).
    package func has(_ key: String) -> Bool {
        guard let i = index(of: key) else { return false }
        return !members[i].1.isNull
    }

    private func index(of key: String) -> Int? {
        for i in members.indices where members[i].0 == key { return i }
        return nil
    }

    package mutating func string(_ key: String) throws(FieldError) -> String? {
        guard let v = value(key) else { return nil }
        guard case .string(let s) = v else { throw FieldError(field: fieldPath(key), message: "must be a string") }
        return s
    }

    /// A string that must be one of `T`'s raw values, refused with all of them named.
    package mutating func choice<T: CaseIterable & RawRepresentable<String>>(_ key: String) throws(FieldError) -> T? {
        guard let s = try string(key) else { return nil }
        guard let value = T(rawValue: s) else {
            let names = T.allCases.map { "\"\($0.rawValue)\"" }
            let list = names.dropLast().joined(separator: ", ") + " or " + (names.last ?? "")
            throw FieldError(field: fieldPath(key), message: "must be " + list)
        }
        return value
    }

    /// A string that must be a valid name (see `Names.isValid`).
    package mutating func name(_ key: String) throws(FieldError) -> String? {
        guard let s = try string(key) else { return nil }
        guard Names.isValid(s) else {
            throw FieldError(field: fieldPath(key), message: "must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
        }
        return s
    }

    /// A string of 1–256 characters (keys, actions).
    package mutating func key(_ key: String) throws(FieldError) -> String? {
        guard let s = try string(key) else { return nil }
        guard Names.isValidKey(s) else {
            throw FieldError(field: fieldPath(key), message: "must be 1 to 256 characters")
        }
        return s
    }

    package mutating func bool(_ key: String) throws(FieldError) -> Bool? {
        guard let v = value(key) else { return nil }
        guard case .bool(let b) = v else { throw FieldError(field: fieldPath(key), message: "must be true or false") }
        return b
    }

    /// An integer within `range` (a JSON number with no fraction).
    package mutating func int(_ key: String, in range: ClosedRange<Int>) throws(FieldError) -> Int? {
        guard let v = value(key) else { return nil }
        let i: Int
        switch v {
        case .int(let n): i = n
        case .double(let d) where d.rounded() == d && abs(d) < 9e15: i = Int(d)
        default: throw FieldError(field: fieldPath(key), message: "must be an integer")
        }
        guard range.contains(i) else {
            throw FieldError(
                field: fieldPath(key), message: "must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return i
    }

    /// A number within `range` (seconds and the like).
    package mutating func number(_ key: String, in range: ClosedRange<Double>) throws(FieldError) -> Double? {
        guard let v = value(key) else { return nil }
        let d: Double
        switch v {
        case .int(let n): d = Double(n)
        case .double(let x): d = x
        default: throw FieldError(field: fieldPath(key), message: "must be a number")
        }
        guard d.isFinite, range.contains(d) else {
            throw FieldError(
                field: fieldPath(key),
                message: "must be between \(Self.format(range.lowerBound)) and \(Self.format(range.upperBound))")
        }
        return d
    }

    package mutating func array(_ key: String) throws(FieldError) -> [JSONValue]? {
        guard let v = value(key) else { return nil }
        guard case .array(let a) = v else { throw FieldError(field: fieldPath(key), message: "must be an array") }
        return a
    }

    /// A nested object, read with its own reader (call `finish()` on it too).
    package mutating func object(_ key: String) throws(FieldError) -> FieldReader? {
        guard let v = value(key) else { return nil }
        guard case .object = v else { throw FieldError(field: fieldPath(key), message: "must be an object") }
        return try FieldReader(v, path: fieldPath(key))
    }

    /// Fails naming the first member that no accessor asked for.
    package func finish() throws(FieldError) {
        for i in members.indices where !isUsed(i) {
            throw FieldError(field: fieldPath(members[i].0), message: "unknown field")
        }
    }

    private static func format(_ d: Double) -> String {
        d.rounded() == d && abs(d) < 1e15 ? String(Int(d)) : String(d)
    }
}
