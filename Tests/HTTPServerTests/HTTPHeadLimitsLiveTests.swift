import Foundation
import HTTPTestClient
import Testing

@testable import HTTPServer

/// Every head answers at once, whatever its shape. Before,
/// about 116 query arguments filled libmicrohttpd's per-connection pool while
/// it parsed them, and it then waited for the head timeout without a word;
/// heads that left too little pool for the answer's head were closed unanswered.
@Suite(.serialized) struct HTTPHeadLimitsLiveTests {
    private func startServer(connectionMemory: Int = 8192) throws -> HTTPServer {
        var config = HTTPServer.Configuration()
        config.port = 0
        config.connectionMemoryLimit = connectionMemory
        config.capturedHeaders = ["authorization"]
        let server = HTTPServer(configuration: config, handler: ToyHandler())
        try server.start()
        return server
    }

    /// The status of the answer to `raw` on a fresh connection, which must
    /// come within a second.
    private func answer(_ server: HTTPServer, _ raw: String) throws -> Int {
        let client = TestHTTPClient(port: server.port, timeoutSeconds: 3)
        let start = Date()
        try client.sendRaw(Data(raw.utf8))
        let status = try client.readResponse().status
        #expect(Date().timeIntervalSince(start) < 1, "\(raw.prefix(80).debugDescription)")
        return status
    }

    @Test func manyQueryArgumentsAnswerAtOnce() throws {
        let server = try startServer()
        defer { server.stop() }
        for count in [1, 50, 100, 101, 116, 200, 500, 1000, 1500, 3000] {
            let query = Array(repeating: "a", count: count).joined(separator: "&")
            let status = try answer(server, "GET /hello?\(query) HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(status == (count <= 100 ? 200 : 414), "\(count) arguments")
        }
        // A query hidden behind a NUL is refused before it can fill the pool.
        let hidden = Array(repeating: "a", count: 400).joined(separator: "&")
        #expect(try answer(server, "GET /hello\0x?\(hidden) HTTP/1.1\r\nHost: x\r\n\r\n") == 400)
        #expect(try TestHTTPClient.once(port: server.port, "GET", "/hello").status == 200)
    }

    @Test func everyHeadShapeAnswersAtOnce() throws {
        let server = try startServer()
        defer { server.stop() }
        // 64 bytes of pool per line: with 8 KiB, about 90 lines fit beside
        // their answer, below max_headers (100).
        var fitted = 0
        for count in [10, 50, 80, 85, 90, 95, 99, 100, 101, 150, 300, 1000] {
            let headers = (0..<count).map { "X-\($0): \($0)\r\n" }.joined()
            let status = try answer(server, "GET /hello HTTP/1.1\r\nHost: x\r\n\(headers)\r\n")
            #expect(status == 200 || status == 431 && count > 50, "\(count) headers")
            if status == 200 { fitted = count }
        }
        #expect(fitted >= 80)
        // One long value, byte by byte up to where the pool is full: each
        // answered, 200 while it and its answer fit and 431 after.
        var statuses: Set<Int> = []
        for length in stride(from: 6000, through: 8400, by: 16) {
            let value = String(repeating: "v", count: length)
            statuses.insert(try answer(server, "GET /hello HTTP/1.1\r\nHost: x\r\nX-Long: \(value)\r\n\r\n"))
        }
        #expect(statuses == [200, 431])
        for count in [10, 100, 400, 1200, 3000] {
            let cookies = (0..<count).map { "c\($0)=1" }.joined(separator: "; ")
            let status = try answer(server, "GET /hello HTTP/1.1\r\nHost: x\r\nCookie: \(cookies)\r\n\r\n")
            #expect([200, 431].contains(status), "\(count) cookies")
        }
        #expect(try TestHTTPClient.once(port: server.port, "GET", "/hello").status == 200)
    }

    /// With room in the pool, `maxHeaders` is the bound.
    @Test func theHeaderCountIsBounded() throws {
        let server = try startServer(connectionMemory: 64 * 1024)
        defer { server.stop() }
        for count in [98, 99, 100, 150] {
            let headers = (0..<count).map { "X-\($0): \($0)\r\n" }.joined()
            let status = try answer(server, "GET /hello HTTP/1.1\r\nHost: x\r\n\(headers)\r\n")
            // Host is one of the lines.
            #expect(status == (count + 1 <= 100 ? 200 : 431), "\(count) headers")
        }
    }
}
