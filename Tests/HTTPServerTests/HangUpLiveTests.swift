import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import HTTPServer

/// The wiring of hang-up detection: a parked request whose client leaves is
/// cancelled and its connection freed at once; an answer it cannot take is undone.
@Suite(.serialized) struct HangUpLiveTests {
    private func startServer() throws -> (HTTPServer, ToyHandler) {
        var config = HTTPServer.Configuration()
        config.port = 0
        let handler = ToyHandler()
        let server = HTTPServer(configuration: config, handler: handler)
        try server.start()
        return (server, handler)
    }

    /// Waits up to `seconds` for `condition`.
    private func eventually(within seconds: Double = 2, _ condition: () -> Bool) -> Bool {
        pollBlocking(seconds, condition)
    }

    @Test func aHangUpCancelsTheParkedWorkAndFreesTheConnection() throws {
        let (server, handler) = try startServer()
        defer { server.stop() }
        var clients: [TestHTTPClient] = []
        for _ in 0..<20 {
            let client = TestHTTPClient(port: server.port)
            try client.sendRaw(Data("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            clients.append(client)
        }
        #expect(eventually { handler.parkedCount == 20 })
        #expect(server.suspendedRequests == 20)
        for client in clients { client.disconnect() }
        let started = Date()
        #expect(eventually { server.suspendedRequests == 0 && server.activeRequests == 0 })
        #expect(Date().timeIntervalSince(started) < 2)
        #expect(handler.cancelled.load(ordering: .relaxed) == 20)
        // Each answer was produced after its client left: each is undone.
        #expect(eventually { handler.undone.load(ordering: .relaxed) == 20 })
        #expect(try TestHTTPClient.once(port: server.port, "GET", "/hello").status == 200)
    }

    @Test func aClientThatStaysGetsItsAnswerAndNothingIsUndone() throws {
        let (server, handler) = try startServer()
        defer { server.stop() }
        let client = TestHTTPClient(port: server.port)
        try client.sendRaw(Data("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(eventually { handler.parkedCount == 1 })
        handler.release()
        let response = try client.readResponse()
        #expect(response.status == 200)
        #expect(response.text == "held")
        #expect(handler.cancelled.load(ordering: .relaxed) == 0)
        #expect(handler.undone.load(ordering: .relaxed) == 0)
        // The connection is kept and serves the next request.
        #expect(try client.request("GET", "/hello").status == 200)
    }

    @Test func aPipelinedRequestIsNotTakenForAHangUp() throws {
        let (server, handler) = try startServer()
        defer { server.stop() }
        let client = TestHTTPClient(port: server.port)
        try client.sendRaw(Data("GET /hold HTTP/1.1\r\nHost: x\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(eventually { handler.parkedCount == 1 })
        usleep(100_000)
        #expect(handler.cancelled.load(ordering: .relaxed) == 0)
        handler.release()
        #expect(try client.readResponse().status == 200)
        #expect(try client.readResponse().status == 200)
    }
}
