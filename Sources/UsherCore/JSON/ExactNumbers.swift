import Foundation

/// Numbers a body carries must come back as they were sent. Foundation's
/// parser turns an integer beyond 64 bits, or a fraction with more digits
/// than a `Double` keeps, into a nearby `Double`; such a number is refused
/// instead of being changed on its way through.
enum ExactNumbers {
    /// The first number in `bytes` that parsing did not keep exactly, with
    /// the member path it sits at (`payload.items.2`; `(body)` at the top).
    static func firstInexact(_ bytes: UnsafeRawBufferPointer) -> (field: String, text: String)? {
        // Per open container: the current member's name, or the array index.
        var path: [(name: String?, index: Int?)] = []
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
                if !isKept(text) { return (field(path), text) }
            default:
                break
            }
            i += 1
        }
        return nil
    }

    /// True when parsing keeps the number's value: an integer that fits 64
    /// bits, or a number whose nearest `Double` has the same decimal value.
    static func isKept(_ text: String) -> Bool {
        if Int(text) != nil { return true }
        guard let double = Double(text), double.isFinite,
            let sent = Decimal(string: text), let kept = Decimal(string: "\(double)")
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

    private static func field(_ path: [(name: String?, index: Int?)]) -> String {
        let segments = path.compactMap { segment -> String? in segment.index.map(String.init) ?? segment.name }
        return segments.isEmpty ? "(body)" : segments.joined(separator: ".")
    }
}

extension JSONValue {
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
