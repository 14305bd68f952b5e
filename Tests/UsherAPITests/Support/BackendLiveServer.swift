import Foundation
import HTTPTestClient
import RedisTestServer
import TestSupport
import Testing

@testable import Locking
@testable import UsherAPI

/// Where the queues of a live test are kept.
enum TestBackend: String, CustomStringConvertible, Sendable {
    case memory
    case redis

    var description: String { rawValue }

    /// Both backends: the arguments of a test that runs once on each.
    static let both: [TestBackend] = [.memory, .redis]
}

extension TestHTTPClient.Response {
    /// A state's `counts` (gauges and totals); empty when it has none.
    var counts: [String: Any] { json["counts"] as? [String: Any] ?? [:] }
}

/// The `id`s of a JSON list of objects, in order (an answer's page).
func ids(_ list: Any?) -> [String] {
    ((list as? [[String: Any]]) ?? []).compactMap { $0["id"] as? String }
}

/// A live server whose queues, windows, pools and pipelines are kept on
/// `backend`: on Redis, the config gains a `redis` block for a redis-server
/// of the test's own, and every such resource of the config file and of `put` bodies gains
/// `"backend": "redis"`;
/// on memory the config is used as given. Calls run on threads of their
/// own, so no cooperative thread waits on a socket while a Redis answer
/// needs one.
final class BackendLiveServer: Sendable {
    let backend: TestBackend
    let live: LiveServer
    let redis: RedisServer?
    /// The config file sections whose resources are kept on `backend`.
    static let sharedKinds = ["queues", "windows", "pools", "pipelines"]

    init(_ backend: TestBackend, _ configJSON: String = "{}", redis: RedisServer? = nil) async throws {
        self.backend = backend
        switch backend {
        case .memory:
            self.redis = nil
            live = try LiveServer(configJSON)
        case .redis:
            let server: RedisServer
            if let redis { server = redis } else { server = try await RedisServer() }
            self.redis = server
            let config = try Self.onRedis(configJSON, server, keyPrefix: nil)
            live = try LiveServer(try Self.text(config))
            await Self.untilDeclared(config) { try await self.call("GET", $0) }
        }
    }

    /// A `PUT` body for this backend (`"backend"` added on Redis).
    func put(_ json: String) -> String { Self.put(json, on: backend) }

    var app: UsherApp { live.app }

    /// Requests the server holds suspended.
    var suspendedRequests: Int { live.server.suspendedRequests }

    /// Graceful shutdown as on SIGTERM.
    func shutdown() -> Bool { live.shutdown() }

    /// One request on a fresh connection, from a thread of its own.
    func call(_ method: String, _ path: String, _ body: String? = nil, headers: [String: String] = [:]) async throws
        -> TestHTTPClient.Response
    {
        let port = live.port
        return try await onThread { try TestHTTPClient.once(port: port, method, path, body: body, headers: headers) }
    }

    /// A keep-alive client.
    func keepAlive() -> KeepAliveClient { KeepAliveClient(live.client()) }

    /// Starts `call` now; its answer is awaited later.
    func start(_ method: String, _ path: String, _ body: String? = nil) -> Task<TestHTTPClient.Response, any Error> {
        Task { try await call(method, path, body) }
    }

    /// Waits (at most 5 s) until the server holds `n` suspended requests.
    /// On Redis every request in flight is suspended, not only long-polls.
    func untilParked(_ n: Int) async {
        _ = await poll(5) { self.live.server.suspendedRequests >= n }
    }

    /// Waits (at most 5 s) until visitor `id` of queue `q` exists: on Redis a
    /// suspended `POST` may not have reached the queue yet.
    func untilVisitor(_ q: String, _ id: String) async -> TestHTTPClient.Response? {
        var last: TestHTTPClient.Response?
        _ = await poll(5) {
            last = try? await self.call("GET", "/v1/queues/\(q)/visitors/\(id)")
            return last?.status == 200
        }
        return last
    }

    /// `configJSON` with a `redis` block for `server` (and `keyPrefix`, when
    /// given) and every resource of the shared kinds kept there.
    static func onRedis(_ configJSON: String, _ server: RedisServer, keyPrefix: String?) throws -> [String: Any] {
        var config = try object(configJSON)
        var redis: [String: Any] = ["url": "redis://127.0.0.1:\(server.port)"]
        if let keyPrefix { redis["key_prefix"] = keyPrefix }
        config["redis"] = redis
        for kind in sharedKinds {
            if let declared = config[kind] as? [String: Any] {
                config[kind] = declared.mapValues { withBackend($0, .redis) }
            }
        }
        return config
    }

    /// Waits until every resource of the shared kinds in `config` answers:
    /// resources of the config file are declared in Redis in the background.
    static func untilDeclared(
        _ config: [String: Any], _ get: @escaping (String) async throws -> TestHTTPClient.Response
    ) async {
        for kind in sharedKinds {
            for name in (config[kind] as? [String: Any] ?? [:]).keys {
                // Generous: a loaded machine declares late, and a found resource ends the poll at once.
                let found = await poll(15) { (try? await get("/v1/\(kind)/\(name)").status) == 200 }
                #expect(found, "\(kind) \(name) was not declared in Redis")
            }
        }
    }

    /// `json` with `"backend"` added on Redis.
    static func put(_ json: String, on backend: TestBackend) -> String {
        guard backend == .redis, let object = try? object(json) else { return json }
        return (try? text(withBackend(object, .redis) as? [String: Any] ?? object)) ?? json
    }

    static func object(_ json: String) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] ?? [:]
    }

    static func text(_ object: [String: Any]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }

    static func withBackend(_ value: Any, _ backend: TestBackend) -> Any {
        guard var object = value as? [String: Any] else { return value }
        object["backend"] = backend.rawValue
        return object
    }
}

/// A keep-alive client whose requests, one at a time, run on threads of their own.
final class KeepAliveClient: @unchecked Sendable {
    private let client: TestHTTPClient

    init(_ client: TestHTTPClient) { self.client = client }

    func request(_ method: String, _ path: String, body: String? = nil) async throws -> TestHTTPClient.Response {
        try await onThread { try self.client.request(method, path, body: body) }
    }

    func sendRaw(_ data: Data) async throws {
        try await onThread { try self.client.sendRaw(data) }
    }

    func disconnect() { client.disconnect() }
}
