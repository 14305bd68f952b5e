import Foundation
import HTTPTestClient
import Testing

@testable import HTTPServer

/// The server's edge with hostile heads and framings: each is refused at
/// once, with the connection closed, and the server serves on.
@Suite(.serialized) struct HTTPEdgeLiveTests {
    private func startServer(maxBody: Int = 1024) throws -> HTTPServer {
        var config = HTTPServer.Configuration()
        config.port = 0
        config.maxBodyBytes = maxBody
        config.capturedHeaders = ["authorization"]
        let server = HTTPServer(configuration: config, handler: ToyHandler())
        try server.start()
        return server
    }

    /// Sends `raw` on a new connection; the first response, and whether the
    /// server closed the connection after it.
    private func exchange(_ server: HTTPServer, _ raw: String) throws -> (TestHTTPClient.Response, closed: Bool) {
        let client = TestHTTPClient(port: server.port, timeoutSeconds: 3)
        try client.sendRaw(Data(raw.utf8))
        let response = try client.readResponse()
        if !client.isConnected { return (response, true) }
        let next = try? client.request("GET", "/hello")
        return (response, next == nil)
    }

    @Test func refusesNulBytesInTheRequestLineAndHeaders() throws {
        let server = try startServer()
        defer { server.stop() }
        for raw in [
            "GET /hello\0x HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET\0X /hello HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\0\r\n\r\n",
            "GET /echo HTTP/1.1\r\nAuthorization: Bearer t\0\r\nHost: x\r\n\r\n",
            "GET /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\0u\r\n\r\n",
            "GET /echo HTTP/1.1\r\nHost: x\r\nX-Bell: a\u{07}b\r\n\r\n",
            "GET /echo HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n",
            "POST /echo HTTP/1.1\r\nHost: x\r\n: x\r\nContent-Length: 5\r\n\r\nhello",
            "GET /echo HTTP/1.1\r\nHost: x\r\nX(y): a\r\n\r\n",
            "GET /echo HTTP/1.1\r\nHost: x\r\nX\"y: a\r\n\r\n",
        ] {
            let (response, closed) = try exchange(server, raw)
            #expect(response.status == 400, "\(raw.debugDescription)")
            #expect(closed, "\(raw.debugDescription)")
        }
        #expect(try TestHTTPClient.once(port: server.port, "GET", "/hello").status == 200)
    }

