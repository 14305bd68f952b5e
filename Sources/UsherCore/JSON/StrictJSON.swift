import Foundation

/// What RFC 8259 forbids and Foundation's parser lets through: a comma before
/// `}` or `]`, and a member name given twice in one object (Foundation keeps
/// the last silently). Foundation stays the parser: these checks run over text
/// it has accepted, and look only at the bytes outside strings.
enum StrictJSON {
    /// Checks text that `JSONSerialization` accepted and turned into `value`;
    /// answers what the pass over the bytes found.
    @discardableResult
    static func check(_ data: Data, parsed value: JSONValue) throws(JSONSyntaxError) -> Scan {
        let scan = data.withUnsafeBytes { scanStructure($0) }
        if scan.hasNUL { throw JSONSyntaxError(message: "malformed JSON: the text must be UTF-8") }
        if let comma = scan.trailingComma {
            throw JSONSyntaxError(message: "malformed JSON at \(position(of: comma, in: data)): trailing comma")
        }
        // Every member of every object has exactly one colon outside strings;
        // fewer members parsed means some name was given twice.
        guard memberCount(value) < scan.colons else { return scan }
        let duplicate = data.withUnsafeBytes { firstDuplicate($0) }
        guard let duplicate else { throw JSONSyntaxError(message: "malformed JSON: a member name is given twice") }
        throw JSONSyntaxError(
            message:
                "malformed JSON at \(position(of: duplicate.offset, in: data)): member \"\(duplicate.name)\" given twice"
        )
    }

    struct Scan {
        /// Colons outside strings: one per object member.
        var colons = 0
        /// The offset of a comma followed (after whitespace) by `}` or `]`.
        var trailingComma: Int?
        /// A NUL byte: UTF-16 or UTF-32 text, which Foundation also accepts.
        var hasNUL = false
        /// A number starting `-0`: the parser reads `-0` as the integer 0,
        /// which `ExactNumbers` gives its sign back.
        var hasNegativeZero = false
    }

    /// One pass over the bytes, skipping strings.
    static func scanStructure(_ bytes: UnsafeRawBufferPointer) -> Scan {
        var scan = Scan()
        var pendingComma = -1
        var i = 0
        let n = bytes.count
        while i < n {
            let b = bytes[i]
            switch b {
            case 0x22:
                pendingComma = -1
                i += 1
                while i < n {
                    let c = bytes[i]
                    if c == 0x22 { break }
                    i += c == 0x5C ? 2 : 1
                }
            case 0x3A:
                scan.colons += 1
                pendingComma = -1
            case 0x2C:
                pendingComma = i
            case 0x7D, 0x5D:
                if pendingComma >= 0 {
                    scan.trailingComma = pendingComma
                    return scan
                }
            case 0x20, 0x0A, 0x0D, 0x09:
                break
            case 0x00:
                scan.hasNUL = true
                return scan
            case 0x2D:
                pendingComma = -1
                if i + 1 < n, bytes[i + 1] == 0x30 { scan.hasNegativeZero = true }
            default:
                pendingComma = -1
            }
            i += 1
        }
        return scan
    }

    /// Members of all objects in `value`.
    static func memberCount(_ value: JSONValue) -> Int {
        switch value {
        case .object(let members): members.reduce(members.count) { $0 + memberCount($1.1) }
        case .array(let elements): elements.reduce(0) { $0 + memberCount($1) }
        default: 0
        }
    }

    /// The first member name given twice in one object, with the offset of
    /// its second occurrence. Runs only once a duplicate is known to exist.
    static func firstDuplicate(_ bytes: UnsafeRawBufferPointer) -> (name: String, offset: Int)? {
        // Per open container: its names so far, or nil for an array.
        var open: [Set<String>?] = []
        var expectingName = false
        var i = 0
        while i < bytes.count {
            switch bytes[i] {
            case 0x7B:
                open.append([])
                expectingName = true
            case 0x5B:
                open.append(nil)
            case 0x7D, 0x5D:
                _ = open.popLast()
                expectingName = false
            case 0x2C:
                expectingName = open.last.map { $0 != nil } ?? false
            case 0x22:
                let start = i
                i += 1
                while i < bytes.count, bytes[i] != 0x22 { i += bytes[i] == 0x5C ? 2 : 1 }
                if expectingName, let names = open.last, let unwrapped = names {
                    let name = decodeString(UnsafeRawBufferPointer(rebasing: bytes[start...min(i, bytes.count - 1)]))
                    if unwrapped.contains(name) { return (name, start) }
                    open[open.count - 1]!.insert(name)
                    expectingName = false
                }
            default:
                break
            }
            i += 1
        }
        return nil
    }

    /// A quoted string's value (Foundation decodes any escapes).
    private static func decodeString(_ quoted: UnsafeRawBufferPointer) -> String {
        if !quoted.contains(0x5C) { return String(decoding: quoted.dropFirst().dropLast(), as: UTF8.self) }
        let object = try? JSONSerialization.jsonObject(with: Data(quoted), options: [.fragmentsAllowed])
        return object as? String ?? String(decoding: quoted, as: UTF8.self)
    }

    /// `line L, column C` (both from 1; columns count characters) of a byte offset.
    static func position(of offset: Int, in data: Data) -> String {
        var line = 1
        var column = 1
        for b in data.prefix(offset) {
            if b == 0x0A {
                line += 1
                column = 1
            } else if b & 0xC0 != 0x80 {
                column += 1
            }
        }
        return "line \(line), column \(column)"
    }

    /// Foundation's message with its byte offset (`around character N`)
    /// turned into a line and column.
    static func describe(_ error: NSError, in data: Data) -> String {
        let detail = (error.userInfo[NSDebugDescriptionErrorKey] as? String) ?? "not valid JSON"
        var text = detail.hasSuffix(".") ? String(detail.dropLast()) : detail
        text = text.prefix(1).lowercased() + text.dropFirst()
        for marker in [" around character ", " at "] {
            guard let range = text.range(of: marker, options: .backwards),
                let offset = Int(text[range.upperBound...]), offset >= 0, offset <= data.count
            else { continue }
            return "malformed JSON at \(position(of: offset, in: data)): \(text[..<range.lowerBound])"
        }
        return "malformed JSON: \(text)"
    }
}
