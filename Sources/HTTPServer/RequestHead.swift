import CMicroHTTPD
import Foundation

/// A request's head checked once, on the first handler call: the target
/// (`RequestTarget`), the bytes of every header, and the framing. Whatever
/// fails is refused before any handler sees the request.
///
/// libmicrohttpd 0.9.75 hands out C strings cut from its read buffer, so a NUL
/// byte sent by the client silently shortens a value. The head is one block
/// in that buffer, in order, where libmicrohttpd writes NULs only over the
/// separators (spaces of the request line, each `:` and each line end); a
/// header whose value is not followed by exactly its line end held a NUL.
struct RequestHead {
    let target: RequestTarget
    /// The captured headers.
    let headers: CapturedHeaders
    /// The declared body length, when `Content-Length` was sent.
    let contentLength: Int?

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
        version: UnsafePointer<CChar>?, line: RawLine?, captured: [(bytes: [UInt8], name: String)]
    ) throws(HTTPRefusal) -> RequestHead {
        // method, one NUL (its space), maybe more spaces, the target, one NUL, the version
        let methodEnd = UInt(bitPattern: method) + UInt(strlen(method))
        guard let line, let url, let version, UInt(bitPattern: url) == line.address, line.address > methodEnd,
            UInt(bitPattern: version) == line.address + UInt(line.target.count) + 1,
            (methodEnd + 1..<line.address).allSatisfy({ UnsafePointer<UInt8>(bitPattern: $0)!.pointee == 0x20 })
        else { throw .badRequest("the request line holds a NUL byte or is malformed") }
        let target = try RequestTarget(raw: line.target)

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
        return RequestHead(target: target, headers: scan.found, contentLength: try scan.framing())
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
    var contentLengths: [String] = []
    var transferEncodings: [String] = []
    var problem: HTTPRefusal?

    mutating func offer(_ key: UnsafePointer<CChar>, _ keySize: Int, _ value: UnsafePointer<CChar>?, _ valueSize: Int) {
        guard problem == nil else { return }
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
        let bytes = UnsafeRawBufferPointer(start: value.map(UnsafeRawPointer.init), count: valueSize)
        if bytes.contains(where: { $0 < 0x20 && $0 != 0x09 || $0 == 0x7F }) {
            problem = .badRequest("a header value holds a control character")
            return
        }
        let name = UnsafeRawBufferPointer(start: key, count: keySize)
        if Self.equalsIgnoringCase(name, Self.contentLength) {
            contentLengths.append(String(decoding: bytes, as: UTF8.self))
        } else if Self.equalsIgnoringCase(name, Self.transferEncoding) {
            transferEncodings.append(String(decoding: bytes, as: UTF8.self))
        } else if let match = captured.first(where: { Self.equalsIgnoringCase(name, $0.bytes) }) {
            found.add(match.name, String(decoding: bytes, as: UTF8.self))
        }
    }

    private static let contentLength = Array("content-length".utf8)
    private static let transferEncoding = Array("transfer-encoding".utf8)

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
