import Foundation
import HTTPTestClient
import TestSupport

@testable import HTTPServer
@testable import Locking
@testable import UsherAPI
@testable import UsherCore

/// The app without sockets: requests go straight to `UsherApp.handle`, and
/// the tester plays the server's part for each kind of answer. An answer at
/// once is returned; a deferred one runs as a task on a Dispatch queue of
/// the tester's own (as the server runs it off the cooperative pool); a
/// handed-over one is awaited; a stream is read from its buffer. A client
/// that hangs up is played with `park(...).hangUp()`: the work is cancelled
/// and an answer that comes anyway is undone, as the server does.
///
/// It has the calls of `LiveServer` (`call`, `callAsync`, `inBackground`,
/// `untilParked`, `shutdown`), so a test body runs unchanged on either; the
/// HTTP layer's own behaviour (framing, keep-alive, limits on the head) is
/// tested live.
final class AppTester: Sendable {
    let app: UsherApp
    /// Only for configs with a `redis` block: `Service.start` is what starts
    /// the app's Redis client; requests still bypass its sockets.
    private let server: HTTPServer?
    private let http: HTTPServer.Configuration
    private let parked = Locked(0)
    private static let executor = TesterExecutor()

    /// The app with `config` (JSON text of a config file).
    convenience init(_ configJSON: String = "{}", clock: any UsherClock = SystemClock()) throws {
        try self.init(config: try UsherConfig.parse(try JSONValue.parse(configJSON)), clock: clock)
    }

    /// The app with a loaded config.
    init(config: UsherConfig, clock: any UsherClock = SystemClock()) throws {
        var config = config
        config.port = 0
        config.logLevel = .error
        app = try UsherApp(config: config, clock: clock)
        http = Service.serverConfiguration(for: config)
        server = config.redis == nil ? nil : try Service.start(app)
    }

    /// Ends as on SIGTERM, so no answer is left parked.
    deinit {
        if let server {
            _ = Service.shutdown(app, server)
        } else {
            app.beginShutdown()
        }
    }

    /// Answers that have not come yet (the server's suspended requests).
    var suspendedRequests: Int { parked.withLock { $0 } }

    // MARK: - Requests

    /// One request, answered as a client would see it. Blocks the calling
    /// thread until a deferred answer comes (as `LiveServer.call` blocks on
    /// its socket); the answer's work does not need that thread.
    func call(_ method: String, _ path: String, _ body: String? = nil, headers: [String: String] = [:]) throws
        -> TestHTTPClient.Response
    {
        let done = DispatchSemaphore(value: 0)
        let answer = Locked<TestHTTPClient.Response?>(nil)
        let exchange = try send(method, path, body, headers: headers)
        exchange.whenAnswered { response in
            answer.withLock { $0 = response }
            done.signal()
        }
        guard done.wait(timeout: .now() + 10) == .success, let response = answer.withLock({ $0 }) else {
            throw TestHTTPClient.ClientError(description: "\(method) \(path): no answer within 10 s")
        }
        return response
    }

    /// `call` from async code, without holding a cooperative thread.
    func callAsync(_ method: String, _ path: String, _ body: String? = nil) async throws -> TestHTTPClient.Response {
        try await callAsync(method, path, body, headers: [:])
    }

    /// `call` with headers from async code.
    func callAsync(_ method: String, _ path: String, _ body: String?, headers: [String: String])
        async throws -> TestHTTPClient.Response
    {
        let exchange = try send(method, path, body, headers: headers)
        return await withCheckedContinuation { continuation in
            exchange.whenAnswered { continuation.resume(returning: $0) }
        }
    }

    /// Runs `request` on its own thread and answers a function that collects
    /// its response, waiting at most 5 s for it.
    func inBackground(_ request: @escaping @Sendable () throws -> TestHTTPClient.Response)
        -> @Sendable () -> TestHTTPClient.Response?
    {
        onBackgroundThread(request)
    }

    /// Waits (at most 2.5 s) until `n` answers are outstanding.
    func untilParked(_ n: Int) {
        _ = pollBlocking(2.5) { suspendedRequests >= n }
    }

    /// Waits (at most 5 s) until `n` answers are outstanding, from async code.
    func untilParkedAsync(_ n: Int) async {
        _ = await poll(5) { suspendedRequests >= n }
    }

    /// A request whose client can hang up before its answer comes.
    func park(_ method: String, _ path: String, _ body: String? = nil, headers: [String: String] = [:]) throws
        -> Exchange
    {
        try send(method, path, body, headers: headers)
    }

    /// Graceful shutdown as on SIGTERM: true when every outstanding answer
    /// came within the grace period.
    func shutdown() -> Bool {
        if let server { return Service.shutdown(app, server) }
        app.beginShutdown()
        return pollBlocking(app.config.shutdownGraceSeconds, every: 1) { suspendedRequests == 0 }
    }

    // MARK: - The server's part

