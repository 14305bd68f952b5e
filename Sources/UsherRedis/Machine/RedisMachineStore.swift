import Foundation
import Locking
import RedisClient
import UsherCore

/// What one machine operation changed, as `machine.lua` publishes it. In
/// the memory machine's event order, the changes sort by version, a
/// transition before the transaction it committed (which shares its version).
package struct MachineNotice: Sendable, Equatable {
    package let name: String
    /// The version after the operation (0 when `deleted`).
    package let version: Int64
    /// Transitions made (`transition` events: client events, commits, timeouts), in order.
    package let transitions: [MachineTransition]
    /// Transactions opened, committed, aborted or expired (the `transaction-*` events), in order.
    package let transactions: [MachineTransaction]
    /// The next deadline (a state timeout or a transaction's expiry), if any.
    package let next: Timestamp?
    package let deleted: Bool
}

/// One machine kept in Redis: `StateMachine`'s operations, each one EVALSHA
/// of `machine.lua` that first applies the timeouts and expiries due.
///
/// Versions are time-based: each change takes max(last + 1, now in µs), so
/// `If-Match` and waits work as in memory (a change moves the version, only
/// forward) and a version lost in a failover is not reused for other content.
package struct RedisMachineStore: Sendable {
    private static let script = ResourceScript(kindSources: PackageResources.machine_lua)
    /// The script's name in Redis (`EVALSHA`), for measurements.
    static var scriptSHA1: String { script.script.sha1 }

    package let keys: ResourceKeys
    private let connections: RedisConnectionPool
    private let time: ScriptTime
    private let channel: String
    private let onDeadline: @Sendable (Timestamp?) -> Void
    /// Hears that a script found the resource's keys missing.
    private let onMissing: @Sendable () -> Void
    /// The keys `machine.lua` reads, in its `KEYS` order.
    private var keyList: [String] { [keys.key("meta"), keys.key("history")] }
    /// The last definition decoded, by its text: it is fixed at creation.
    private let definitions = DefinitionCache()

    package init(
        keys: ResourceKeys, connections: RedisConnectionPool, time: ScriptTime, channel: String,
        onDeadline: @escaping @Sendable (Timestamp?) -> Void,
        onMissing: @escaping @Sendable () -> Void = {}
    ) {
        self.keys = keys
        self.connections = connections
        self.time = time
        self.channel = channel
        self.onDeadline = onDeadline
        self.onMissing = onMissing
    }

    /// Creates the machine in its initial state, or, when it exists, answers
    /// it as it is (`created` false; the caller compares the definitions).
    package func create(definitionName: String?, definition: MachineDefinition) async throws(MachineError) -> (
        snapshot: MachineSnapshot, created: Bool
    ) {
        let arguments =
            [keys.name, definitionName ?? "", try Self.definitionText(definition), definition.initial]
            + Self.lookups(definition)
        let reply = try await run("create", arguments)
        return try (snapshot(from: reply), Self.decode(SnapshotHead.self, reply, at: 1).created == "1")
    }

    /// Deletes every key of the machine; false when there was none.
    package func delete() async throws(MachineError) -> Bool {
        try await run("delete").element(1) == "1"
    }

    /// The machine as it is now.
    package func snapshot() async throws(MachineError) -> MachineSnapshot {
        try snapshot(from: await run("snapshot"))
    }

    /// Applies `event`, checked as `MachineEngine.fire` checks it.
    @discardableResult
    package func fire(event: String, expectedVersion: Int64? = nil, data: JSONValue? = nil)
        async throws(MachineError) -> TransitionResult
    {
        let reply = try await run(
            "fire", [event, expectedVersion.map(String.init) ?? "", try Self.payloadText(data)])
        return TransitionResult(try Self.transition(Self.decode(EntryRecord.self, reply, at: 1)))
    }

    /// Opens a transaction for `event` that expires after `seconds`.
    @discardableResult
    package func open(event: String, expectedVersion: Int64? = nil, data: JSONValue? = nil, seconds: Double)
        async throws(MachineError) -> MachineTransaction
    {
        let reply = try await run(
            "open",
            [
                event, expectedVersion.map(String.init) ?? "", try Self.payloadText(data),
                String(Timestamp.micros(fromSeconds: seconds)),
            ])
        return try Self.transaction(Self.decode(TransactionRecord.self, reply, at: 1))
    }

    /// Commits the open transaction `id`: its transition happens now.
    @discardableResult
    package func commit(transaction id: String) async throws(MachineError) -> TransitionResult {
        let reply = try await run("commit", [id])
        return TransitionResult(try Self.transition(Self.decode(EntryRecord.self, reply, at: 1)))
    }

    /// Aborts the open transaction `id`: the state stays.
    @discardableResult
    package func abort(transaction id: String) async throws(MachineError) -> MachineTransaction {
        try Self.transaction(Self.decode(TransactionRecord.self, try await run("abort", [id]), at: 1))
    }

    /// Applies the timeouts and expiries due now; harmless to run from any number of instances.
    package func tick() async throws(MachineError) {
        _ = try await run("tick")
    }

    /// Transactions ended so far, by outcome.
    package func transactionCounts() async throws(MachineError) -> TransactionCounts {
        let reply = try await run("counts")
        guard let committed = reply.element(1).flatMap(Int.init), let aborted = reply.element(2).flatMap(Int.init),
            let expired = reply.element(3).flatMap(Int.init)
        else { throw Self.unreadable("transaction counts") }
        return TransactionCounts(committed: committed, aborted: aborted, expired: expired)
    }

    /// A notice `machine.lua` published, or nil when the payload is not a machine's.
    package static func decodeNotice(_ payload: [UInt8]) -> MachineNotice? {
        guard let record = try? JSONDecoder().decode(NoticeRecord.self, from: Data(payload)), record.kind == "machine"
        else { return nil }
        if record.deleted == true {
            return MachineNotice(
                name: record.name, version: 0, transitions: [], transactions: [], next: nil, deleted: true)
        }
        do throws(MachineError) {
            guard let version = record.version.flatMap({ Int64($0) }) else { return nil }
            return MachineNotice(
                name: record.name, version: version,
                transitions: try (record.transitions ?? []).map { e throws(MachineError) in try transition(e) },
                transactions: try (record.transactions ?? []).map { t throws(MachineError) in try transaction(t) },
                next: try record.next.map { n throws(MachineError) in try timestamp(n) }, deleted: false)
        } catch {
            return nil
        }
    }

    // MARK: - Calls

    /// Runs `operation`; hands the reply's next deadline to `onDeadline`.
    private func run(_ operation: String, _ arguments: [String] = []) async throws(MachineError) -> [String] {
        do {
            return try await Self.script.call(
                operation, keys: keyList, time: time, channel: channel, arguments: arguments, on: connections,
                onDeadline: onDeadline,
                onMissing: onMissing
            ).map { $0.string ?? "" }
        } catch {
            throw Self.error(error)
        }
    }

    /// The error a script failure means.
    private static func error(_ failure: ScriptFailure) -> MachineError {
        switch failure {
        case .unavailable(let message), .redis(let message):
            return .backendUnavailable(message)
        case .refused(let code, let detail):
            let words = detail.split(separator: " ").map(String.init)
            switch code {
            case "gone": return .gone
            case "unknown_event": return .unknownEvent(allowedEvents: words)
            case "invalid_transition":
                return .invalidTransition(state: words.first ?? "", allowedEvents: Array(words.dropFirst()))
            case "version_mismatch":
                guard let current = Int64(detail) else { return unreadable("version") }
                return .versionMismatch(current: current)
            case "transaction_open":
                guard let record = try? JSONDecoder().decode(TransactionRecord.self, from: Data(detail.utf8)),
                    let open = try? transaction(record)
                else { return unreadable("transaction") }
                return .transactionOpen(open)
            case "transaction_ended":
                guard let status = MachineTransaction.Status(rawValue: detail) else { return unreadable("status") }
                return .transactionEnded(status)
            case "unknown_transaction": return .unknownTransaction
            default: return .backendUnavailable("machine script refused: \(code) \(detail)")
            }
        }
    }

    private static func unreadable(_ what: String) -> MachineError {
        .backendUnavailable("unreadable \(what) in the machine script's reply")
    }

    // MARK: - Decoding

    /// `{next, head, definition, history}`.
    private func snapshot(from reply: [String]) throws(MachineError) -> MachineSnapshot {
        let head = try Self.decode(SnapshotHead.self, reply, at: 1)
        guard let definitionText = reply.element(2) else { throw Self.unreadable("definition") }
        let history = try Self.decode([EntryRecord].self, reply, at: 3).map { e throws(MachineError) in
            try Self.transition(e)
        }
        return MachineSnapshot(
            name: head.name, definitionName: head.definitionName,
            definition: try definitions.definition(definitionText),
            state: head.state, version: try Self.int(head.version), allowedEvents: head.allowedEvents,
            enteredAt: try Self.timestamp(head.entered), history: history,
            transaction: try head.transaction.map { t throws(MachineError) in try Self.transaction(t) })
    }

    private static func decode<T: Decodable>(_ type: T.Type, _ reply: [String], at index: Int) throws(MachineError)
        -> T
    {
        guard let text = reply.element(index) else { throw unreadable("reply") }
        return try decode(type, text)
    }

    private static func decode<T: Decodable>(_ type: T.Type, _ text: String) throws(MachineError) -> T {
        do {
            return try JSONDecoder().decode(type, from: Data(text.utf8))
        } catch {
            throw unreadable("\(T.self)")
        }
    }

    private static func int(_ text: String) throws(MachineError) -> Int64 {
        guard let value = Int64(text) else { throw unreadable("number") }
        return value
    }

    private static func timestamp(_ text: String) throws(MachineError) -> Timestamp {
        Timestamp(micros: try int(text))
    }

    private static func payload(_ text: String?) throws(MachineError) -> JSONValue? {
        guard let text else { return nil }
        do {
            return try JSONValue.parse(text)
        } catch {
            throw unreadable("data")
        }
    }

    private static func transition(_ e: EntryRecord) throws(MachineError) -> MachineTransition {
        guard let cause = MachineTransition.Cause(rawValue: e.cause) else { throw unreadable("cause") }
        return MachineTransition(
            event: e.event, from: e.from, to: e.to, version: try int(e.version), at: try timestamp(e.at), cause: cause,
            data: try payload(e.data), transaction: e.transaction, attempted: e.attempted)
    }

    private static func transaction(_ t: TransactionRecord) throws(MachineError) -> MachineTransaction {
        guard let status = MachineTransaction.Status(rawValue: t.status) else { throw unreadable("status") }
        return MachineTransaction(
            id: t.id, event: t.event, from: t.from, to: t.to, data: try payload(t.data),
            openedAt: try timestamp(t.opened), expiresAt: try timestamp(t.expires), status: status,
            version: try int(t.version))
    }

    fileprivate static func definition(_ text: String) throws(MachineError) -> MachineDefinition {
        let record = try decode(DefinitionRecord.self, text)
        do {
            return try MachineDefinition(
                initial: record.initial, states: record.states,
                transitions: record.transitions.map { .init(event: $0.event, from: $0.from, to: $0.to) },
                timeouts: record.timeouts.map { .init(state: $0.state, afterSeconds: $0.afterSeconds, event: $0.event) }
            )
        } catch {
            throw unreadable("definition")
        }
    }

    // MARK: - Encoding

    private static func definitionText(_ definition: MachineDefinition) throws(MachineError) -> String {
        let record = DefinitionRecord(
            initial: definition.initial, states: definition.states,
            transitions: definition.transitions.map { .init(event: $0.event, from: $0.from, to: $0.to) },
            timeouts: definition.timeouts.map {
                .init(state: $0.state, afterSeconds: $0.afterSeconds, event: $0.event)
            })
        return try encode(record)
    }

    /// `data` as JSON text, or "" for none.
    private static func payloadText(_ data: JSONValue?) throws(MachineError) -> String {
        guard let data else { return "" }
        return try encode(StoredJSON(data))
    }

    private static func encode(_ value: some Encodable) throws(MachineError) -> String {
        do {
            return String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
        } catch {
            throw .backendUnavailable("could not encode for Redis: \(error)")
        }
    }

    /// The lookup fields `machine.lua` reads instead of the definition, as
    /// field/value pairs (see the script's header).
    private static func lookups(_ definition: MachineDefinition) -> [String] {
        var fields: [String] = []
        for event in definition.events { fields += ["e|\(event)", "1"] }
        for t in definition.transitions {
            for from in t.from { fields += ["t|\(t.event)|\(from)", t.to] }
        }
        for state in definition.states {
            let allowed = definition.allowedEvents(in: state)
            if !allowed.isEmpty { fields += ["a|\(state)", allowed.joined(separator: " ")] }
        }
        // Only a state's earliest timeout can fire (it leaves the state); ties go to the first listed.
        var earliest: [String: (micros: Int64, event: String)] = [:]
        for timeout in definition.timeouts {
            let micros = Timestamp.micros(fromSeconds: timeout.afterSeconds)
            if let known = earliest[timeout.state], known.micros <= micros { continue }
            earliest[timeout.state] = (micros, timeout.event)
        }
        for state in definition.states {
            if let timeout = earliest[state] { fields += ["o|\(state)", "\(timeout.micros) \(timeout.event)"] }
        }
        return fields
    }
}

