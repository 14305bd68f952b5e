import Foundation
import HTTPTestClient
import RedisTestServer
import TestSupport
import Testing

@testable import UsherAPI
@testable import UsherCore

/// Resources a config file keeps in Redis, live: a reload creates, changes
/// and deletes them there for every instance.
@Suite(.serialized, .timeLimit(.minutes(2))) struct RedisDeclaredLiveTests {
    @Test func aReloadCreatesChangesAndDeletesThemForEveryInstance() async throws {
        let redis = try await RedisServer()
        let a = try await BackendApp(.redis, redis: redis)
        let b = try await BackendApp(.redis, redis: redis)
        let directory = try temporaryDirectory("reload")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("usher.json")
        func load() throws(FieldError) -> UsherConfig { try UsherConfig.load(path: file.path, environment: [:]) }
        func declare(_ queues: String) throws {
            try Data(#"{"redis": {"url": "redis://127.0.0.1:\#(redis.port)"}, "queues": {\#(queues)}}"#.utf8)
                .write(to: file)
        }
        func capacityOnB() async -> Int? {
            guard let r = try? await b.call("GET", "/v1/queues/declared"), r.status == 200 else { return nil }
            return (r.json["config"] as? [String: Any])?["capacity"] as? Int
        }
        let reloader = ConfigReloader(app: a.app)

        try declare(#""declared": {"capacity": 2, "backend": "redis"}"#)
        let created = reloader.reload(load)
        #expect(created.error == nil && created.failed.isEmpty)
        #expect(created.inRedis == ["queues/declared"])
        #expect(await poll(5) { await capacityOnB() == 2 }, "B sees the queue A's reload made")
        #expect(try await b.call("POST", "/v1/queues/declared/visitors", #"{"id": "v"}"#).status == 201)

        try declare(#""declared": {"capacity": 3, "backend": "redis"}"#)
        #expect(reloader.reload(load).inRedis == ["queues/declared"])
        #expect(await poll(5) { await capacityOnB() == 3 }, "B sees the change; the visitor stays")
        #expect(try await b.call("GET", "/v1/queues/declared/visitors/v").status == 200)

        try declare("")
        let removed = reloader.reload(load)
        #expect(removed.inRedis == ["queues/declared"] && removed.deleted.isEmpty)
        #expect(await poll(5) { (try? await b.call("GET", "/v1/queues/declared").status) == 404 })
        #expect(try await a.call("GET", "/v1/queues/declared").status == 404)
        let index = try await redis.connection().command(["HLEN", "usher:resources"])
        #expect(index.int == 0)
    }
}
