/// A JSON Pointer (RFC 6901): `""` is the whole document, `/a/0/b` walks
/// object members and array indices; `~1` stands for `/` and `~0` for `~`.
///
/// `get`, `set` and `remove` work on `JSONValue` (objects are ordered member
/// lists). `set` creates missing parent objects and appends to an array for
/// the token `-` (or the index one past the end); it leaves the document
/// unchanged where the path runs through a value that is neither an object
/// nor an array (a number, a string, `null`) or past the end of an array.
package struct JSONPointer: Sendable, Hashable, CustomStringConvertible {
    /// The unescaped reference tokens, outermost first.
    let tokens: [String]

    /// Parses pointer text.
    ///
    /// - Parameter maxSegments: more reference tokens than this is an error
    ///   (`JSONLimits.maxPointerSegments`): `set` and `remove` recurse once per
    ///   token, and `set` builds one object per missing one.
    /// - Throws: a message when the text is neither empty nor starts with `/`,
    ///   has too many segments, or a `~` is not followed by `0` or `1`.
    init(parsing text: String, maxSegments: Int = JSONLimits().maxPointerSegments)
        throws(JSONPointerSyntaxError)
    {
        if text.isEmpty {
            tokens = []
            return
        }
        guard text.hasPrefix("/") else {
            throw JSONPointerSyntaxError(
                message: "must be a JSON Pointer: empty or starting with \"/\", e.g. \"/type\"")
        }
        let segments = text.utf8.reduce(0) { $1 == 0x2F ? $0 + 1 : $0 }
        guard segments <= maxSegments else {
            throw JSONPointerSyntaxError(
                message: "has \(segments) segments; a JSON Pointer has at most \(maxSegments) (max_pointer_segments)")
        }
        var out: [String] = []
        out.reserveCapacity(segments)
        for raw in text.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
            out.append(try Self.unescape(raw))
        }
        tokens = out
    }

    /// A pointer from unescaped tokens (not checked against
    /// `max_pointer_segments`: for pointers the code itself makes).
    init(tokens: [String]) {
        self.tokens = tokens
    }

    /// The pointer text, with `~` and `/` escaped again.
    package var description: String {
        tokens.map { "/" + $0.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1") }
            .joined()
    }

    /// The value the pointer refers to, or nil when it does not exist.
    package func value(in document: JSONValue) -> JSONValue? {
        var current = document
        for token in tokens {
            switch current {
            case .object(let members):
                guard let member = members.first(where: { $0.0 == token }) else { return nil }
                current = member.1
            case .array(let elements):
                guard let i = Self.index(token), i < elements.count else { return nil }
                current = elements[i]
            default:
                return nil
            }
        }
        return current
    }

    /// Sets the referenced value, creating missing parent objects. Returns
    /// false (and leaves `document` unchanged) when the path cannot be made.
    @discardableResult
    func set(_ value: JSONValue, in document: inout JSONValue) -> Bool {
        Self.set(value, tokens[...], in: &document)
    }

    /// Removes the referenced member or element. Returns false when there is
    /// nothing to remove (the document is unchanged). The empty pointer
    /// removes nothing.
    @discardableResult
    package func remove(from document: inout JSONValue) -> Bool {
        guard !tokens.isEmpty else { return false }
        return Self.remove(tokens[...], from: &document)
    }

    // MARK: - Implementation

    /// `~0` → `~`, `~1` → `/`; any other `~` is an error.
    private static func unescape(_ raw: Substring) throws(JSONPointerSyntaxError) -> String {
        guard raw.contains("~") else { return String(raw) }
        var out = ""
        var iterator = raw.makeIterator()
        while let c = iterator.next() {
            guard c == "~" else {
                out.append(c)
                continue
            }
            switch iterator.next() {
            case "0": out.append("~")
            case "1": out.append("/")
            default:
                throw JSONPointerSyntaxError(message: "\"~\" must be followed by 0 or 1 (~0 is \"~\", ~1 is \"/\")")
            }
        }
        return out
    }

    /// An array index token: `0` or digits without a leading zero.
    static func index(_ token: String) -> Int? {
        let utf8 = token.utf8
        guard let first = utf8.first, utf8.count <= 18, utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            return nil
        }
        guard first != 0x30 || utf8.count == 1 else { return nil }
        return Int(token)
    }

    /// Recurses once per token (at most `max_pointer_segments` for a parsed pointer).
    private static func set(_ value: JSONValue, _ tokens: ArraySlice<String>, in document: inout JSONValue) -> Bool {
        guard let token = tokens.first else {
            document = value
            return true
        }
        let rest = tokens.dropFirst()
        switch document {
        case .object(var members):
            if let i = members.firstIndex(where: { $0.0 == token }) {
                var child = members[i].1
                guard set(value, rest, in: &child) else { return false }
                members[i].1 = child
            } else {
                var child = JSONValue.object([])
                guard set(value, rest, in: &child) else { return false }
                members.append((token, child))
            }
            document = .object(members)
            return true
        case .array(var elements):
            let i = token == "-" ? elements.count : index(token)
            guard let i, i <= elements.count else { return false }
            if i < elements.count {
                var child = elements[i]
                guard set(value, rest, in: &child) else { return false }
                elements[i] = child
            } else {
                var child = JSONValue.object([])
                guard set(value, rest, in: &child) else { return false }
                elements.append(child)
            }
            document = .array(elements)
            return true
        default:
            return false
        }
    }

    private static func remove(_ tokens: ArraySlice<String>, from document: inout JSONValue) -> Bool {
        guard let token = tokens.first else { return false }
        let rest = tokens.dropFirst()
        switch document {
        case .object(var members):
            guard let i = members.firstIndex(where: { $0.0 == token }) else { return false }
            if rest.isEmpty {
                members.remove(at: i)
            } else {
                var child = members[i].1
                guard remove(rest, from: &child) else { return false }
                members[i].1 = child
            }
            document = .object(members)
            return true
        case .array(var elements):
            guard let i = index(token), i < elements.count else { return false }
            if rest.isEmpty {
                elements.remove(at: i)
            } else {
                var child = elements[i]
                guard remove(rest, from: &child) else { return false }
                elements[i] = child
            }
            document = .array(elements)
            return true
        default:
            return false
        }
    }
}

/// Pointer text that is not a valid JSON Pointer.
struct JSONPointerSyntaxError: Error, Sendable, Equatable {
    /// What is wrong with it.
    package var message: String
}
