import Foundation

/// Numbers a body carries must come back as they were sent. Foundation's
/// parser reads some numbers other than as their text says (a fraction of 17
/// digits as a neighbouring double, a negative integer of 19 digits as a
/// double, `-0` as the integer 0): each is read again from its text, which
/// Swift's `Double` and `Int` read correctly rounded. A number that neither a
/// double nor a 64-bit integer spells (`0.30000000000000001`, 2^64) is
/// refused instead of being changed on its way through.
enum ExactNumbers {
    /// Where a number sits: per open container, the current member's name,
    /// or the array index.
    typealias Path = [(name: String?, index: Int?)]

    /// A number as its text gives it, and where it sits.
    typealias Reading = (path: Path, value: JSONValue)

    /// A number that cannot be kept, with the member path it sits at
    /// (`payload.items.2`; `(body)` at the top).
    struct Inexact: Error {
        var field: String
        var text: String
    }

    /// The most significant digits a double's exact decimal value has.
    private static let maxExactDigits = 767

    /// Every number in `bytes` the parser may have read otherwise, as its
    /// text gives it: each fraction or exponent form, each integer beyond
    /// ±2^53, and `-0`; or the first number that cannot be kept.
    static func readings(_ bytes: UnsafeRawBufferPointer) -> Result<[Reading], Inexact> {
        var readings: [Reading] = []
        var inexact: Inexact?
        forEachNumber(in: bytes) { path, number in
            switch read(number) {
            case .asParsed: return true
            case .value(let value):
                readings.append((path, value))
                return true
            case .refused:
                inexact = Inexact(field: field(path), text: String(decoding: number, as: UTF8.self))
                return false
            }
        }
        if let inexact { return .failure(inexact) }
        return .success(readings)
    }

    /// True when `text` (JSON number text) is kept: an integer that fits 64
    /// bits, or a double's value to the digits given.
    static func isKept(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { read(UnsafeRawBufferPointer($0)) } != .refused
    }

    private enum Read: Equatable {
        /// The parser reads it right: an integer within ±2^53, but `-0`.
        case asParsed
        /// What the text says.
        case value(JSONValue)
        case refused
    }

    /// What one number's text says, from its digits: integers of at most 15
    /// digits without making a `String`.
    private static func read(_ number: UnsafeRawBufferPointer) -> Read {
        var isInteger = true
        var digits = 0
        var firstNonZero = -1
        var lastNonZero = -1
        for b in number {
            if b >= 0x30 && b <= 0x39 {
                if b != 0x30 {
                    if firstNonZero < 0 { firstNonZero = digits }
                    lastNonZero = digits
                }
                digits += 1
            } else if b == 0x2E {
                isInteger = false
            } else if b == 0x65 || b == 0x45 {
                isInteger = false
                break
            }
        }
        let significant = firstNonZero < 0 ? 0 : lastNonZero - firstNonZero + 1
        let negative = number.first == 0x2D
        if isInteger && significant == 0 { return negative ? .value(.double(-0.0)) : .asParsed }
        if isInteger && digits <= 15 { return .asParsed }
        let text = String(decoding: number, as: UTF8.self)
        if isInteger, let integer = Int(text) { return integer.magnitude > 1 << 53 ? .value(.int(integer)) : .asParsed }
        guard let double = Double(text), double.isFinite, isSpelled(text, by: double, significant: significant) else {
            return .refused
        }
        return .value(.double(double))
    }

    /// True when `text`, of `significant` digits, is `double` written to
    /// those digits: its shortest form (`0.1`), or its exact value correctly
    /// rounded to that many digits (`4.9406564584124654e-324`, `%.17g`).
    private static func isSpelled(_ text: String, by double: Double, significant: Int) -> Bool {
        if significant == 0 { return true }
        // A normal double keeps any 15 significant digits (`DBL_DIG`).
        if significant <= 15 && double.isNormal { return true }
        let shortest = "\(double)"
        if text == shortest { return true }
        guard let sent = DecimalText(text) else { return false }
        if sent == DecimalText(shortest) { return true }
        guard significant <= maxExactDigits else { return false }
        return sent == DecimalText(String(format: "%.\(significant - 1)e", double))
    }

    /// Calls `visit` with each number's path and text, in order, until it answers false.
    private static func forEachNumber(
        in bytes: UnsafeRawBufferPointer, _ visit: (Path, UnsafeRawBufferPointer) -> Bool
    ) {
        var path: Path = []
        var expectingName = false
        var i = 0
        let n = bytes.count
        while i < n {
            let b = bytes[i]
            switch b {
            case 0x7B:
                path.append((nil, nil))
                expectingName = true
            case 0x5B:
                path.append((nil, 0))
                expectingName = false
            case 0x7D, 0x5D:
                _ = path.popLast()
                expectingName = false
            case 0x2C:
                if let index = path.last?.index {
                    path[path.count - 1].index = index + 1
                } else {
                    expectingName = !path.isEmpty
                }
            case 0x22:
                let start = i + 1
                i += 1
                while i < n, bytes[i] != 0x22 { i += bytes[i] == 0x5C ? 2 : 1 }
                if expectingName, !path.isEmpty {
                    path[path.count - 1].name = decodeName(UnsafeRawBufferPointer(rebasing: bytes[start..<min(i, n)]))
                    expectingName = false
                }
            case 0x2D, 0x30...0x39:
                let start = i
                while i + 1 < n, isNumberByte(bytes[i + 1]) { i += 1 }
                if !visit(path, UnsafeRawBufferPointer(rebasing: bytes[start...i])) { return }
            default:
                break
            }
            i += 1
        }
    }

