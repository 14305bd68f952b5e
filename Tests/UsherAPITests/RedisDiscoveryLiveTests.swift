import Foundation
import HTTPTestClient
import Locking
import RedisTestServer
import Testing

@testable import HTTPServer
@testable import UsherAPI
@testable import UsherCore

/// A resource made through one server and first named on another: the other
/// finds it in Redis, runs the route once, and makes its manager as a `PUT`
/// there would.
@Suite(.serialized, .timeLimit(.minutes(2))) struct RedisDiscoveryLiveTests {
    /// How many times a route ran.
    final class Runs: Sendable {
        private let count = Locked(0)
        func add() { count.withLock { $0 += 1 } }
        var value: Int { count.withLock { $0 } }
    }

    /// A route that counts its runs (each run reads the body once).
    static func counting(_ route: Route, _ runs: Runs) -> Route {
        Route(slot: route.slot, access: route.access, resource: route.resource) { call throws(APIError) in
            runs.add()
            return try route.run(call)
        }
    }

    @Test func aNameHeardOfOnlyInRedisRunsTheRouteOnce() async throws {
        let a = try await BackendLiveServer(.redis)
        let redis = try #require(a.redis)
        defer { redis.stop() }
        // Not started: hears no notices and reads no index, so only a lookup finds a resource.
        var config = try UsherConfig.parse(
            try JSONValue.parse(#"{"redis": {"url": "redis://127.0.0.1:\#(redis.port)"}}"#))
        config.logLevel = .error
        let b = try UsherApp(config: config)
        #expect(try await a.call("PUT", "/v1/queues/q", a.put(#"{"capacity": 1}"#)).status == 201)
        #expect(!b.registry.contains(.queues, "q"))

        let path = "/v1/queues/q/visitors"
        guard case .found(let route, _, let parameters) = b.router.match("POST", path) else {
            Issue.record("no route for \(path)")
            return
        }
        let runs = Runs()
        let call = Call(
            request: HTTPRequest(method: "POST", path: path, body: Data(#"{"id": "v1"}"#.utf8)),
            parameters: parameters, app: b)
        let response = await UsherApp.resolve(b.run(Self.counting(route, runs), call))
        #expect(response.status == 201)
        #expect(runs.value == 1)
        #expect(b.registry.contains(.queues, "q"))

        // A name Redis does not know either: looked up once, then 404 from the one run.
        let missing = "/v1/queues/none/visitors"
        guard case .found(_, _, let none) = b.router.match("POST", missing) else { return }
        let unknown = Call(
            request: HTTPRequest(method: "POST", path: missing, body: Data(#"{"id": "v1"}"#.utf8)),
            parameters: none, app: b)
        let notFound = await UsherApp.resolve(b.run(Self.counting(route, runs), unknown))
        #expect(notFound.status == 404)
        #expect(runs.value == 2)
    }

    @Test func aPipelineFoundThroughAnotherServerTakesWithinMaxResponseBytes() async throws {
        let limit = 64 << 10
        let a = try await BackendLiveServer(.redis, #"{"max_response_bytes": \#(limit)}"#)
        let redis = try #require(a.redis)
        defer { redis.stop() }
        let b = try await BackendLiveServer(.redis, #"{"max_response_bytes": \#(limit)}"#, redis: redis)
        #expect(try await a.call("PUT", "/v1/pipelines/p", a.put(#"{"max_in_flight": 100}"#)).status == 201)
        let payload = String(repeating: "x", count: 10_000)
        for i in 0..<10 {
            let pushed = try await a.call(
                "POST", "/v1/pipelines/p/items", #"{"id": "i\#(i)", "payload": "\#(payload)"}"#)
            #expect(pushed.status == 201)
        }
        let taken = try await b.call("POST", "/v1/pipelines/p/take?max=10")
        #expect(taken.status == 200)
        let items = try #require(taken.json["items"] as? [[String: Any]])
        #expect(!items.isEmpty && items.count < 10)
        #expect(taken.body.count <= limit)
    }
}
