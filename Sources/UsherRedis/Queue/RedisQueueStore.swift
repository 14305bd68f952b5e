import Foundation
import RedisClient
import UsherCore

/// One queue kept in Redis: every `QueueEngine` operation as one call of
/// `queue.lua`, with the engine's semantics (`.atMostResource` holds). The
/// storage budget (`max_stored_bytes`) does not apply: Redis's `maxmemory` bounds it.
package struct RedisQueueStore: ScriptStore {
    /// The parts of a queue's keys, in the order `queue.lua` reads `KEYS`.
    static let parts = ["meta", "wait", "arr", "hold", "exp", "delayed", "vis", "lk", "lp", "fin", "holds", "watch"]

    let runner: ScriptRunner<QueueScript>
    var keys: ResourceKeys { runner.keys }

    init(runner: ScriptRunner<QueueScript>) {
        self.runner = runner
    }

    // MARK: - Resource

    /// Creates the queue, or answers the existing one's config with `created == false`.
    package func create(_ config: QueueConfig) async throws(QueueError) -> (config: QueueConfig, created: Bool) {
        try await runner.run(
            ScriptCall(.create, Self.configArguments(config), context: nil) { r throws(ReplyShapeError) in
                let created = try r.flag("created")
                return (try Self.config(&r), created)
            })
    }

    /// Removes every key of the queue; true when it existed.
    package func delete() async throws(QueueError) -> Bool {
        try await runner.delete(.delete, context: nil)
    }

    package func config() async throws(QueueError) -> QueueConfig {
        try await runner.run(ScriptCall(.config, context: nil) { r throws(ReplyShapeError) in try Self.config(&r) })
    }

    /// `PATCH`: the config after the change (the notice carries what changed).
    package func apply(_ patch: QueuePatch) async throws(QueueError) -> QueueConfig {
        let hold: [String] =
            patch.holdSeconds.map { [Self.secondsText($0), String(Self.micros($0))] } ?? ["", ""]
        let capacity: String = patch.capacity.map { String($0) } ?? ""
        let maxWaiting: String = patch.maxWaiting.map { String($0) } ?? ""
        let dedup: String = patch.dedup?.rawValue ?? ""
        let opposites: String = patch.opposites.map(Self.oppositesText) ?? ""
        let history: String = patch.history.map { String($0) } ?? ""
        let idle = Self.secondsArguments(patch.idleSeconds)
        let claim = Self.secondsArguments(patch.claimSeconds)
        let keep: String = patch.dedupKeep?.rawValue ?? ""
        let arguments =
            [capacity, maxWaiting] + hold + [dedup, opposites, history] + idle + claim + [keep]
            + Self.secondsArguments(patch.dedupSeconds)
        return try await runner.run(
            ScriptCall(.patch, arguments, context: nil) { r throws(ReplyShapeError) in try Self.config(&r) })
    }

    // MARK: - Visitors

    /// `QueueEngine.enqueue`, or with `tryOnce` `enqueueOrTimeOut`.
    package func enqueue(_ r: VisitorRequest, tryOnce: Bool = false) async throws(QueueError) -> (
        view: VisitorView, created: Bool
    ) {
        try await runner.run(enqueueCall(r, tryOnce: tryOnce))
    }

    /// `enqueue` answered through `answer`, from the connection's queue (no task).
    package func enqueue(
        _ r: VisitorRequest, tryOnce: Bool,
        answer: @escaping @Sendable (Result<(view: VisitorView, created: Bool), QueueError>) -> Void
    ) {
        runner.send(enqueueCall(r, tryOnce: tryOnce), answer: answer)
    }

    private func enqueueCall(_ r: VisitorRequest, tryOnce: Bool) -> ScriptCall<
        QueueScript, (view: VisitorView, created: Bool)
    > {
        let problem = QueueEngine.requestProblem(r) ?? QueueEngine.holdRangeProblem(r.holdSeconds)
        let payload: String = r.payload.map(Self.jsonText) ?? ""
        let holdMicros: String = r.holdSeconds.map { String(Self.micros($0)) } ?? "-1"
        let holdText: String = r.holdSeconds.map(Self.secondsText) ?? ""
        let delay: String = String(r.delaySeconds.map(Self.micros) ?? 0)
        let request: [String] = [r.id ?? "", r.key ?? "", r.action ?? "", payload, String(r.priority)]
        let arguments =
            request + [holdMicros, holdText, delay] + Self.problemArguments(problem) + [tryOnce ? "1" : "0"]
        let queue = keys.name
        return ScriptCall(.enqueue, arguments, context: r.holdSeconds) { r throws(ReplyShapeError) in
            (try Self.view(&r, queue: queue).view, try r.flag("created"))
        }
    }

    /// `operation` on one visitor, its view answered through `answer` from the
    /// connection's queue (no task): `complete`, `extend`, `remove`, `visitor`.
    func visitorOperation(
        _ operation: VisitorOperation, answer: @escaping @Sendable (Result<VisitorView, QueueError>) -> Void
    ) {
        runner.send(viewCall(operation.call), answer: answer)
    }

    /// The operations on one visitor that answer its view.
    enum VisitorOperation: Sendable {
        case complete(id: String)
        case extend(id: String, holdSeconds: Double?)
        case remove(id: String)
        case read(id: String)

        /// The script's operation, its arguments and the hold asked for.
        var call: (QueueScript.Operation, [String], Double?) {
            switch self {
            case .complete(let id): (.complete, [id], nil)
            case .extend(let id, let holdSeconds):
                (.extend, RedisQueueStore.extendArguments(id, holdSeconds), holdSeconds)
            case .remove(let id): (.remove, [id], nil)
            case .read(let id): (.visitor, [id, ""], nil)
            }
        }
    }

    /// A call that answers one visitor's view.
    private func viewCall(_ call: (QueueScript.Operation, [String], Double?)) -> ScriptCall<QueueScript, VisitorView> {
        let queue = keys.name
        return ScriptCall(call.0, call.1, context: call.2) { r throws(ReplyShapeError) in
            try Self.view(&r, queue: queue).view
        }
    }

    /// A try-acquire's wait ended: see `QueueEngine.timeOut`.
    func timeOut(id: String) async throws(QueueError) -> VisitorView {
        try await runner.run(viewCall((.timeOut, [id], nil)))
    }

    package func complete(id: String) async throws(QueueError) -> VisitorView {
        try await runner.run(viewCall(VisitorOperation.complete(id: id).call))
    }

    func extend(id: String, holdSeconds: Double?) async throws(QueueError) -> VisitorView {
        try await runner.run(viewCall(VisitorOperation.extend(id: id, holdSeconds: holdSeconds).call))
    }

    static func extendArguments(_ id: String, _ holdSeconds: Double?) -> [String] {
        let holdMicros: String = holdSeconds.map { String(Self.micros($0)) } ?? ""
        let holdText: String = holdSeconds.map(Self.secondsText) ?? ""
        return [id, holdMicros, holdText] + Self.problemArguments(QueueEngine.holdRangeProblem(holdSeconds))
    }

    package func remove(id: String) async throws(QueueError) -> VisitorView {
        try await runner.run(viewCall(VisitorOperation.remove(id: id).call))
    }

    /// One visitor, live or remembered (a waiting one with its position and estimate).
    /// `heardUntil`: a long-poll parked on it until then (its client counts as heard of meanwhile).
    package func visitor(id: String, heardUntil: Timestamp? = nil) async throws(QueueError) -> VisitorView {
        try await runner.run(viewCall((.visitor, [id, heardUntil.map { String($0.micros) } ?? ""], nil)))
    }

    /// See `QueueEngine.undoGrant`: nil, changing nothing, when `id` no longer holds grant `fence`.
    func undoGrant(id: String, fence: Int64) async throws(QueueError) -> VisitorView? {
        let queue = keys.name
        return try await runner.run(
            ScriptCall(.undoGrant, [id, String(fence)], context: nil) { r throws(ReplyShapeError) in
                r.isAtEnd ? nil : try Self.view(&r, queue: queue).view
            })
    }

    /// The client of a waiting or delayed visitor hung up (`QueueEngine.disconnect`);
    /// nil when no visitor has this id.
    func disconnect(id: String) async throws(QueueError) -> VisitorView? {
        do {
            return try await runner.run(viewCall((.disconnect, [id], nil)))
        } catch .notFound {
            return nil
        }
    }

    // MARK: - Listing

    /// `QueueEngine.state`: the same pages, cursors and `more`.
    package func state(limit: Int, after cursor: QueueCursor? = nil) async throws(QueueError) -> QueueState {
        let limit = min(max(0, limit), 1_000_000_000)
        var arguments = [String(limit)]
        switch cursor {
        case nil: arguments += ["", "", ""]
        case .holding(let fence): arguments += ["h", String(fence), ""]
        case .waiting(let priority, let seq): arguments += ["w", String(priority), String(seq)]
        }
        let queue = keys.name
        return try await runner.run(
            ScriptCall(.state, arguments, context: nil) { r throws(ReplyShapeError) in
                try Self.state(&r, queue: queue)
            })
    }

    /// more, the three list lengths, counts, config, then the holding, waiting and delayed views.
    private static func state(_ r: inout ReplyReader, queue: String) throws(ReplyShapeError) -> QueueState {
        let more = try r.flag("more")
        let holdingCount = try r.int("holding count")
        let waitingCount = try r.int("waiting count")
        let delayedCount = try r.int("delayed count")
        let counts = try Self.counts(&r)
        let config = try Self.config(&r)
        let read = { (r: inout ReplyReader) throws(ReplyShapeError) in try Self.view(&r, queue: queue) }
        let holding = try r.list(holdingCount, read)
        let waiting = try r.list(waitingCount, read)
        let delayed = try r.list(delayedCount, read)
        guard r.isAtEnd else { throw ReplyShapeError(what: "end of the state") }
        var state = QueueState(
            name: queue, config: config, holding: holding.map(\.view), waiting: waiting.map(\.view), counts: counts)
        state.delayed = delayed.map(\.view)
        state.cursors =
            holding.map { .holding(fence: $0.view.fence ?? 0) }
            + waiting.map { .waiting(priority: Int32($0.view.priority), seq: $0.seq ?? 0) }
        state.more = more
        return state
    }

    /// Counts and totals after applying now, and when the oldest waiter entered the line.
    package func counts() async throws(QueueError) -> (counts: QueueCounts, oldestWaitingSince: Timestamp?) {
        try await runner.run(
            ScriptCall(.counts, context: nil) { r throws(ReplyShapeError) in
                let counts = try Self.counts(&r)
                let oldest = try r.timestamp("oldest waiting since")
                guard r.isAtEnd else { throw ReplyShapeError(what: "end of the counts") }
                return (counts, oldest)
            })
    }

    /// Applies what is due (any instance may run it at a deadline it knows).
    package func tick() async throws(QueueError) {
        try await runner.run(ScriptCall(.tick, context: nil))
    }

    // MARK: - Encoding

    /// `QueueEngine.micros`: a positive duration is at least 1 µs.
    static func micros(_ seconds: Double) -> Int64 {
        seconds > 0 ? max(1, Timestamp.micros(fromSeconds: seconds)) : 0
    }

    /// Seconds as text Lua's `tonumber` reads back to the same double.
    static func secondsText(_ seconds: Double) -> String { "\(seconds)" }

    static func oppositesText(_ pairs: [[String]]) -> String {
        jsonText(.array(pairs.map { .array($0.map(JSONValue.string)) }))
    }

    static func configArguments(_ c: QueueConfig) -> [String] {
        [
            String(c.capacity), String(c.maxWaiting), secondsText(c.holdSeconds), String(micros(c.holdSeconds)),
            c.dedup.rawValue, oppositesText(c.opposites), String(c.history),
        ] + secondsArguments(c.idleSeconds) + secondsArguments(c.claimSeconds) + [c.dedupKeep.rawValue]
            + secondsArguments(c.dedupSeconds)
    }

    /// A `*_seconds` field as its text and its µs; two empty strings for nil (unchanged).
    static func secondsArguments(_ seconds: Double?) -> [String] {
        seconds.map { [secondsText($0), String(micros($0))] } ?? ["", ""]
    }

    static func problemArguments(_ problem: QueueError?) -> [String] {
        guard case .invalid(let field, let message) = problem else { return ["", ""] }
        return [field, message]
    }

    /// JSON text of a client's value, numbers exact (`JSONEncoder`).
    static func jsonText(_ value: JSONValue) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        guard let data = try? encoder.encode(StoredJSON(value)) else { return "null" }
        return String(decoding: data, as: UTF8.self)
    }

    // MARK: - Decoding

    /// The config as `config_fields` in `line.lua` lists it.
    static func config(_ r: inout ReplyReader) throws(ReplyShapeError) -> QueueConfig {
        let capacity = try r.value("capacity") { Int($0) }
        let maxWaiting = try r.value("max_waiting") { Int($0) }
        let hold = try r.value("hold_seconds") { Double($0) }
        let dedup = try r.value("dedup", DedupMode.init(rawValue:))
        let opposites = try r.value("opposites") { text -> [[String]]? in
            guard case .array(let list) = try? JSONValue.parse(text) else { return nil }
            return list.map { pair -> [String] in
                guard case .array(let items) = pair else { return [] }
                return items.compactMap { if case .string(let s) = $0 { s } else { nil } }
            }
        }
        let history = try r.value("history") { Int($0) }
        let idle = try r.value("idle_seconds") { Double($0) }
        let claim = try r.value("claim_seconds") { Double($0) }
        let keep = try r.value("dedup_keep", DedupKeep.init(rawValue:))
        let dedupSeconds = try r.value("dedup_seconds") { Double($0) }
        return QueueConfig(
            capacity: capacity, maxWaiting: maxWaiting, holdSeconds: hold, dedup: dedup, dedupKeep: keep,
            opposites: opposites, history: history, dedupSeconds: dedupSeconds, idleSeconds: idle,
            claimSeconds: claim)
    }

    /// The counts and totals as `count_fields` in `line.lua` lists them.
    static func counts(_ r: inout ReplyReader) throws(ReplyShapeError) -> QueueCounts {
        var c = QueueCounts()
        c.waiting = try r.int("waiting")
        c.holding = try r.int("holding")
        c.delayed = try r.int("delayed")
        c.enqueuedTotal = try r.int("enqueued_total")
        c.grantedTotal = try r.int("granted_total")
        c.completedTotal = try r.int("completed_total")
        c.releasedTotal = try r.int("released_total")
        c.expiredTotal = try r.int("expired_total")
        c.cancelledTotal = try r.int("cancelled_total")
        c.mergedTotal = try r.int("merged_total")
        c.timedOutTotal = try r.int("timed_out_total")
        c.abandonedTotal = try r.int("abandoned_total")
        c.unclaimedTotal = try r.int("unclaimed_total")
        return c
    }

    /// A visitor's view (JSON text) and its line seq when waiting.
    static func view(_ r: inout ReplyReader, queue: String) throws(ReplyShapeError) -> (
        view: VisitorView, seq: Int64?
    ) {
        guard let view = view(try r.bytes("visitor"), queue: queue) else { throw ReplyShapeError(what: "visitor") }
        return view
    }

    /// A view as `queue.lua` writes it (every number as text), and its line seq when waiting.
    static func view(_ bytes: [UInt8], queue: String) -> (view: VisitorView, seq: Int64?)? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else { return nil }
        return view(object, queue: queue)
    }

    static func view(_ object: [String: Any], queue: String) -> (view: VisitorView, seq: Int64?)? {
        func text(_ name: String) -> String? { object[name] as? String }
        func time(_ name: String) -> Timestamp? { text(name).flatMap { Int64($0) }.map(Timestamp.init(micros:)) }
        guard let id = text("id"), let status = text("status").flatMap(VisitorStatus.init(rawValue:)),
            let enqueuedAt = time("enqueued_at"), let priority = text("priority").flatMap({ Int($0) })
        else { return nil }
        var v = VisitorView(
            id: id, queue: queue, key: text("key"), action: text("action"), priority: priority, status: status,
            enqueuedAt: enqueuedAt)
        if let payload = text("payload") {
            guard let value = try? JSONValue.parse(payload) else { return nil }
            v.payload = value
        }
        v.position = text("position").flatMap { Int($0) }
        v.estimatedWaitSeconds = text("wait_micros").flatMap { Double($0) }.map { ($0 / 1000).rounded() / 1000 }
        v.estimatedWaitReason = text("wait_reason").flatMap(WaitUnknown.init(rawValue:))
        v.grantedAt = time("granted_at")
        v.expiresAt = time("expires_at")
        v.finishedAt = time("finished_at")
        v.fence = text("fence").flatMap { Int64($0) }
        v.mergedInto = text("merged_into")
        v.cancelledWith = text("cancelled_with")
        v.reason = text("reason")
        return (v, text("seq").flatMap { Int64($0) })
    }

    /// Decodes a notice `queue.lua` published; nil for another kind's or a malformed one.
    static func decodeNotice(_ payload: [UInt8]) -> QueueNotice? {
        guard let record = LineNoticeRecord.decode(payload, kind: "queue"), let time = Int64(record.time) else {
            return nil
        }
        let name = record.name
        if record.deleted == true {
            return QueueNotice(name: name, time: Timestamp(micros: time), changed: [], deleted: true)
        }
        var changed: [VisitorView] = []
        for text in record.changed ?? [] {
            guard let decoded = view(Array(text.utf8), queue: name) else { return nil }
            changed.append(decoded.view)
        }
        var updated: ConfigChanges?
        if let before = record.configBefore, let after = record.config {
            var b = ReplyReader(texts: before)
            var a = ReplyReader(texts: after)
            if let b = try? config(&b), let a = try? config(&a) { updated = QueueConfig.changes(from: b, to: a) }
        }
        var notice = QueueNotice(name: name, time: Timestamp(micros: time), changed: changed, deleted: false)
        notice.next = record.next.flatMap { Int64($0) }.map(Timestamp.init(micros:))
        notice.updated = updated
        notice.grantWaits = (record.waits ?? []).compactMap { Int64($0) }
        return notice
    }
}

