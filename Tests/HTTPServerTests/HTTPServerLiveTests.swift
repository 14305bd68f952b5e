import Foundation
import HTTPTestClient
import Synchronization
import Testing

@testable import HTTPServer
@testable import Locking

/// A handler for exercising the server: answers at once, echoes, or defers.
final class ToyHandler: HTTPHandler {
    /// Deferred requests parked on `/park` until `release()`.
    let parked = Locked<[CheckedContinuation<Void, Never>]>([])
    /// Parked `/hold` requests whose task was cancelled, and answers undone.
    let cancelled = Atomic<Int>(0)
    let undone = Atomic<Int>(0)
    private let holds = Locked<[Int: CheckedContinuation<Void, Never>]>([:])
    private let nextHold = Atomic<Int>(0)

    func handle(_ request: HTTPRequest) -> HTTPHandlerResult {
        switch request.path {
        case "/hello":
            return .respond(HTTPResponse(status: 200, contentType: "text/plain", text: "hello"))
        case "/echo":
            let query = request.query.map { "\($0.name)=\($0.value)" }.joined(separator: "&")
            return .respond(
                HTTPResponse(
                    status: 200,
                    headers: [
                        ("Content-Type", "application/octet-stream"), ("X-Query", query),
                        ("X-Auth", request.header("Authorization") ?? "-"),
                    ],
                    body: Array(request.body)))
        case "/later":
            return .deferred {
                try? await Task.sleep(for: .milliseconds(20))
                return HTTPResponse(status: 202, contentType: "text/plain", text: "later")
            }
        case "/handed":
            // Answered from a Dispatch thread, as a Redis connection's queue answers: no task.
            return .answer(
                .handedBack { answer in
                    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(5)) {
                        answer(.success(HTTPResponse(status: 202, contentType: "text/plain", text: "handed")))
                    }
                })
        case "/handed-at-once":
            // Answered before the handler returns.
            return .answer(
                .handedBack { answer in
                    answer(.success(HTTPResponse(status: 200, contentType: "text/plain", text: "at once")))
                })
        case "/park":
            return .deferred { [self] in
                await withCheckedContinuation { c in parked.withLock { $0.append(c) } }
                return HTTPResponse(status: 200, contentType: "text/plain", text: "released")
            }
        case "/hold":
            // Parks until released or its own task is cancelled; its answer has an undo hook.
            let id = nextHold.add(1, ordering: .relaxed).newValue
            return .deferred { [self] in
                await withTaskCancellationHandler {
                    await withCheckedContinuation { c in
                        holds.withLock { if Task.isCancelled { c.resume() } else { $0[id] = c } }
                    }
                } onCancel: {
                    cancelled.add(1, ordering: .relaxed)
                    holds.withLock { $0.removeValue(forKey: id) }?.resume()
                }
                var response = HTTPResponse(status: 200, contentType: "text/plain", text: "held")
                response.undelivered = { [self] in undone.add(1, ordering: .relaxed) }
                return response
            }
        default:
            return .respond(HTTPResponse(status: 404))
        }
    }

    func refusal(_ refusal: HTTPRefusal) -> HTTPResponse {
        guard case .payloadTooLarge(let limit) = refusal else { return HTTPResponse(status: refusal.status) }
        return HTTPResponse(status: 413, body: Array("too large: \(limit)".utf8))
    }

    var parkedCount: Int { parked.withLock { $0.count } + holds.withLock { $0.count } }

    func release() {
        let all = parked.withLock { p in
            defer { p.removeAll() }
            return p
        }
        for c in all { c.resume() }
        let held = holds.withLock { h in
            defer { h.removeAll() }
            return h.values
        }
        for c in held { c.resume() }
    }
}

@Suite(.serialized) struct HTTPServerLiveTests {
    private func startServer(maxBody: Int = 1024, connectionMemory: Int? = nil) throws -> (HTTPServer, ToyHandler) {
        var config = HTTPServer.Configuration()
        config.port = 0
        config.maxBodyBytes = maxBody
        if let connectionMemory { config.connectionMemoryLimit = connectionMemory }
        config.capturedHeaders = ["authorization"]
        let handler = ToyHandler()
        let server = HTTPServer(configuration: config, handler: handler)
        try server.start()
        return (server, handler)
    }

