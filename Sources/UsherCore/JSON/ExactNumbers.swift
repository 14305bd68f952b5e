import Foundation

/// Numbers a body carries must come back as they were sent. Foundation's
/// parser turns an integer beyond 64 bits, or a fraction with more digits
/// than a `Double` keeps, into a nearby `Double`; such a number is refused
/// instead of being changed on its way through.
enum ExactNumbers {
    /// Where a number sits: per open container, the current member's name,
    /// or the array index.
    typealias Path = [(name: String?, index: Int?)]

    /// The first number in `bytes` that parsing did not keep exactly, with
    /// the member path it sits at (`payload.items.2`; `(body)` at the top).
    static func firstInexact(_ bytes: UnsafeRawBufferPointer) -> (field: String, text: String)? {
        var found: (field: String, text: String)?
        forEachNumber(in: bytes) { path, text in
            if isKept(text) { return true }
            found = (field(path), text)
            return false
        }
        return found
    }

    /// Integers too wide for a `Double` to hold exactly (beyond ±2^53), with
    /// where they sit: the parser reads some of them as doubles (negative
    /// ones of 19 digits), which `JSONValue.restoringIntegers` undoes.
    static func wideIntegers(_ bytes: UnsafeRawBufferPointer) -> [(path: Path, value: Int)] {
        var found: [(path: Path, value: Int)] = []
        forEachNumber(in: bytes) { path, text in
            if let value = Int(text), value.magnitude > 1 << 53 { found.append((path, value)) }
            return true
        }
        return found
    }

    /// Calls `visit` with each number's path and text, in order, until it answers false.
    private static func forEachNumber(in bytes: UnsafeRawBufferPointer, _ visit: (Path, String) -> Bool) {
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
                let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start...i]), as: UTF8.self)
                if !visit(path, text) { return }
            default:
                break
            }
            i += 1
        }
    }

    /// True when parsing keeps the number's value: an integer that fits 64
    /// bits, or a number whose nearest `Double` has the same decimal value.
    static func isKept(_ text: String) -> Bool {
        if Int(text) != nil { return true }
        guard let double = Double(text), double.isFinite, let sent = DecimalText(text),
            let kept = DecimalText("\(double)")
        else { return false }
        return sent == kept
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

    private static func field(_ path: Path) -> String {
        let segments = path.compactMap { segment -> String? in segment.index.map(String.init) ?? segment.name }
        return segments.isEmpty ? "(body)" : segments.joined(separator: ".")
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
    /// The value with each of `integers` set at its path where parsing left a
    /// `Double` in its place.
    func restoringIntegers(_ integers: [(path: ExactNumbers.Path, value: Int)]) -> JSONValue {
        var value = self
        for (path, integer) in integers { value.restore(integer, at: path[...]) }
        return value
    }

    private mutating func restore(_ integer: Int, at path: ArraySlice<(name: String?, index: Int?)>) {
        guard let step = path.first else {
            if case .double = self { self = .int(integer) }
            return
        }
        switch self {
        case .object(var members):
            guard let name = step.name, let i = members.firstIndex(where: { $0.0 == name }) else { return }
            members[i].1.restore(integer, at: path.dropFirst())
            self = .object(members)
        case .array(var elements):
            guard let index = step.index, elements.indices.contains(index) else { return }
            elements[index].restore(integer, at: path.dropFirst())
            self = .array(elements)
        default:
            return
        }
    }

    /// True when a `Double` is anywhere inside: only then can a number have
    /// been changed by parsing (integers that fit are kept as `Int`).
    var containsDouble: Bool {
        switch self {
        case .double: true
        case .array(let elements): elements.contains { $0.containsDouble }
        case .object(let members): members.contains { $0.1.containsDouble }
        default: false
        }
    }
}