/// `queue.lua` on `line.lua`: its operations and refusals.
enum QueueScript: ScriptKind {
    static let script = ResourceScript(kindSources: PackageResources.line_lua, PackageResources.queue_lua)

    enum Operation: String, Sendable {
        case create, delete, config, patch, enqueue, complete, extend, remove, visitor, disconnect, state, counts, tick
        case timeOut = "time_out"
        case undoGrant = "undo_grant"
    }

    /// The line's refusals (windows and pools share them).
    enum Refusal: String, ScriptRefusal {
        case gone, full, invalid
        case notFound = "not_found"
        case notGranted = "not_granted"
        case holdExcess = "hold_excess"
    }

    /// The hold a call asked for, for the message of a too long one.
    typealias Context = Double?

    static func failure(_ refusal: Refusal, detail: String, context hold: Double?) -> QueueError {
        switch refusal {
        case .gone: return .gone
        case .notFound: return .notFound("visitor \"\(detail)\"")
        case .notGranted: return .notGranted(current: VisitorStatus(rawValue: detail) ?? .completed)
        case .full: return .full(retryAfterSeconds: Int(detail) ?? 1)
        case .invalid:
            // Redis turns newlines in errors into spaces; field names hold none.
            let parts = detail.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
            return .invalid(field: String(parts.first ?? ""), message: parts.count > 1 ? String(parts[1]) : "")
        case .holdExcess:
            if let hold, let limit = Double(detail), let problem = QueueEngine.holdLimitProblem(hold, limit: limit) {
                return problem
            }
            return .invalid(field: "hold_seconds", message: "too long for this queue")
        }
    }
}

/// What one queue operation changed, as every instance hears it.
struct QueueNotice: Sendable {
    package var name: String
    /// The operation's time.
    var time: Timestamp
    /// Each visitor whose status changed or who started waiting, in the engine's
    /// `drainChanges` order, as it stands after the operation.
    var changed: [VisitorView]
    /// The queue's next deadline, if any.
    package var next: Timestamp?
    /// The queue was deleted.
    var deleted: Bool
    /// What a `PATCH` changed (possibly nothing); nil for other operations.
    package var updated: ConfigChanges?
    /// How long, in µs, each visitor granted by the operation waited in the
    /// line (`QueueEngine.waitHistogram` observes the same).
    var grantWaits: [Int64] = []

    init(name: String, time: Timestamp, changed: [VisitorView], deleted: Bool) {
        self.name = name
        self.time = time
        self.changed = changed
        self.deleted = deleted
    }
}
