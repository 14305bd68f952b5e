extension JSONValue {
    /// At least as many bytes as the value takes as compact JSON text, and
    /// exact for text without characters to escape: strings count their
    /// UTF-8 bytes, quotes and escapes (six bytes for a control character);
    /// a number counts 24, the longest it can print. Iterative, so a deep
    /// value cannot exhaust the stack.
    var encodedSizeBound: Int {
        var total = 0
        var pending = [self]
        while let value = pending.popLast() {
            switch value {
            case .null: total += 4
            case .bool: total += 5
            case .int, .double: total += 24
            case .string(let s): total += Self.quotedSize(s)
            case .array(let elements):
                total += 2 + Swift.max(0, elements.count - 1)
                pending.append(contentsOf: elements)
            case .object(let members):
                total += 2 + Swift.max(0, members.count - 1)
                for (name, member) in members {
                    total += Self.quotedSize(name) + 1
                    pending.append(member)
                }
            }
        }
        return total
    }

    /// A string literal's size: its bytes, two quotes, and what escaping adds.
    private static func quotedSize(_ s: String) -> Int {
        var size = 2
        for byte in s.utf8 {
            switch byte {
            case 0x22, 0x5C, 0x2F: size += 2
            case ..<0x20: size += 6
            default: size += 1
            }
        }
        return size
    }
}
