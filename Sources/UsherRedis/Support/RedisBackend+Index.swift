import Foundation
import RedisClient

/// The index of Redis-backed resources: one hash, `<prefix>resources`, whose
/// fields are `kind:name` and whose values are a token new at each creation.
/// It lives on one master of a cluster; each resource's keys on their slot's.
extension RedisBackend {
    /// What `removeLost` found.
    package struct LostResources: Sendable {
        /// Resources whose keys are gone and whose entry is gone now (removed
        /// by this call, or by another instance's a moment before).
        package var removed: [(kind: String, name: String)] = []
        /// Entries that could not be checked (their master did not answer).
        package var unchecked = 0
    }

    /// One entry of the index.
    private struct Entry: Sendable {
        let kind: String
        let name: String
        let token: String
    }

    /// What became of one entry whose resource was looked for.
    private enum Check: Sendable {
        case alive
        case removed
        case unchecked
    }

    /// Entries checked at once (each an `EXISTS`, pipelined by the connections).
    static let checkBatch = 1000

    private static let removalScript = RedisScript(String(decoding: PackageResources.index_lua, as: UTF8.self))

    /// The hash of every Redis-backed resource.
    var indexKey: String { "\(settings.keyPrefix)resources" }

    /// Every Redis-backed resource, as (kind, name).
    package func indexedResources() async throws(ScriptFailure) -> [(kind: String, name: String)] {
        let reply = try await command(["HKEYS", indexKey], key: indexKey)
        return (reply.array ?? []).compactMap { item in item.string.flatMap(Self.kindAndName) }
    }

    /// How many resources the index holds.
    package func indexedCount() async throws(ScriptFailure) -> Int {
        Int(try await command(["HLEN", indexKey], key: indexKey).int ?? 0)
    }

    /// Records a resource created through this instance and tells every instance.
    /// The notice goes out where the entry is, after it: after a `removeLost`
    /// notice of the same resource too.
    package func announceCreated(kind: String, name: String) async throws(ScriptFailure) {
        _ = try await command(["HSET", indexKey, "\(kind):\(name)", UUID().uuidString], key: indexKey)
        _ = try await command(
            ["PUBLISH", channel, Self.membershipNotice(kind: kind, name: name, created: true)], key: indexKey)
    }

    /// True when the index names the resource (created through some instance).
    package func isIndexed(kind: String, name: String) async throws(ScriptFailure) -> Bool {
        try await command(["HEXISTS", indexKey, "\(kind):\(name)"], key: indexKey).int == 1
    }

    /// True when the resource's keys are there (its `meta` hash, on its slot's master).
    package func hasKeys(kind: String, name: String) async throws(ScriptFailure) -> Bool {
        let meta = keys(kind: kind, name: name).key("meta")
        return try await command(["EXISTS", meta], key: meta).int == 1
    }

    /// Forgets a deleted resource (its script published `deleted` already).
    package func announceDeleted(kind: String, name: String) async throws(ScriptFailure) {
        _ = try await command(["HDEL", indexKey, "\(kind):\(name)"], key: indexKey)
    }

    /// Removes from the index the resources whose keys are gone (a master
    /// came back empty while the index, on another, kept their entries), and
    /// tells every instance they are deleted. Tokens are read before the
    /// keys are looked for, and an entry goes only if it still holds its
    /// token: a resource made again meanwhile (a new token) stays.
    package func removeLost() async throws(ScriptFailure) -> LostResources {
        let items = try await command(["HGETALL", indexKey], key: indexKey).array ?? []
        var entries: [Entry] = []
        for index in stride(from: 0, to: items.count - 1, by: 2) {
            guard let field = items[index].string, let token = items[index + 1].string,
                let (kind, name) = Self.kindAndName(field)
            else { continue }
            entries.append(Entry(kind: kind, name: name, token: token))
        }
        var lost = LostResources()
        for start in stride(from: 0, to: entries.count, by: Self.checkBatch) {
            let batch = entries[start..<min(start + Self.checkBatch, entries.count)]
            await withTaskGroup(of: (Entry, Check).self) { group in
                for entry in batch { group.addTask { (entry, await self.check(entry)) } }
                for await (entry, check) in group {
                    switch check {
                    case .alive: break
                    case .removed: lost.removed.append((entry.kind, entry.name))
                    case .unchecked: lost.unchecked += 1
                    }
                }
            }
        }
        return lost
    }

    /// Looks for the entry's resource (its `meta` key, on its slot's master)
    /// and, when it is gone, removes the entry unless it was made again.
    private func check(_ entry: Entry) async -> Check {
        guard let present = try? await hasKeys(kind: entry.kind, name: entry.name) else { return .unchecked }
        guard !present else { return .alive }
        switch try? await removeEntry(kind: entry.kind, name: entry.name, token: entry.token) {
        case .removed?, .absent?: return .removed
        case .madeAgain?: return .alive
        case nil: return .unchecked
        }
    }

    /// What `removeEntry` did.
    enum Removal: Int64 {
        case removed = 1
        /// The entry holds another token: the resource was made again.
        case madeAgain = 0
        /// No entry (removed already).
        case absent = -1
    }

    /// Removes the entry of a lost resource if it still holds `token`, and
    /// publishes its deletion (`index.lua`).
    func removeEntry(kind: String, name: String, token: String) async throws(ScriptFailure) -> Removal {
        let reply: RedisReply
        do {
            reply = try await Self.removalScript.run(
                on: connections.route(keys: [indexKey]), keys: [indexKey],
                arguments: [time.argument, channel, kind, name, token])
        } catch {
            throw .unavailable(error.description)
        }
        if let message = reply.errorMessage { throw .redis(message) }
        guard let removal = reply.int.flatMap(Removal.init(rawValue:)) else {
            throw .redis("index.lua answered \(reply)")
        }
        return removal
    }

    /// `kind:name` split at its first colon (kinds hold none).
    private static func kindAndName(_ field: String) -> (kind: String, name: String)? {
        guard let colon = field.firstIndex(of: ":") else { return nil }
        return (String(field[..<colon]), String(field[field.index(after: colon)...]))
    }
}