/// One decoded definition and its text, so a snapshot decodes the definition
/// only when the machine was re-created with another one.
private final class DefinitionCache: Sendable {
    private let last = Locked<(text: String, definition: MachineDefinition)?>(nil)

    func definition(_ text: String) throws(MachineError) -> MachineDefinition {
        if let known = last.withLock({ $0 }), known.text == text { return known.definition }
        let definition = try RedisMachineStore.definition(text)
        last.withLock { $0 = (text, definition) }
        return definition
    }
}

// MARK: - Records (the script's cjson objects; every number is decimal text)

private struct EntryRecord: Decodable {
    var event: String
    var from: String
    var to: String
    var version: String
    var at: String
    var cause: String
    var data: String?
    var transaction: String?
    var attempted: String?
}

private struct TransactionRecord: Decodable {
    var id: String
    var event: String
    var from: String
    var to: String
    var data: String?
    var opened: String
    var expires: String
    var status: String
    var version: String
}

private struct SnapshotHead: Decodable {
    var name: String
    var definitionName: String?
    var state: String
    var version: String
    var entered: String
    /// Space-separated (names hold no spaces): cjson writes an empty list as `{}`.
    var allowed: String
    var transaction: TransactionRecord?
    var created: String?

    var allowedEvents: [String] { allowed.split(separator: " ").map(String.init) }

    enum CodingKeys: String, CodingKey {
        case name, state, version, entered, allowed, transaction, created
        case definitionName = "definition_name"
    }
}

private struct NoticeRecord: Decodable {
    var kind: String
    var name: String
    var version: String?
    var next: String?
    var transitions: [EntryRecord]?
    var transactions: [TransactionRecord]?
    var deleted: Bool?
}

/// The definition as stored in the meta hash (`def`).
private struct DefinitionRecord: Codable {
    struct Transition: Codable {
        var event: String
        var from: [String]
        var to: String
    }
    struct Timeout: Codable {
        var state: String
        var afterSeconds: Double
        var event: String

        enum CodingKeys: String, CodingKey {
            case state, event
            case afterSeconds = "after_seconds"
        }
    }
    var initial: String
    var states: [String]
    var transitions: [Transition]
    var timeouts: [Timeout]
}
