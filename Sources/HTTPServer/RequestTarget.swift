/// A request target (RFC 9112 origin-form, `/path?query`) checked and
/// percent-decoded once, before anything else looks at it. Every later step
/// (auth, routing, handlers) sees only this canonical form, so no two of them
/// can read one path two ways.
///
/// Refused, with the reason: a target that is not a path; a raw byte outside
/// visible ASCII; an empty, `.` or `..` segment (also percent-encoded); an
/// encoded `/`; a NUL or control character anywhere after decoding; a bad
/// `%` escape; text that is not UTF-8; more query arguments than the
/// server takes (414).
struct RequestTarget: Sendable {
    /// The canonical path: `/` and the decoded segments joined by `/`.
    let path: String
    /// Query arguments in order; `+` is a space, as in HTML forms.
    /// A name without `=` has an empty value.
    let query: [(name: String, value: String)]

    /// The decoded path segments (none for `/`).
    var segments: [String] { path.split(separator: "/").map(String.init) }

    /// Parses the raw target bytes as the client sent them; more than
    /// `maxQueryArguments` query arguments are refused with 414.
    init(raw: [UInt8], maxQueryArguments: Int = .max) throws(HTTPRefusal) {
        guard raw.first == UInt8(ascii: "/") else {
            throw .badRequest("the request target must be a path starting with /")
        }
        var pathEnd = raw.endIndex
        var encoded = false
        for index in raw.indices {
            let byte = raw[index]
            if byte <= 0x20 || byte >= 0x7F || byte == UInt8(ascii: "#") {
                throw .badRequest(
                    "the request target holds a byte that must be percent-encoded (0x\(String(byte, radix: 16)))")
            }
            if byte == UInt8(ascii: "%") && pathEnd == raw.endIndex { encoded = true }
            if byte == UInt8(ascii: "?") && pathEnd == raw.endIndex { pathEnd = index }
        }
        if pathEnd == 1 {
            path = "/"
        } else if raw[pathEnd - 1] == UInt8(ascii: "/") {
            throw .badRequest("the path must not end with \"/\"")
        } else if !encoded {
            // Plain ASCII: the bytes are the canonical path once its segments pass.
            var segmentStart = 1
            var dotsOnly = true
            for index in 1...pathEnd {
                if index == pathEnd || raw[index] == UInt8(ascii: "/") {
                    try Self.checkSegment(index - segmentStart, isDots: dotsOnly)
                    segmentStart = index + 1
                    dotsOnly = true
                } else if raw[index] != UInt8(ascii: ".") {
                    dotsOnly = false
                }
            }
            path = String(decoding: raw[..<pathEnd], as: UTF8.self)
        } else {
            var segments: [String] = []
            for piece in raw[1..<pathEnd].split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
                let segment = try Self.decode(piece, plusIsSpace: false, what: "path segment")
                try Self.checkSegment(segment.utf8.count, isDots: segment.utf8.allSatisfy { $0 == UInt8(ascii: ".") })
                segments.append(segment)
            }
            path = "/" + segments.joined(separator: "/")
        }
        var query: [(name: String, value: String)] = []
        if pathEnd < raw.endIndex {
            let pieces = raw[(pathEnd + 1)...].split(separator: UInt8(ascii: "&"))
            guard pieces.count <= maxQueryArguments else {
                throw .uriTooLong("the query has \(pieces.count) arguments; at most \(maxQueryArguments) are accepted")
            }
            for piece in pieces {
                let equals = piece.firstIndex(of: UInt8(ascii: "=")) ?? piece.endIndex
                let name = try Self.decode(piece[..<equals], plusIsSpace: true, what: "query")
                let value =
                    equals < piece.endIndex
                    ? try Self.decode(piece[(equals + 1)...], plusIsSpace: true, what: "query") : ""
                query.append((name, value))
            }
        }
        self.query = query
    }

    /// Empty, `.` and `..` segments are refused (`isDots`: only dots, of `count`).
    private static func checkSegment(_ count: Int, isDots: Bool) throws(HTTPRefusal) {
        if count == 0 || isDots && count <= 2 {
            throw .badRequest("the path must not have empty, \".\" or \"..\" segments")
        }
    }

    /// Percent-decodes one segment or query part and checks what it decodes to.
    private static func decode(_ bytes: ArraySlice<UInt8>, plusIsSpace: Bool, what: String) throws(HTTPRefusal)
        -> String
    {
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            var byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.endIndex,
                    let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2])
                else { throw .badRequest("the \(what) has a % not followed by two hex digits") }
                byte = high << 4 | low
                index += 3
                if byte == UInt8(ascii: "/") && what == "path segment" {
                    throw .badRequest("the path must not hold an encoded / (%2F)")
                }
            } else {
                if byte == UInt8(ascii: "+") && plusIsSpace { byte = 0x20 }
                index += 1
            }
            if byte < 0x20 || byte == 0x7F {
                throw .badRequest("the \(what) holds a NUL or control character")
            }
            decoded.append(byte)
        }
        guard let text = String(validating: decoded, as: UTF8.self) else {
            throw .badRequest("the \(what) is not valid UTF-8 once decoded")
        }
        return text
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// Why the server refused a request before any handler saw it; the handler
/// turns it into the answer (`HTTPHandler.refusal(_:)`), and the connection
/// is closed after it.
package enum HTTPRefusal: Error, Sendable, Equatable {
    /// 400: a malformed target, head or framing.
    case badRequest(String)
    /// 413: the body is larger than `maxBodyBytes` (or a chunk says it will be).
    case payloadTooLarge(limit: Int)
    /// 414: more query arguments than `maxQueryArguments`.
    case uriTooLong(String)
    /// 431: more header lines than `maxHeaders`, or a head too large for
    /// the connection's memory to hold it and its answer.
    case headerFieldsTooLarge(String)
    /// 501: a `Transfer-Encoding` other than `chunked`.
    case notImplemented(String)

    /// The status code of the answer.
    var status: Int {
        switch self {
        case .badRequest: 400
        case .payloadTooLarge: 413
        case .uriTooLong: 414
        case .headerFieldsTooLarge: 431
        case .notImplemented: 501
        }
    }
}
