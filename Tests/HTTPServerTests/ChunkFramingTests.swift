import Testing

@testable import HTTPServer

/// `ChunkFraming` reads the line before a chunk's data; `RequestHead`
/// checks `Host`. Both without a network.
struct ChunkFramingTests {
    private func line(_ text: String) -> ChunkFraming.Line {
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBufferPointer { ChunkFraming.line(in: $0) }
    }

    @Test func readsTheSizeLineBeforeTheData() {
        #expect(line("") == .unseen)
        #expect(line("1a\r\n") == .declared(26))
        #expect(line("0000000000000401;ext=\"x\"\r\n") == .declared(1025))
        #expect(line("FFFFFFFFFFFFFFFF\r\n") == .declared(.max))
        // The previous chunk's data and its CRLF before the line.
        #expect(line("\r\n5\r\n") == .declared(5))
        #expect(line("abc\r\n10\r\n") == .declared(16))
        // More of a chunk (its line came in an earlier read): nothing to read.
        #expect(line("abc") == .unseen)
    }

    @Test func refusesBareLineFeeds() {
        for text in ["5\n", "5;a\n", "\n5\r\n", "abc\n5\r\n"] {
            guard case .malformed = line(text) else {
                Issue.record("\(text.debugDescription) was not refused")
                continue
            }
        }
    }

    @Test func hostIsAnAuthority() {
        let good = [
            "127.0.0.1", "localhost:8080", "[::1]", "[::1]:80", "", "a.example:", "a%41", "x-y_z~!$&'()*+,;=", ":80",
            "%41%42:1", "[a:B.0]:",
        ]
        for good in good {
            #expect(RequestHead.isAuthority(good), "\(good)")
        }
        let bad = [
            "127.0.0.1:80@evil.example", "a b", "x/y", "x?y", "x#y", "x:8o", "x:1:2", "[::1", "[]", "[::1]x", "a%4",
            "a%4:1", "a%:1", "%zz", "[::g]", "[::1]:8x", "[::1]]", "\u{e9}", "x\u{0}", "x:-1",
        ]
        for bad in bad {
            #expect(!RequestHead.isAuthority(bad), "\(bad)")
        }
    }
}