    private static func isNumberByte(_ b: UInt8) -> Bool {
        (0x30...0x39).contains(b) || b == 0x2E || b == 0x65 || b == 0x45 || b == 0x2B || b == 0x2D
    }

    private static func decodeName(_ raw: UnsafeRawBufferPointer) -> String {
        if !raw.contains(0x5C) { return String(decoding: raw, as: UTF8.self) }
        let quoted = Data([0x22]) + Data(raw) + Data([0x22])
        return (try? JSONSerialization.jsonObject(with: quoted, options: [.fragmentsAllowed])) as? String
            ?? String(decoding: raw, as: UTF8.self)
    }

    /// The member path as every `field` spells it: names joined by `.`,
    /// array indices in brackets (`items[1].payload.a[0]`).
    private static func field(_ path: Path) -> String {
        var field = ""
        for segment in path {
            if let index = segment.index {
                field += "[\(index)]"
            } else if let name = segment.name {
                field += field.isEmpty ? name : ".\(name)"
            }
        }
        return field.isEmpty ? "(body)" : field
    }
}
/// A decimal number's exact value, whatever its exponent (`Decimal` stops at
/// 10^127): the sign, the significant digits without leading or trailing
/// zeros, and the power of ten of the last one. Zero has no digits.
struct DecimalText: Equatable {
    var negative: Bool
    var digits: [UInt8]
    var exponent: Int

    /// Reads JSON number text (or Swift's `description` of a `Double`); nil for anything else.
    init?(_ text: String) {
        var bytes = Array(text.utf8)[...]
        negative = bytes.first == UInt8(ascii: "-")
        if negative { bytes = bytes.dropFirst() }
        var exponent = 0
        if let e = bytes.firstIndex(where: { $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }) {
            var power = String(decoding: bytes[(e + 1)...], as: UTF8.self)
            if power.hasPrefix("+") { power.removeFirst() }
            guard let p = Int(power) else { return nil }
            exponent = p
            bytes = bytes[..<e]
        }
        var digits: [UInt8] = []
        var seenPoint = false
        for b in bytes {
            if b == UInt8(ascii: ".") {
                guard !seenPoint else { return nil }
                seenPoint = true
            } else if (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) {
                digits.append(b)
                if seenPoint { exponent -= 1 }
            } else {
                return nil
            }
        }
        guard !digits.isEmpty else { return nil }
        while digits.last == UInt8(ascii: "0") {
            digits.removeLast()
            exponent += 1
        }
        let leading = digits.prefix { $0 == UInt8(ascii: "0") }.count
        digits.removeFirst(leading)
        if digits.isEmpty {
            negative = false
            exponent = 0
        }
        self.digits = digits
        self.exponent = exponent
    }
}

extension JSONValue {
    /// The value with each reading set at its path, in place of the number
    /// parsing left there.
    func restoring(_ readings: [ExactNumbers.Reading]) -> JSONValue {
        var value = self
        for (path, number) in readings { value.restore(number, at: path[...]) }
        return value
    }

    private mutating func restore(_ number: JSONValue, at path: ArraySlice<(name: String?, index: Int?)>) {
        guard let step = path.first else {
            switch self {
            case .int, .double: self = number
            default: break
            }
            return
        }
        if case .object = self {
            var members = takeMembers()
            if let name = step.name, let i = Self.index(of: name, in: members) {
                members[i].1.restore(number, at: path.dropFirst())
            }
            self = .object(members)
        } else if case .array = self {
            var elements = takeElements()
            if let index = step.index, elements.indices.contains(index) {
                elements[index].restore(number, at: path.dropFirst())
            }
            self = .array(elements)
        }
    }

    /// An object's members, leaving `.null` in its place: held once, they
    /// change in place instead of being copied.
    private mutating func takeMembers() -> [(String, JSONValue)] {
        guard case .object(let members) = self else { return [] }
        self = .null
        return members
    }

    /// An array's elements, leaving `.null` in its place (as `takeMembers`).
    private mutating func takeElements() -> [JSONValue] {
        guard case .array(let elements) = self else { return [] }
        self = .null
        return elements
    }

    /// Where `name` is among members sorted by name, as `parse` sorts them.
    private static func index(of name: String, in members: [(String, JSONValue)]) -> Int? {
        var low = 0
        var high = members.count
        while low < high {
            let middle = (low + high) / 2
            if members[middle].0 < name { low = middle + 1 } else { high = middle }
        }
        return low < members.count && members[low].0 == name ? low : nil
    }

    /// True when a `Double` is anywhere inside: only then can a number have
    /// been read otherwise (integers that fit are kept as `Int`).
    var containsDouble: Bool {
        switch self {
        case .double: true
        case .array(let elements): elements.contains { $0.containsDouble }
        case .object(let members): members.contains { $0.1.containsDouble }
        default: false
        }
    }
}
