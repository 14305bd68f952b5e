import CMicroHTTPD
import Foundation

/// A request's head checked once, on the first handler call: the target
/// (`RequestTarget`), the bytes of every header, `Host`, and the framing.
/// Whatever fails is refused before any handler sees the request.
///
/// libmicrohttpd 0.9.75 hands out C strings cut from its read buffer, so a NUL
/// byte sent by the client silently shortens a value. The head is one block
/// in that buffer, in order, where libmicrohttpd writes NULs only over the
/// separators (spaces of the request line, each `:` and each line end); a
/// header whose value is not followed by exactly its line end held a NUL.
///
/// Refused besides (400 unless said): a header name that is not a token
/// (whitespace before the colon among them, RFC 9112 §5.1); a header the
/// server captures, or `Host`, given twice (the first would win silently);
/// HTTP/1.1 without `Host`, or a `Host` that is not `host[:port]` (RFC 9112
/// §3.2, RFC 3986 §3.2: no userinfo); more than `Limits.headers` header
/// lines (431); more than `Limits.queryArguments` query arguments (414).
/// Captured values lose the whitespace around them (RFC 9110 §5.5).
struct RequestHead {
    let target: RequestTarget
    /// The captured headers.
    let headers: CapturedHeaders
    /// The declared body length, when `Content-Length` was sent.
    let contentLength: Int?
    /// True when the body comes in chunks (`Transfer-Encoding: chunked`).
    let isChunked: Bool
    /// True when the client waits for `100 Continue` before its body.
    let expectsContinue: Bool
    /// Where the head ends in libmicrohttpd's read buffer: where the read
    /// buffer starts while the body arrives (`ChunkFraming`).
    let end: UInt

    /// Counts the head may not exceed.
    struct Limits {
        var headers = Int.max
        var queryArguments = Int.max
    }

    /// What the server remembers of the request line from libmicrohttpd's
    /// URI log callback, before it decodes the target in place.
    struct RawLine {
        /// The target's bytes up to the first NUL.
        let target: [UInt8]
        /// Where the target starts in the read buffer.
        let address: UInt
    }

    /// Checks the head of the request on `connection`.
    static func check(
        connection: OpaquePointer, method: UnsafePointer<CChar>, url: UnsafePointer<CChar>?,
        version: UnsafePointer<CChar>?, line: RawLine?, captured: [(bytes: [UInt8], name: String)],
        limits: Limits = Limits()
    ) throws(HTTPRefusal) -> RequestHead {
        // method, one NUL (its space), maybe more spaces, the target, one NUL, the version
        let methodEnd = UInt(bitPattern: method) + UInt(strlen(method))
        guard let line, let url, let version, UInt(bitPattern: url) == line.address, line.address > methodEnd,
            UInt(bitPattern: version) == line.address + UInt(line.target.count) + 1,
            (methodEnd + 1..<line.address).allSatisfy({ UnsafePointer<UInt8>(bitPattern: $0)!.pointee == 0x20 })
        else { throw .badRequest("the request line holds a NUL byte or is malformed") }
        let target = try RequestTarget(raw: line.target, maxQueryArguments: limits.queryArguments)

        var scan = HeaderScan(captured: captured)
        scan.start = UInt(bitPattern: method)
        scan.end = scan.start + UInt(CUsherMHD_request_header_size(connection))
        scan.previousEnd = UInt(bitPattern: version) + UInt(strlen(version))
        withUnsafeMutablePointer(to: &scan) { pointer in
            _ = MHD_get_connection_values_n(connection, .HEADER_KIND, scanHeader, pointer)
        }
        if let problem = scan.problem { throw problem }
        guard scan.end > scan.start, Self.onlyLineEnds(from: scan.previousEnd, to: scan.end, lines: 2) else {
            throw .badRequest("a header value holds a NUL byte")
        }
        guard scan.lines <= limits.headers else {
            throw .headerFieldsTooLarge(
                "the head has \(scan.lines) header lines; at most \(limits.headers) are accepted (max_request_headers)")
        }
        if let host = scan.host {
            guard Self.isAuthority(host) else {
                throw .badRequest(
                    "Host must be a host name or address with an optional port (no userinfo, path or spaces)")
            }
        } else if strcmp(version, "HTTP/1.0") != 0 {
            throw .badRequest("an HTTP/1.1 request must have a Host header")
        }
        let contentLength = try scan.framing()
        return RequestHead(
            target: target, headers: scan.found, contentLength: contentLength,
            isChunked: !scan.transferEncodings.isEmpty,
            expectsContinue: scan.expectsContinue, end: scan.end)
    }

