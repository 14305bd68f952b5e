import Foundation
import Locking
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// The index of resources on a three-master cluster (RedisClusterServer)
/// when one master is emptied: `removeLost` removes the entries of what it
/// held, and only those, and every instance hears they are deleted.
@Suite(.serialized, .timeLimit(.minutes(2))) struct LostResourcesClusterTests {
    /// The `kind:name` of each deletion a backend heard, in order.
    private final class Heard: Sendable {
        private let names = Locked<[String]>([])
        func append(_ name: String) { names.withLock { $0.append(name) } }
        var all: [String] { names.withLock { $0 } }
    }

    /// A backend on the cluster whose membership changes are kept in `heard`.
    private static func backend(
        _ servers: RedisClusterServer, heard: Heard
    ) async throws -> RedisBackend {
        let backend = try RedisBackend(
            settings: RedisSettings(url: servers.seedURL, cluster: true), clock: SystemClock())
        try backend.start { change in
            if case .deleted(let kind, let name, _) = change { heard.append("\(kind):\(name)") }
        }
        await eventually { await backend.unavailableReason() == nil }
        return backend
    }

    /// Creates a queue through `backend` and adds it to the index.
    private static func create(_ name: String, on backend: RedisBackend) async throws {
        let store = RedisQueueStore(
            keys: backend.keys(kind: "queue", name: name), connections: backend.connections, time: .server,
            channel: backend.channel, onDeadline: { _ in })
        #expect(try await store.create(QueueConfig(capacity: 1)).created)
        try await backend.announceCreated(kind: "queue", name: name)
    }

    /// Queue names whose keys lie on master `node`.
    private static func names(on node: Int, count: Int) -> [String] {
        var found: [String] = []
        var number = 0
        while found.count < count {
            let name = "q\(number)"
            let meta = ResourceKeys(prefix: "usher:", kind: "queue", name: name).key("meta")
            if RedisClusterServer.nodeIndex(ofKey: meta) == node { found.append(name) }
            number += 1
        }
        return found
    }

    @Test func anEmptiedMasterLosesItsEntriesOnlyAndEveryoneHears() async throws {
        let servers = try await RedisClusterServer()
        let heard = Heard()
        let backend = try await Self.backend(servers, heard: heard)
        let index = RedisClusterServer.nodeIndex(ofKey: backend.indexKey)
        let emptied = try #require([1, 2].first { $0 != index })
        let lost = Self.names(on: emptied, count: 3)
        let kept = (0..<3).filter { $0 != emptied }.flatMap { Self.names(on: $0, count: 2) }
        for name in lost + kept { try await Self.create(name, on: backend) }

        // Back empty, as after a restart without persistence (the index is on another master).
        _ = try await servers.nodes[emptied].connection().command(["FLUSHALL"])
        let found = try await backend.removeLost()
        #expect(Set(found.removed.map(\.name)) == Set(lost) && found.removed.allSatisfy { $0.kind == "queue" })
        #expect(found.unchecked == 0)
        #expect(Set(try await backend.indexedResources().map(\.name)) == Set(kept))
        #expect(await poll { Set(heard.all) == Set(lost.map { "queue:\($0)" }) })
        // Nothing more to remove; a second pass publishes nothing.
        #expect(try await backend.removeLost().removed.isEmpty)
        try await Task.sleep(for: .milliseconds(100))
        #expect(heard.all.count == lost.count)
        await backend.stop()
    }

    @Test func anEntryMadeAgainAfterItWasFoundGoneStays() async throws {
        let servers = try await RedisClusterServer()
        let heard = Heard()
        let backend = try await Self.backend(servers, heard: heard)
        let index = RedisClusterServer.nodeIndex(ofKey: backend.indexKey)
        let emptied = try #require([1, 2].first { $0 != index })
        let name = Self.names(on: emptied, count: 1)[0]
        try await Self.create(name, on: backend)
        let field = "queue:\(name)"
        let foundGone = try #require(try await backend.command(["HGET", backend.indexKey, field]).string)
        // Another instance makes it again (a PUT) before this one removes the entry.
        _ = try await servers.nodes[emptied].connection().command(["FLUSHALL"])
        try await Self.create(name, on: backend)
        #expect(try await backend.removeEntry(kind: "queue", name: name, token: foundGone) == .madeAgain)
        #expect(try await backend.isIndexed(kind: "queue", name: name))

        let current = try #require(try await backend.command(["HGET", backend.indexKey, field]).string)
        #expect(current != foundGone)
        #expect(try await backend.removeEntry(kind: "queue", name: name, token: current) == .removed)
        #expect(try await backend.removeEntry(kind: "queue", name: name, token: current) == .absent)
        #expect(try await !backend.isIndexed(kind: "queue", name: name))
        #expect(await poll { heard.all == [field] })
        await backend.stop()
    }

    @Test func aStoppedMastersEntriesAreUncheckedNotLost() async throws {
        let servers = try await RedisClusterServer()
        let backend = try await Self.backend(servers, heard: Heard())
        let index = RedisClusterServer.nodeIndex(ofKey: backend.indexKey)
        let stopped = try #require([1, 2].first { $0 != index })
        let silent = Self.names(on: stopped, count: 2)
        let others = (0..<3).filter { $0 != stopped }.flatMap { Self.names(on: $0, count: 1) }
        for name in silent + others { try await Self.create(name, on: backend) }
        servers.nodes[stopped].stop()
        let found = try await backend.removeLost()
        #expect(found.removed.isEmpty)
        #expect(found.unchecked == silent.count)
        #expect(try await backend.indexedCount() == silent.count + others.count)
        await backend.stop()
    }
}
