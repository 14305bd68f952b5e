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

    /// The key of Redis's epoch: a token that stays while Redis keeps what it
    /// holds. Beside the index (the same slot on a cluster): lost with it.
    var epochKey: String { indexKey.contains("{") ? "\(indexKey):epoch" : "{\(indexKey)}:epoch" }

    /// The epoch as it is, nil when it is missing (Redis was emptied, or never had one).
    package func currentEpoch() async throws(ScriptFailure) -> String? {
        try await command(["GET", epochKey], key: epochKey).string
    }

    /// The epoch, written now when it is missing (the first instance to find it so writes it).
    package func epoch() async throws(ScriptFailure) -> String {
        if let epoch = try await currentEpoch() { return epoch }
        _ = try await command(["SET", epochKey, UUID().uuidString, "NX"], key: epochKey)
        guard let epoch = try await currentEpoch() else { throw .redis("the epoch was not kept") }
        return epoch
    }

    /// What says whether Redis still holds what it held: its `run_id`s and its epoch.
    package struct Generation: Sendable, Equatable {
        /// `serverRunID`: new after a restart or a failover.
        let runID: String
        /// `epoch`: new after Redis was emptied without a restart.
        package let epoch: String
    }

    /// The generation now (writing the epoch if it is missing).
    package func generation() async throws(ScriptFailure) -> Generation? {
        guard let runID = try await serverRunID() else { return nil }
        return Generation(runID: runID, epoch: try await epoch())
    }

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
    func announceDeleted(kind: String, name: String) async throws(ScriptFailure) {
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

    /// What `checkMissing` found of a resource a script found without its keys.
    package enum Missing: Sendable, Equatable {
        /// Its keys are there (made again meanwhile).
        case present
        /// The index does not name it (any more): it was deleted, or found lost by another instance.
        case deleted
        /// It was lost: this call removed its entry, and every instance hears
        /// it deleted, `lost` (and makes it again if it declares it).
        case lost
        /// Redis did not answer.
        case unchecked
    }

    /// A script found the resource without its `meta` key: deleted (the entry
    /// goes after the keys), or lost (evicted, deleted by hand). After
    /// `grace`, time for a deletion under way to remove its entry, one still
    /// holding the same token without keys is lost and removed.
    package func checkMissing(kind: String, name: String, grace: Duration = .milliseconds(200)) async -> Missing {
        let field = "\(kind):\(name)"
        /// The entry's token (nil inside: no entry), or nil when Redis did not answer.
        func token() async -> String?? {
            do throws(ScriptFailure) {
                return .some(try await command(["HGET", indexKey, field], key: indexKey).string)
            } catch {
                return nil
            }
        }
        guard let first = await token() else { return .unchecked }
        guard let found = first else { return .deleted }
        guard let present = try? await hasKeys(kind: kind, name: name) else { return .unchecked }
        if present { return .present }
        try? await Task.sleep(for: grace)
        guard let second = await token() else { return .unchecked }
        guard let still = second else { return .deleted }
        guard still == found else { return .present }
        guard let back = try? await hasKeys(kind: kind, name: name) else { return .unchecked }
        if back { return .present }
        switch try? await removeEntry(kind: kind, name: name, token: found) {
        case .removed?: return .lost
        // Removed meanwhile: by its deletion, or as lost by another instance (whose notice says so).
        case .absent?: return .deleted
        case .madeAgain?: return .present
        case nil: return .unchecked
        }
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