    /// True when the request leaves less than `room` bytes of the
    /// connection's `pool`-byte memory pool, where the answer's head goes.
    static func crowdsPool(_ connection: OpaquePointer, pool: Int, room: Int) -> Bool {
        // At most a record per two bytes of head (`a;` in a Cookie), and the
        // Cookie's copy: most heads are too small to count.
        guard Int(CUsherMHD_request_header_size(connection)) * 34 + room > pool else { return false }
        return poolBytes(connection) + room > pool
    }

    /// The bytes of the connection's memory pool this request holds by now
    /// (libmicrohttpd 0.9.75 keeps the head in it, and a 64-byte record per
    /// header, cookie and query argument, and copies the `Cookie` value).
    private static func poolBytes(_ connection: OpaquePointer) -> Int {
        var records = 0
        for kind in [MHD_ValueKind.HEADER_KIND, .GET_ARGUMENT_KIND] {
            records += Int(MHD_get_connection_values_n(connection, kind, nil, nil))
        }
        var cookie: UnsafePointer<CChar>?
        var cookieBytes = 0
        if MHD_lookup_connection_value_n(connection, .HEADER_KIND, "Cookie", 6, &cookie, &cookieBytes) == .YES,
            let cookie
        {
            // The copy and a record per cookie, counted from the header
            // (libmicrohttpd may have given up part-way).
            let value = UnsafeRawBufferPointer(start: cookie, count: cookieBytes)
            records += 1 + value.count { $0 == UInt8(ascii: ";") || $0 == UInt8(ascii: ",") }
            cookieBytes += 1
        }
        return Int(CUsherMHD_request_header_size(connection)) + 64 * records + cookieBytes
    }

    /// True when `value` is `host[:port]` as RFC 3986 §3.2.2 spells a host:
    /// an IP literal in brackets, or letters, digits, `-._~`, `%XX` and
    /// `!$&'()*+,;=`; empty is allowed (RFC 9112 §3.2).
    static func isAuthority(_ value: String) -> Bool {
        var value = value
        return value.withUTF8(isAuthority)
    }

    private static func isAuthority(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        let end = bytes.count
        if end > 0, bytes[0] == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")), close > 1,
                bytes[1..<close].allSatisfy({ isHexDigit($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") })
            else { return false }
            index = close + 1
        } else {
            while index < end, bytes[index] != UInt8(ascii: ":") {
                if bytes[index] == UInt8(ascii: "%") {
                    guard index + 2 < end, isHexDigit(bytes[index + 1]), isHexDigit(bytes[index + 2]) else {
                        return false
                    }
                    index += 3
                    continue
                }
                guard isRegNameByte(bytes[index]) else { return false }
                index += 1
            }
        }
        guard index < end else { return true }
        guard bytes[index] == UInt8(ascii: ":") else { return false }
        return bytes[(index + 1)...].allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x66)
    }

    /// Unreserved and sub-delims bytes (RFC 3986 §2.2-2.3).
    private static func isRegNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "!"),
            UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="):
            true
        default: false
        }
    }

    /// True when the bytes in `from..<to` are the NULs libmicrohttpd wrote
    /// over `lines` line ends (CRLF or a bare LF each).
    fileprivate static func onlyLineEnds(from: UInt, to: UInt, lines: UInt) -> Bool {
        guard to >= from + lines, to <= from + 2 * lines,
            let start = UnsafePointer<UInt8>(bitPattern: from)
        else { return false }
        return (0..<Int(to - from)).allSatisfy { start[$0] == 0 }
    }
}

/// The state of one pass over the headers (`MHD_get_connection_values_n`).
private struct HeaderScan {
    let captured: [(bytes: [UInt8], name: String)]
    var found = CapturedHeaders()
    var start: UInt = 0
    var end: UInt = 0
    /// Where the previous line's text ended (the request line's, at first).
    var previousEnd: UInt = 0
    /// Header lines seen.
    var lines = 0
    var contentLengths: [String] = []
    var transferEncodings: [String] = []
    /// The `Host` value, without the whitespace around it.
    var host: String?
    var expectsContinue = false
    var problem: HTTPRefusal?

