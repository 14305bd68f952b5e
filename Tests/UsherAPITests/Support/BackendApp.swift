import Foundation
import HTTPTestClient
import RedisTestServer
import TestSupport
import Testing

@testable import UsherAPI

/// `BackendLiveServer` without sockets: the app in an `AppTester`, its
/// queues, windows, pools and pipelines kept on `backend`. On Redis without
/// a server of the test's own, it uses the process's shared redis-server
/// under a key prefix of its own; `redis` is then nil (a test that stops,
/// pauses or flushes Redis passes a server of its own).
final class BackendApp: Sendable {
    let backend: TestBackend
    let tester: AppTester
    /// The test's own redis-server, when it passed one.
    let redis: RedisServer?

    init(_ backend: TestBackend, _ configJSON: String = "{}", redis: RedisServer? = nil) async throws {
        self.backend = backend
        self.redis = redis
        switch backend {
        case .memory:
            tester = try AppTester(configJSON)
        case .redis:
            let server: RedisServer
            if let redis { server = redis } else { server = try await RedisServer.shared() }
            let prefix = redis == nil ? RedisServer.uniqueKeyPrefix() : nil
            let config = try BackendLiveServer.onRedis(configJSON, server, keyPrefix: prefix)
            tester = try AppTester(try BackendLiveServer.text(config))
            await BackendLiveServer.untilDeclared(config) { try await self.call("GET", $0) }
        }
    }

    var app: UsherApp { tester.app }

    /// Answers that have not come yet (on Redis every request in flight).
    var suspendedRequests: Int { tester.suspendedRequests }

    /// A `PUT` body for this backend (`"backend"` added on Redis).
    func put(_ json: String) -> String { BackendLiveServer.put(json, on: backend) }

    /// One request, answered without holding a cooperative thread.
    func call(_ method: String, _ path: String, _ body: String? = nil, headers: [String: String] = [:]) async throws
        -> TestHTTPClient.Response
    {
        try await tester.callAsync(method, path, body, headers: headers)
    }

    /// Starts `call` now; its answer is awaited later.
    func start(_ method: String, _ path: String, _ body: String? = nil) -> Task<TestHTTPClient.Response, any Error> {
        Task { try await call(method, path, body) }
    }

    /// Waits (at most 5 s) until `n` answers are outstanding.
    func untilParked(_ n: Int) async {
        _ = await poll(5) { self.suspendedRequests >= n }
    }

    /// Waits (at most 5 s) until visitor `id` of queue `q` exists: on Redis a
    /// parked `POST` may not have reached the queue yet.
    func untilVisitor(_ q: String, _ id: String) async -> TestHTTPClient.Response? {
        var last: TestHTTPClient.Response?
        _ = await poll(5) {
            last = try? await self.call("GET", "/v1/queues/\(q)/visitors/\(id)")
            return last?.status == 200
        }
        return last
    }

    /// Graceful shutdown as on SIGTERM.
    func shutdown() -> Bool { tester.shutdown() }
}

/// What a test body needs of an Usher on a backend, live or in-process.
protocol BackendUnderTest: Sendable {
    var backend: TestBackend { get }
    func put(_ json: String) -> String
    func call(_ method: String, _ path: String, _ body: String?, headers: [String: String]) async throws
        -> TestHTTPClient.Response
}

extension BackendUnderTest {
    /// One request without headers.
    func call(_ method: String, _ path: String, _ body: String? = nil) async throws -> TestHTTPClient.Response {
        try await call(method, path, body, headers: [:])
    }
}

extension BackendApp: BackendUnderTest {}
extension BackendLiveServer: BackendUnderTest {}

/// Whether `status` comes to be 404 within 5 s, being 404 or 410 until then:
/// an instance sharing Redis hears of a deletion made through another a
/// moment later, and until it does a request there answers 410 `gone`.
func untilDeleted(_ status: () async throws -> Int) async -> Bool {
    var answers: Set<Int> = []
    let deleted = await poll(5) {
        let answer = (try? await status()) ?? 0
        answers.insert(answer)
        return answer == 404
    }
    return deleted && answers.isSubset(of: [404, 410])
}