    @Test func bindsPortZeroAndKeepsConnectionsAlive() throws {
        let (server, _) = try startServer()
        defer { server.stop() }
        #expect(server.port != 0)
        let client = TestHTTPClient(port: server.port)
        for _ in 0..<3 {
            let r = try client.request("GET", "/hello")
            #expect(r.status == 200)
            #expect(r.text == "hello")
            #expect(r.headers["connection"]?.lowercased() != "close")
            #expect(client.isConnected)
        }
    }

    @Test func deliversBodyQueryAndCapturedHeaders() throws {
        let (server, _) = try startServer()
        defer { server.stop() }
        let body = String(repeating: "x", count: 1000)
        let r = try TestHTTPClient.once(
            port: server.port, "POST", "/echo?a=1&b=two%20words", body: body,
            headers: ["Authorization": "Bearer t"])
        #expect(r.status == 200)
        #expect(r.text == body)
        #expect(r.headers["x-query"] == "a=1&b=two words")
        #expect(r.headers["x-auth"] == "Bearer t")
        // Header names match in any case; headers not captured are not passed on.
        let client = TestHTTPClient(port: server.port)
        try client.sendRaw(
            Data(
                "POST /echo HTTP/1.1\r\nHost: x\r\nX-Other: no\r\nAUTHORIZATION: Bearer u\r\nContent-Length: 2\r\n\r\nhi"
                    .utf8))
        let upper = try client.readResponse()
        #expect(upper.status == 200)
        #expect(upper.headers["x-auth"] == "Bearer u")
        let none = try TestHTTPClient.once(
            port: server.port, "POST", "/echo", body: "x", headers: ["Authorizatio": "Bearer v"])
        #expect(none.headers["x-auth"] == "-")
    }

    @Test func refusesDeclaredOversizeBodyWithoutReadingIt() throws {
        let (server, _) = try startServer(maxBody: 1024)
        defer { server.stop() }
        let client = TestHTTPClient(port: server.port)
        // Announce 10 MB but send only the head: the answer must not wait for the body.
        try client.sendRaw(Data("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n".utf8))
        let r = try client.readResponse()
        #expect(r.status == 413)
        #expect(r.text == "too large: 1024")
        // The server goes on serving.
        #expect(try TestHTTPClient.once(port: server.port, "GET", "/hello").status == 200)
    }

    @Test func refusesChunkedOversizeBody() throws {
        let (server, _) = try startServer(maxBody: 1024)
        defer { server.stop() }
        let client = TestHTTPClient(port: server.port)
        let chunk = String(repeating: "y", count: 800)
        let hex = String(chunk.utf8.count, radix: 16)
        try client.sendRaw(Data("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".utf8))
        try client.sendRaw(Data("\(hex)\r\n\(chunk)\r\n\(hex)\r\n\(chunk)\r\n0\r\n\r\n".utf8))
        #expect(try client.readResponse().status == 413)
        // A body just under the limit passes.
        let ok = try TestHTTPClient.once(port: server.port, "POST", "/echo", body: String(repeating: "z", count: 1024))
        #expect(ok.status == 200)
        #expect(ok.body.count == 1024)
    }