    @Test func acceptsOrdinaryHeadsOfEveryShape() throws {
        let server = try startServer()
        defer { server.stop() }
        for raw in [
            "GET /hello HTTP/1.1\nHost: x\nX-A: b\n\n",
            "GET  /hello HTTP/1.1\r\nHost: x\r\nX-Empty:\r\nX-Space: \r\nX-Trail: a  \r\nX-Tab: a\tb\r\n\r\n",
            "GET /hello HTTP/1.0\r\n\r\n",
            "GET /hello?a=%20b HTTP/1.1\r\nHost: x\r\nX-Utf8: caf\u{e9}\r\n\r\n",
            "GET /hello HTTP/1.1\r\nHost: x\r\nX!#$%&'*+-.^_`|~09Az: every tchar\r\n\r\n",
        ] {
            let client = TestHTTPClient(port: server.port, timeoutSeconds: 3)
            try client.sendRaw(Data(raw.utf8))
            #expect(try client.readResponse().status == 200, "\(raw.debugDescription)")
        }
        // Pipelined requests on one connection are each answered.
        let client = TestHTTPClient(port: server.port, timeoutSeconds: 3)
        try client.sendRaw(Data("GET /hello HTTP/1.1\r\nHost: x\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(try client.readResponse().status == 200)
        #expect(try client.readResponse().status == 200)
        #expect(client.isConnected)
    }

    @Test func refusesAmbiguousFramingAtOnceAndCloses() throws {
        let server = try startServer()
        defer { server.stop() }
        let cases: [(String, Int)] = [
            ("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nhi", 400),
            ("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi", 400),
            // RFC 9112 §6.1: both framings is an error; the request after it must not be served.
            (
                "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n",
                400
            ),
            ("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
            ("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
            ("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 501),
        ]
        for (raw, status) in cases {
            let (response, closed) = try exchange(server, raw)
            #expect(response.status == status, "\(raw.debugDescription)")
            #expect(closed, "\(raw.debugDescription)")
        }
        let chunked = try exchange(
            server, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n")
        #expect(chunked.0.status == 200)
        #expect(chunked.0.text == "hi")
    }

    @Test func refusesAChunkedBodyOverTheLimitBeforeItEnds() throws {
        let server = try startServer(maxBody: 1024)
        defer { server.stop() }
        let client = TestHTTPClient(port: server.port, timeoutSeconds: 3)
        let chunk = String(repeating: "y", count: 800)
        let hex = String(chunk.utf8.count, radix: 16)
        try client.sendRaw(Data("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".utf8))
        // Two chunks pass the limit; no last chunk is ever sent.
        try client.sendRaw(Data("\(hex)\r\n\(chunk)\r\n\(hex)\r\n\(chunk)\r\n".utf8))
        let response = try client.readResponse()
        #expect(response.status == 413)
        #expect(response.headers["connection"]?.lowercased() == "close")
        #expect(try TestHTTPClient.once(port: server.port, "GET", "/hello").status == 200)
    }

    @Test func refusesNonCanonicalPathsBeforeTheHandler() throws {
        let server = try startServer()
        defer { server.stop() }
        for path in ["//hello", "/hello/", "/./hello", "/x/../hello", "/hel%00lo", "/%2Fhello", "/hello?a=%00"] {
            let (response, closed) = try exchange(server, "GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(response.status == 400, "\(path)")
            #expect(closed, "\(path)")
        }
        // The handler sees the decoded, canonical path.
        #expect(try TestHTTPClient.once(port: server.port, "GET", "/hel%6Co").status == 200)
    }

    /// What RFC 9110/9112 refuse, refused at once and closed.
    @Test func refusesWhatTheRFCsRefuse() throws {
        let server = try startServer()
        defer { server.stop() }
        for raw in [
            "GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n",
            "GET /hello HTTP/1.1\r\n\r\n",
            "GET /hello HTTP/1.1\r\nX-A: b\r\n\r\n",
            "GET /hello HTTP/1.1\r\nHost: 127.0.0.1:80@evil.example\r\n\r\n",
            "GET /hello HTTP/1.1\r\nHost: a b\r\n\r\n",
            "GET /hello HTTP/1.1\r\nHost: x/y\r\n\r\n",
            "GET /hello HTTP/1.1\r\nHost: x:8o\r\n\r\n",
            "GET /hello HTTP/1.1\r\nHost: [::1\r\n\r\n",
            "GET /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\r\nAuthorization: Bearer b\r\n\r\n",
            "GET /hello HTTP/1.1\r\nHost: x\r\nX-A : b\r\n\r\n",
            "GET /hello HTTP/1.1\r\nHost: x\r\nX-A\t: b\r\n\r\n",
            "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
            "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\nhi\r\n0\r\n\r\n",
            "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2;x=y\nhi\r\n0\r\n\r\n",
            "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\n2\r\nhi\r\n0\r\n\r\n",
        ] {
            let (response, closed) = try exchange(server, raw)
            #expect(response.status == 400, "\(raw.debugDescription)")
            #expect(closed, "\(raw.debugDescription)")
        }
        for host in ["127.0.0.1", "  127.0.0.1 ", "\t[::1]:8080\t", "", "a.example:", "xn--e1a.example", "a%41"] {
            let (response, _) = try exchange(server, "GET /hello HTTP/1.1\r\nHost:\(host)\r\n\r\n")
            #expect(response.status == 200, "\(host.debugDescription)")
        }
        // Values lose the whitespace around them.
        let (echoed, _) = try exchange(server, "GET /echo HTTP/1.1\r\nHost: x\r\nAuthorization: \t Bearer t \r\n\r\n")
        #expect(echoed.headers["x-auth"] == "Bearer t")
        #expect(try exchange(server, "GET /hello HTTP/1.0\r\n\r\n").0.status == 200)
    }

    /// A chunk that says it is larger than the body may be is refused when
    /// its size line arrives, not when the body timeout ends the wait.
    @Test func refusesAnOversizedChunkAtOnce() throws {
        let server = try startServer(maxBody: 1024)
        defer { server.stop() }
        for size in ["FFFFFFFFFFFFFFFF", "401", "10000", "0000000000000401;ext=1"] {
            let client = TestHTTPClient(port: server.port, timeoutSeconds: 3)
            let start = Date()
            try client.sendRaw(
                Data("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\(size)\r\nhello".utf8))
            #expect(try client.readResponse().status == 413, "\(size)")
            #expect(Date().timeIntervalSince(start) < 1, "\(size)")
        }
        // Up to the limit, in one chunk or several, is fine.
        let body = String(repeating: "z", count: 1024)
        let one = try exchange(
            server, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n\(body)\r\n0\r\n\r\n")
        #expect(one.0.status == 200)
        let two = try exchange(
            server,
            "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n200\r\n\(body.prefix(512))\r\n200;a\r\n\(body.prefix(512))\r\n0\r\n\r\n"
        )
        #expect(two.0.status == 200)
        #expect(two.0.body.count == 1024)
    }
}
