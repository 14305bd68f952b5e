/// The chunk-size lines of a chunked body, which libmicrohttpd 0.9.75 parses
/// leniently (a bare LF ends a line) and never shows: it hands the handler
/// each chunk's data alone, and waits for a chunk of any size up to 2^64 − 1.
///
/// While the body arrives, the read buffer starts where the head ended and
/// data is handed out in place, so a line that arrived with its chunk's data
/// lies just before the data, after the previous chunk's line end. A line
/// that came in an earlier read is gone (overwritten): that chunk goes
/// unchecked, and the body's byte count still stops it at the limit.
struct ChunkFraming {
    /// Where the head ended: the read buffer's start.
    let headEnd: UInt
    /// The connection's pool size: data further than this from `headEnd` is
    /// not in the same buffer, and nothing is read.
    let span: Int

    enum Line: Equatable {
        /// The line came in an earlier read (or this is more of a chunk).
        case unseen
        /// A line end that is a bare LF (RFC 9112 §7.1 asks for CRLF).
        case malformed(String)
        /// The chunk's declared size.
        case declared(UInt64)
    }

    /// The chunk-size line before the chunk data at `data`.
    func line(before data: UInt) -> Line {
        guard data > headEnd, data - headEnd <= UInt(span), let start = UnsafePointer<UInt8>(bitPattern: headEnd) else {
            return .unseen
        }
        return Self.line(in: UnsafeBufferPointer(start: start, count: Int(data - headEnd)))
    }

    /// The line at the end of `bytes` (the read buffer up to the data).
    static func line(in bytes: UnsafeBufferPointer<UInt8>) -> Line {
        let lf = UInt8(ascii: "\n")
        let cr = UInt8(ascii: "\r")
        guard let last = bytes.indices.last, bytes[last] == lf else { return .unseen }
        guard last > 0, bytes[last - 1] == cr else {
            return .malformed("a chunk-size line must end in CRLF, not a bare LF")
        }
        var start = last - 1
        while start > 0 && bytes[start - 1] != lf { start -= 1 }
        // The previous chunk's data ends in CRLF: libmicrohttpd takes the two
        // together, so a lone LF first in the buffer was a bare one.
        if start > 0 && (start == 1 || bytes[start - 2] != cr) {
            return .malformed("chunk data must end in CRLF, not a bare LF")
        }
        var size: UInt64 = 0
        for byte in bytes[start..<(last - 1)] {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return .declared(size)
            }
            let (shifted, overflow) = size.multipliedReportingOverflow(by: 16)
            guard !overflow else { return .declared(.max) }
            size = shifted | UInt64(digit)
        }
        return .declared(size)
    }
}