    /// Hands the request to the app as the server would, after the checks
    /// the server makes on the request target and the body's size.
    private func send(_ method: String, _ path: String, _ body: String?, headers: [String: String]) throws
        -> Exchange
    {
        let exchange = Exchange(method: method)
        // The headers the server captures; `Host` as `TestHTTPClient` sends it.
        var captured = CapturedHeaders()
        for (name, value) in headers where http.capturedHeaders.contains(name.lowercased()) {
            captured.add(name.lowercased(), value)
        }
        captured.add("host", "127.0.0.1")
        let data = Data((body ?? "").utf8)
        let target: RequestTarget
        do throws(HTTPRefusal) {
            target = try RequestTarget(raw: Array(path.utf8), maxQueryArguments: http.maxQueryArguments)
        } catch {
            exchange.answer(app.refusal(error), closing: true)
            return exchange
        }
        if data.count > http.maxBodyBytes {
            exchange.answer(app.refusal(.payloadTooLarge(limit: http.maxBodyBytes)), closing: true)
            return exchange
        }
        let request = HTTPRequest(
            method: method, path: target.path, query: target.query, headers: captured, body: data)
        switch app.handle(request) {
        case .answer(.ready(let result), _):
            exchange.answer(result.get())
        case .stream(let stream):
            exchange.read(stream)
        case .answer(.later(let work), let finished):
            begin()
            let task = Task(executorPreference: Self.executor) { await work().get() }
            exchange.parked(task)
            Task(executorPreference: Self.executor) {
                let response = await task.value
                finished?(response)
                self.end()
                exchange.answer(response)
            }
        case .answer(.handedBack(let start), let finished):
            begin()
            start { result in
                let response = result.get()
                finished?(response)
                self.end()
                exchange.answer(response)
            }
        }
        return exchange
    }

    private func begin() { parked.withLock { $0 += 1 } }
    private func end() { parked.withLock { $0 -= 1 } }
}

extension AppTester {
    /// One request and its answer, from the client's side.
    final class Exchange: Sendable {
        private struct State {
            var response: TestHTTPClient.Response?
            var waiting: [@Sendable (TestHTTPClient.Response) -> Void] = []
            var task: Task<HTTPResponse, Never>?
            var hungUp = false
            /// The undo of the answer the client did not take.
            var undone = false
        }

        private let method: String
        private let state = Locked(State())

        init(method: String) { self.method = method }

        /// Calls `handler` with the answer once it came (at once if it did).
        func whenAnswered(_ handler: @escaping @Sendable (TestHTTPClient.Response) -> Void) {
            let done: TestHTTPClient.Response? = state.withLock { s in
                if let response = s.response { return response }
                s.waiting.append(handler)
                return nil
            }
            if let done { handler(done) }
        }

        /// The answer, once it came.
        var response: TestHTTPClient.Response? {
            get async {
                await withCheckedContinuation { continuation in
                    whenAnswered { continuation.resume(returning: $0) }
                }
            }
        }

        /// The client hangs up: a parked answer's work is cancelled, and an
        /// answer that comes after is undone, not delivered.
        func hangUp() {
            let task = state.withLock { s -> Task<HTTPResponse, Never>? in
                s.hungUp = true
                return s.task
            }
            task?.cancel()
        }

        /// True once an answer was undone because its client had gone.
        var wasUndone: Bool { state.withLock { $0.undone } }

        func parked(_ task: Task<HTTPResponse, Never>) {
            let cancel = state.withLock { s in
                s.task = task
                return s.hungUp
            }
            if cancel { task.cancel() }
        }

        /// The answer reaches the client, or, when it hung up, is undone.
        func answer(_ response: HTTPResponse, closing: Bool = false) {
            let hungUp = state.withLock { s in
                if s.hungUp { s.undone = response.undelivered != nil }
                return s.hungUp
            }
            if hungUp { response.undelivered?() }
            deliver(Self.wire(response, method: method, closing: closing))
        }

        /// Reads a stream to its end (the tester has no socket to suspend on).
        func read(_ stream: HTTPStream) {
            let method = method
            Thread {
                var body = Data()
                var buffer = [CChar](repeating: 0, count: 16_384)
                while true {
                    let n = buffer.withUnsafeMutableBufferPointer { stream.read(into: $0.baseAddress!, max: $0.count) }
                    if n > 0 {
                        body.append(contentsOf: buffer[0..<n].map { UInt8(bitPattern: $0) })
                    } else if n == -1 || !stream.isOpen {
                        break
                    } else {
                        usleep(1000)
                    }
                }
                stream.released()
                var response = HTTPResponse(status: stream.status, headers: stream.headers, body: Array(body))
                response.headers.append(("Transfer-Encoding", "chunked"))
                self.deliver(Self.wire(response, method: method, closing: false, length: false))
            }.start()
        }

        private func deliver(_ response: TestHTTPClient.Response) {
            let handlers = state.withLock { s in
                s.response = response
                defer { s.waiting = [] }
                return s.waiting
            }
            for handler in handlers { handler(response) }
        }

        /// What the client reads: header names lower-cased, the length the
        /// server adds, no body for `HEAD`.
        private static func wire(_ response: HTTPResponse, method: String, closing: Bool, length: Bool = true)
            -> TestHTTPClient.Response
        {
            var headers: [String: String] = [:]
            for (name, value) in response.headers { headers[name.lowercased()] = value }
            if length { headers["content-length"] = String(response.body.count) }
            if closing { headers["connection"] = "close" }
            let body = method == "HEAD" ? Data() : Data(response.body)
            return TestHTTPClient.Response(status: response.status, headers: headers, body: body)
        }
    }
}

/// Runs the tester's deferred work on a Dispatch queue of its own, so an
/// answer comes even while test bodies block every cooperative thread.
private final class TesterExecutor: TaskExecutor, @unchecked Sendable {
    private let queue = DispatchQueue(label: "usher.tests.deferred", attributes: .concurrent)

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        queue.async { unowned.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }
}