    @Test func connectionMemoryLimitRefusesOversizeHeadersWith431() throws {
        let (server, handler) = try startServer(maxBody: 65_536, connectionMemory: 4096)
        defer { server.stop() }
        let client = TestHTTPClient(port: server.port)
        let fits = try client.request("GET", "/hello", headers: ["X-Pad": String(repeating: "a", count: 2000)])
        #expect(fits.status == 200)
        #expect(client.isConnected)
        // Headers larger than the connection's memory: libmicrohttpd answers 431 itself.
        let big = try TestHTTPClient.once(
            port: server.port, "GET", "/hello",
            headers: ["X-Pad": String(repeating: "a", count: 6000)])
        #expect(big.status == 431)
        // Bodies stream through the small pool; responses are not copied into it.
        let body = String(repeating: "b", count: 60_000)
        let echoed = try client.request("POST", "/echo", body: body)
        #expect(echoed.status == 200)
        #expect(echoed.body.count == 60_000)
        // A parked request with sizeable headers is answered on the same connection.
        let parked = TestHTTPClient(port: server.port)
        try parked.sendRaw(
            Data("GET /park HTTP/1.1\r\nHost: x\r\nX-Pad: \(String(repeating: "p", count: 2000))\r\n\r\n".utf8))
        let deadline = Date().addingTimeInterval(5)
        while handler.parkedCount < 1 && Date() < deadline { usleep(1000) }
        handler.release()
        let released = try parked.readResponse()
        #expect(released.status == 200)
        #expect(released.text == "released")
        #expect(try parked.request("GET", "/hello").status == 200)
    }

    @Test func deferredAnswersKeepTheConnection() throws {
        let (server, _) = try startServer()
        defer { server.stop() }
        let client = TestHTTPClient(port: server.port)
        for _ in 0..<3 {
            let r = try client.request("GET", "/later")
            #expect(r.status == 202)
            #expect(r.text == "later")
        }
        #expect(client.isConnected)
    }

    @Test func handedOverAnswersKeepTheConnection() throws {
        let (server, _) = try startServer()
        defer { server.stop() }
        let client = TestHTTPClient(port: server.port)
        for path in ["/handed", "/handed-at-once", "/handed", "/hello"] {
            let r = try client.request("GET", path)
            #expect(r.status == (path == "/handed" ? 202 : 200))
            #expect(r.text == ["/handed": "handed", "/handed-at-once": "at once", "/hello": "hello"][path])
        }
        #expect(client.isConnected)
        #expect(server.suspendedRequests == 0)
    }

    @Test func parkedRequestsHoldNoServerThread() throws {
        let (server, handler) = try startServer()
        defer { server.stop() }
        // Far more parked requests than server threads (2): if a parked request
        // held a thread, /hello below could not be answered.
        let count = 200
        let results = Locked<[Int]>([])
        let group = DispatchGroup()
        for _ in 0..<count {
            group.enter()
            Thread {
                let status = (try? TestHTTPClient.once(port: server.port, "GET", "/park").status) ?? -1
                results.withLock { $0.append(status) }
                group.leave()
            }.start()
        }
        let deadline = Date().addingTimeInterval(10)
        while handler.parkedCount < count && Date() < deadline { usleep(10_000) }
        #expect(handler.parkedCount == count)
        #expect(server.suspendedRequests == count)
        #expect(try TestHTTPClient.once(port: server.port, "GET", "/hello").status == 200)
        handler.release()
        #expect(group.wait(timeout: .now() + 10) == .success)
        #expect(results.withLock { $0 }.allSatisfy { $0 == 200 })
        #expect(results.withLock { $0.count } == count)
        #expect(server.suspendedRequests == 0)
    }

    @Test func quiesceDrainsThenStops() throws {
        let (server, handler) = try startServer()
        let port = server.port
        let done = DispatchSemaphore(value: 0)
        let status = Locked(0)
        Thread {
            status.withLock { $0 = (try? TestHTTPClient.once(port: port, "GET", "/park").status) ?? -1 }
            done.signal()
        }.start()
        let deadline = Date().addingTimeInterval(5)
        while handler.parkedCount < 1 && Date() < deadline { usleep(5_000) }
        server.quiesce()
        // New connections are refused once quiesced.
        #expect(throws: (any Error).self) { try TestHTTPClient.once(port: port, "GET", "/hello") }
        #expect(!server.waitUntilIdle(deadline: Date().addingTimeInterval(0.1)))
        handler.release()
        #expect(server.waitUntilIdle(deadline: Date().addingTimeInterval(5)))
        #expect(done.wait(timeout: .now() + 5) == .success)
        #expect(status.withLock { $0 } == 200)
        server.stop()
    }
}
