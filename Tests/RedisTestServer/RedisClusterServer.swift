import Foundation
import RedisClient

/// A Redis Cluster of the tests' own: three masters (no replicas) on free
/// loopback ports, each with a cluster bus port of its own and its
/// `nodes.conf` in a temporary directory, without persistence. Slots are
/// split in three ranges (`ranges`); `cluster-require-full-coverage no`,
/// so that the other masters serve on while one is stopped.
package final class RedisClusterServer: Sendable {
    /// The slots of each master, in the order of `nodes`.
    package static let ranges = [0...5460, 5461...10922, 10923...16383]

    package let nodes: [RedisServer]
    private let directory: URL

    package init() async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("usher-cluster-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var nodes: [RedisServer] = []
        var busPorts: [Int] = []
        for index in 0..<3 {
            let bus = try RedisServer.freePort()
            busPorts.append(bus)
            nodes.append(
                try await RedisServer(arguments: [
                    "--cluster-enabled", "yes", "--cluster-port", "\(bus)",
                    "--cluster-config-file", directory.appendingPathComponent("nodes-\(index).conf").path,
                    "--cluster-node-timeout", "1000", "--cluster-require-full-coverage", "no",
                    "--dir", directory.path,
                ]))
        }
        self.nodes = nodes
        for (node, range) in zip(nodes, Self.ranges) {
            try await Self.expectOK(
                node.connection().command(["CLUSTER", "ADDSLOTSRANGE", "\(range.lowerBound)", "\(range.upperBound)"]))
        }
        for (node, bus) in zip(nodes, busPorts).dropFirst() {
            try await Self.expectOK(
                nodes[0].connection().command(["CLUSTER", "MEET", "127.0.0.1", "\(node.port)", "\(bus)"]))
        }
        try await waitUntilSettled()
    }

    deinit {
        for node in nodes { node.stop() }
        try? FileManager.default.removeItem(at: directory)
    }

    /// `redis://` of the first node, the seed.
    package var seedURL: String { "redis://127.0.0.1:\(nodes[0].port)" }

    package var seed: RedisEndpoint { nodes[0].endpoint }

    /// The index in `nodes` of the master that serves `slot` at the start.
    package static func nodeIndex(ofSlot slot: Int) -> Int { ranges.firstIndex { $0.contains(slot) }! }

    /// The index in `nodes` of the master that serves `key` at the start.
    package static func nodeIndex(ofKey key: String) -> Int { nodeIndex(ofSlot: ClusterSlot.of(key)) }

    /// Waits (at most 10 s) until every running node says `cluster_state:ok`
    /// and knows all three ranges.
    package func waitUntilSettled(running: [Int] = [0, 1, 2]) async throws {
        for _ in 0..<200 {
            var settled = true
            for index in running {
                let connection = nodes[index].connection()
                let info = try? await connection.command(["CLUSTER", "INFO"]).string
                let slots = try? await connection.command(["CLUSTER", "SLOTS"]).array
                if info?.contains("cluster_state:ok") != true || slots?.count != 3 { settled = false }
            }
            if settled { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw RedisError.unavailable("the test cluster did not settle")
    }

    /// Starts moving `slot` from node `source` to node `target`: `IMPORTING` on
    /// the target, `MIGRATING` on the source (keys still on the source are
    /// served there; missing ones are redirected with `ASK`).
    package func beginMigration(slot: Int, from source: Int, to target: Int) async throws {
        let sourceID = try await id(source)
        let targetID = try await id(target)
        try await Self.expectOK(
            nodes[target].connection().command(["CLUSTER", "SETSLOT", "\(slot)", "IMPORTING", sourceID]))
        try await Self.expectOK(
            nodes[source].connection().command(["CLUSTER", "SETSLOT", "\(slot)", "MIGRATING", targetID]))
    }

    /// `MIGRATE`s every key of `slot` from `source` to `target`, in one call.
    package func moveKeys(slot: Int, from source: Int, to target: Int) async throws {
        let connection = nodes[source].connection()
        let keys = try await connection.command(["CLUSTER", "GETKEYSINSLOT", "\(slot)", "10000"]).array ?? []
        let names = keys.compactMap(\.string)
        guard !names.isEmpty else { return }
        try await Self.expectOK(
            connection.command(
                ["MIGRATE", "127.0.0.1", "\(nodes[target].port)", "", "0", "5000", "KEYS"] + names))
    }

    /// Ends a migration: every node learns that `target` serves `slot`.
    package func finishMigration(slot: Int, to target: Int) async throws {
        let targetID = try await id(target)
        for node in nodes {
            try await Self.expectOK(node.connection().command(["CLUSTER", "SETSLOT", "\(slot)", "NODE", targetID]))
        }
    }

    private func id(_ index: Int) async throws -> String {
        guard let id = try await nodes[index].connection().command(["CLUSTER", "MYID"]).string else {
            throw RedisError.reply("CLUSTER MYID answered no id")
        }
        return id
    }

    private static func expectOK(_ reply: RedisReply) throws {
        if let message = reply.errorMessage { throw RedisError.reply(message) }
    }
}