    mutating func offer(_ key: UnsafePointer<CChar>, _ keySize: Int, _ value: UnsafePointer<CChar>?, _ valueSize: Int) {
        guard problem == nil else { return }
        lines += 1
        guard keySize > 0 else {
            problem = .badRequest("a header has no name")
            return
        }
        let keyAddress = UInt(bitPattern: key)
        let valueAddress = value.map { UInt(bitPattern: $0) } ?? keyAddress + UInt(keySize) + 1
        // Each line must start where the last one's line end stops, and lie in the head.
        guard keyAddress >= start, valueAddress + UInt(valueSize) < end,
            RequestHead.onlyLineEnds(from: previousEnd, to: keyAddress, lines: 1)
        else {
            problem = .badRequest("a header holds a NUL byte, or a line is folded (obsolete)")
            return
        }
        previousEnd = valueAddress + UInt(valueSize)
        let name = UnsafeRawBufferPointer(start: key, count: keySize)
        guard name.allSatisfy(Self.isTokenByte) else {
            problem = .badRequest(
                "a header name holds whitespace or a byte a name cannot have (no space before the colon)")
            return
        }
        let bytes = UnsafeRawBufferPointer(start: value.map(UnsafeRawPointer.init), count: valueSize)
        if bytes.contains(where: { $0 < 0x20 && $0 != 0x09 || $0 == 0x7F }) {
            problem = .badRequest("a header value holds a control character")
            return
        }
        if Self.equalsIgnoringCase(name, Self.contentLength) {
            contentLengths.append(String(decoding: bytes, as: UTF8.self))
        } else if Self.equalsIgnoringCase(name, Self.transferEncoding) {
            transferEncodings.append(String(decoding: bytes, as: UTF8.self))
        } else if Self.equalsIgnoringCase(name, Self.expect) {
            expectsContinue = Self.trimmed(bytes).lowercased() == "100-continue"
        }
        var text: String?
        if Self.equalsIgnoringCase(name, Self.hostName) {
            guard host == nil else {
                problem = .badRequest("Host is given more than once")
                return
            }
            text = Self.trimmed(bytes)
            host = text
        }
        if let match = captured.first(where: { Self.equalsIgnoringCase(name, $0.bytes) }) {
            // The app reads one value of each: a second one must not be ignored.
            guard found[match.name] == nil else {
                problem = .badRequest("\(String(decoding: name, as: UTF8.self)) is given more than once")
                return
            }
            found.add(match.name, text ?? Self.trimmed(bytes))
        }
    }

    private static let contentLength = Array("content-length".utf8)
    private static let transferEncoding = Array("transfer-encoding".utf8)
    private static let expect = Array("expect".utf8)
    private static let hostName = Array("host".utf8)

    /// The value without the spaces and tabs around it (RFC 9110 §5.5).
    private static func trimmed(_ bytes: UnsafeRawBufferPointer) -> String {
        let isSpace = { (byte: UInt8) in byte == 0x20 || byte == 0x09 }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) })
        else { return "" }
        return String(decoding: bytes[first...last], as: UTF8.self)
    }

    /// `tchar` of RFC 9110 §5.6.2: what a header name is made of.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
            UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default: false
        }
    }

    /// ASCII case-insensitive comparison with a lower-case name.
    private static func equalsIgnoringCase(_ bytes: UnsafeRawBufferPointer, _ lower: [UInt8]) -> Bool {
        guard bytes.count == lower.count else { return false }
        for i in 0..<lower.count {
            let b = bytes[i]
            if (b >= 0x41 && b <= 0x5A ? b | 0x20 : b) != lower[i] { return false }
        }
        return true
    }

    /// RFC 9112 §6: one way of framing the body, given once.
    func framing() throws(HTTPRefusal) -> Int? {
        if !transferEncodings.isEmpty {
            guard contentLengths.isEmpty else {
                throw .badRequest("a request must not have both Content-Length and Transfer-Encoding")
            }
            guard transferEncodings.count == 1,
                transferEncodings[0].trimmingCharacters(in: .whitespaces).lowercased() == "chunked"
            else {
                throw .notImplemented(
                    "Transfer-Encoding \(transferEncodings.joined(separator: ", ")) is not supported (only chunked)")
            }
            return nil
        }
        guard contentLengths.count <= 1 else { throw .badRequest("Content-Length is given more than once") }
        guard let text = contentLengths.first else { return nil }
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let length = Int(text) else {
            throw .badRequest("Content-Length must be a number of bytes")
        }
        return length
    }
}

private func scanHeader(
    cls: UnsafeMutableRawPointer?, kind: MHD_ValueKind, key: UnsafePointer<CChar>?, keySize: Int,
    value: UnsafePointer<CChar>?, valueSize: Int
) -> MHD_Result {
    guard let cls, let key else { return .YES }
    cls.assumingMemoryBound(to: HeaderScan.self).pointee.offer(key, keySize, value, valueSize)
    return .YES
}
