import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import HTTPServer
@testable import Locking

/// Answers `/stream` with a new `HTTPStream` the test writes to.
final class StreamHandler: HTTPHandler {
    let bufferLimit: Int
    let streams = Locked<[HTTPStream]>([])

    init(bufferLimit: Int) { self.bufferLimit = bufferLimit }

    func handle(_ request: HTTPRequest) -> HTTPHandlerResult {
        guard request.path == "/stream" else { return .respond(HTTPResponse(status: 404)) }
        let stream = HTTPStream(status: 200, headers: [("Content-Type", "text/plain")], bufferLimit: bufferLimit)
        streams.withLock { $0.append(stream) }
        return .stream(stream)
    }

    /// The `n`th stream opened, waiting up to 5 s for it.
    func stream(_ n: Int = 0) throws -> HTTPStream {
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline {
            if let s = streams.withLock({ $0.count > n ? $0[n] : nil }) { return s }
            usleep(2_000)
        }
        throw StreamTestError.timeout("stream \(n) never opened")
    }
}

enum StreamTestError: Error { case timeout(String) }

/// Polls `condition` for up to `seconds`.
func eventually(_ seconds: Double = 5, _ condition: () -> Bool) -> Bool {
    pollBlocking(seconds, condition)
}

@Suite(.serialized) struct HTTPStreamLiveTests {
    private func start(bufferLimit: Int = 1 << 20) throws -> (HTTPServer, StreamHandler) {
        var config = HTTPServer.Configuration()
        config.port = 0
        let handler = StreamHandler(bufferLimit: bufferLimit)
        let server = HTTPServer(configuration: config, handler: handler)
        try server.start()
        return (server, handler)
    }

    private func open(_ server: HTTPServer) throws -> TestHTTPClient {
        let client = TestHTTPClient(port: server.port)
        try client.sendRaw(Data("GET /stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
        return client
    }

    @Test func streamsWritesAsTheyComeAndSuspendsInBetween() throws {
        let (server, handler) = try start()
        defer { server.stop() }
        let client = try open(server)
        let stream = try handler.stream()
        #expect(stream.write(Array("first\n".utf8)))
        let head = try client.readResponse(headOnly: true)
        #expect(head.status == 200)
        #expect(head.headers["content-type"] == "text/plain")
        #expect(head.headers["transfer-encoding"]?.lowercased() == "chunked")
        #expect(try client.readChunk() == Data("first\n".utf8))
        // Nothing buffered: the connection is parked, no thread spins.
        #expect(eventually { server.suspendedRequests == 1 })
        #expect(stream.write(Array("second\n".utf8)))
        #expect(try client.readChunk() == Data("second\n".utf8))
        let ended = Locked<HTTPStream.EndReason?>(nil)
        stream.onEnd { reason in ended.withLock { $0 = reason } }
        stream.finish()
        #expect(try client.readChunk() == nil)
        #expect(eventually { ended.withLock { $0 } == .finished })
        #expect(eventually { server.openStreams == 0 && server.suspendedRequests == 0 })
        #expect(!stream.write(Array("late\n".utf8)))
    }

    @Test func aClientThatNeverReadsIsDroppedAtTheBufferLimit() throws {
        let (server, handler) = try start(bufferLimit: 64 * 1024)
        defer { server.stop() }
        let client = try open(server)
        let stream = try handler.stream()
        let ended = Locked<HTTPStream.EndReason?>(nil)
        stream.onEnd { reason in ended.withLock { $0 = reason } }
        // The kernel's socket buffers take a few MB first; then the stream's
        // buffer fills and the stream ends instead of growing.
        let line = Array(String(repeating: "x", count: 1023).utf8) + [10]
        var writes = 0
        while stream.write(line) && writes < 200_000 {
            writes += 1
            if writes % 256 == 0 { usleep(1_000) }
        }
        #expect(writes < 200_000, "the stream never refused a write")
        #expect(stream.bufferedBytes == 0)
        #expect(eventually { ended.withLock { $0 } == .dropped })
        #expect(eventually { server.openStreams == 0 })
        client.disconnect()
    }

    @Test func quiesceEndsOpenStreamsSoTheServerCanStop() throws {
        let (server, handler) = try start()
        let clients = try (0..<3).map { _ in try open(server) }
        for n in 0..<3 { _ = try handler.stream(n) }
        #expect(eventually { server.openStreams == 3 })
        #expect(eventually { server.suspendedRequests == 3 })
        server.quiesce()
        for client in clients {
            #expect(try client.readResponse(headOnly: true).status == 200)
            #expect(try client.readChunk() == nil)
        }
        #expect(server.waitUntilIdle(deadline: Date().addingTimeInterval(5)))
        #expect(server.suspendedRequests == 0)
        server.stop()
    }

    @Test func aClientThatLeavesEndsItsStreamAtTheNextWrite() throws {
        let (server, handler) = try start()
        defer { server.stop() }
        let client = try open(server)
        let stream = try handler.stream()
        let ended = Locked<HTTPStream.EndReason?>(nil)
        stream.onEnd { reason in ended.withLock { $0 = reason } }
        #expect(eventually { server.suspendedRequests == 1 })
        client.disconnect()
        // A suspended connection is out of the event loop: the hang-up
        // watcher (or else the next write's failed send) ends it.
        #expect(
            eventually {
                stream.write(Array("ping\n".utf8))
                return ended.withLock { $0 } == .disconnected
            })
        #expect(eventually { server.openStreams == 0 })
    }
}
