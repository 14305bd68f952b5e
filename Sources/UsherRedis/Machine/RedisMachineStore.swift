import Foundation
import Locking
import RedisClient
import UsherCore

/// What one machine operation changed, as `machine.lua` publishes it. In
/// the memory machine's event order, the changes sort by version, a
/// transition before the transaction it committed (which shares its version).
struct MachineNotice: Sendable, Equatable {
    package let name: String
    /// The version after the operation (0 when `deleted`).
    package let version: Int64
    /// Transitions made (`transition` events: client events, commits, timeouts), in order.
    package let transitions: [MachineTransition]
    /// Transactions opened, committed, aborted or expired (the `transaction-*` events), in order.
    let transactions: [MachineTransaction]
    /// The next deadline (a state timeout or a transaction's expiry), if any.
    package let next: Timestamp?
    let deleted: Bool
}

/// One machine kept in Redis: `StateMachine`'s operations, each one EVALSHA
/// of `machine.lua` that first applies the timeouts and expiries due.
///
/// Versions are time-based: each change takes max(last + 1, now in µs), so
/// `If-Match` and waits work as in memory (a change moves the version, only
/// forward) and a version lost in a failover is not reused for other content.
package struct RedisMachineStore: ScriptStore {
    /// The script's name in Redis (`EVALSHA`), for measurements.
    static var scriptSHA1: String { MachineScript.script.script.sha1 }

    /// The parts of a machine's keys, in the order `machine.lua` reads `KEYS`.
    static let parts = ["meta", "history"]

    let runner: ScriptRunner<MachineScript>
    package var keys: ResourceKeys { runner.keys }
    /// The last definition decoded, by its text: it is fixed at creation.
    private let definitions = DefinitionCache()

    init(runner: ScriptRunner<MachineScript>) {
        self.runner = runner
    }

    /// Creates the machine in its initial state, or, when it exists, answers
    /// it as it is (`created` false; the caller compares the definitions).
    package func create(definitionName: String?, definition: MachineDefinition) async throws(MachineError) -> (
        snapshot: MachineSnapshot, created: Bool
    ) {
        let arguments =
            [keys.name, definitionName ?? "", try Self.definitionText(definition), definition.initial]
            + Self.lookups(definition)
        let reply = try await run(.create, arguments) { r throws(ReplyShapeError) in try SnapshotReply(&r) }
        return try (snapshot(from: reply), reply.head.created == "1")
    }

    /// Deletes every key of the machine; false when there was none.
    package func delete() async throws(MachineError) -> Bool {
        try await runner.delete(.delete, context: ())
    }

    /// The machine as it is now.
    package func snapshot() async throws(MachineError) -> MachineSnapshot {
        try snapshot(from: await run(.snapshot) { r throws(ReplyShapeError) in try SnapshotReply(&r) })
    }

    /// Applies `event`, checked as `MachineEngine.fire` checks it.
    @discardableResult
    package func fire(event: String, expectedVersion: Int64? = nil, data: JSONValue? = nil)
        async throws(MachineError) -> TransitionResult
    {
        let entry = try await run(.fire, [event, expectedVersion.map(String.init) ?? "", try Self.payloadText(data)]) {
            r throws(ReplyShapeError) in try r.json(EntryRecord.self, "transition")
        }
        return TransitionResult(try Self.transition(entry))
    }

    /// Opens a transaction for `event` that expires after `seconds`.
    @discardableResult
    func open(event: String, expectedVersion: Int64? = nil, data: JSONValue? = nil, seconds: Double)
        async throws(MachineError) -> MachineTransaction
    {
        let arguments = [
            event, expectedVersion.map(String.init) ?? "", try Self.payloadText(data),
            String(Timestamp.micros(fromSeconds: seconds)),
        ]
        let record = try await run(.open, arguments) { r throws(ReplyShapeError) in
            try r.json(TransactionRecord.self, "transaction")
        }
        return try Self.transaction(record)
    }

    /// Commits the open transaction `id`: its transition happens now.
    @discardableResult
    func commit(transaction id: String) async throws(MachineError) -> TransitionResult {
        let entry = try await run(.commit, [id]) { r throws(ReplyShapeError) in
            try r.json(EntryRecord.self, "transition")
        }
        return TransitionResult(try Self.transition(entry))
    }

    /// Aborts the open transaction `id`: the state stays.
    @discardableResult
    func abort(transaction id: String) async throws(MachineError) -> MachineTransaction {
        try Self.transaction(
            try await run(.abort, [id]) { r throws(ReplyShapeError) in try r.json(TransactionRecord.self, "transaction")
            })
    }

    /// Applies the timeouts and expiries due now; harmless to run from any number of instances.
    package func tick() async throws(MachineError) {
        try await runner.run(ScriptCall(.tick, context: ()))
    }

    /// Transactions ended so far, by outcome.
    package func transactionCounts() async throws(MachineError) -> TransactionCounts {
        try await run(.counts) { r throws(ReplyShapeError) in
            TransactionCounts(
                committed: try r.int("committed"), aborted: try r.int("aborted"), expired: try r.int("expired"))
        }
    }

    /// A notice `machine.lua` published, or nil when the payload is not a machine's.
    static func decodeNotice(_ payload: [UInt8]) -> MachineNotice? {
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

    /// `operation`, its reply read by `read`.
    private func run<Reply: Sendable>(
        _ operation: MachineScript.Operation, _ arguments: [String] = [],
        read: @escaping @Sendable (inout ReplyReader) throws(ReplyShapeError) -> Reply
    ) async throws(MachineError) -> Reply {
        try await runner.run(ScriptCall(operation, arguments, read: read))
    }

    fileprivate static func unreadable(_ what: String) -> MachineError {
        .backendUnavailable("unreadable \(what) in the machine script's reply")
    }

    // MARK: - Decoding

    private func snapshot(from reply: SnapshotReply) throws(MachineError) -> MachineSnapshot {
        let head = reply.head
        let definitionText = reply.definition
        let history = try reply.history.map { e throws(MachineError) in try Self.transition(e) }
        return MachineSnapshot(
            name: head.name, definitionName: head.definitionName,
            definition: try definitions.definition(definitionText),
            state: head.state, version: try Self.int(head.version), allowedEvents: head.allowedEvents,
            enteredAt: try Self.timestamp(head.entered), history: history,
            transaction: try head.transaction.map { t throws(MachineError) in try Self.transaction(t) })
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

    fileprivate static func transaction(_ t: TransactionRecord) throws(MachineError) -> MachineTransaction {
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
/// `machine.lua`: its operations and refusals.
enum MachineScript: ScriptKind {
    static let script = ResourceScript(kindSources: PackageResources.machine_lua)
    static var leadsWithName: Bool { false }

    enum Operation: String, Sendable {
        case create, delete, snapshot, fire, open, commit, abort, tick, counts
    }

    enum Refusal: String, ScriptRefusal {
        case gone
        case unknownEvent = "unknown_event"
        case invalidTransition = "invalid_transition"
        case versionMismatch = "version_mismatch"
        case transactionOpen = "transaction_open"
        case transactionEnded = "transaction_ended"
        case unknownTransaction = "unknown_transaction"
    }

    typealias Context = Void

    static func failure(_ refusal: Refusal, detail: String, context: Void) -> MachineError {
        let words = detail.split(separator: " ").map(String.init)
        switch refusal {
        case .gone: return .gone
        case .unknownEvent: return .unknownEvent(allowedEvents: words)
        case .invalidTransition:
            return .invalidTransition(state: words.first ?? "", allowedEvents: Array(words.dropFirst()))
        case .versionMismatch:
            guard let current = Int64(detail) else { return RedisMachineStore.unreadable("version") }
            return .versionMismatch(current: current)
        case .transactionOpen:
            guard let record = try? JSONDecoder().decode(TransactionRecord.self, from: Data(detail.utf8)),
                let open = try? RedisMachineStore.transaction(record)
            else { return RedisMachineStore.unreadable("transaction") }
            return .transactionOpen(open)
        case .transactionEnded:
            guard let status = MachineTransaction.Status(rawValue: detail) else {
                return RedisMachineStore.unreadable("status")
            }
            return .transactionEnded(status)
        case .unknownTransaction: return .unknownTransaction
        }
    }
}

/// A snapshot as `machine.lua` answers it: the head, the definition's text, the history.
private struct SnapshotReply: Sendable {
    let head: SnapshotHead
    let definition: String
    let history: [EntryRecord]

    init(_ r: inout ReplyReader) throws(ReplyShapeError) {
        head = try r.json(SnapshotHead.self, "head")
        definition = try r.text("definition")
        history = try r.json([EntryRecord].self, "history")
    }
}

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
