import Foundation
import RedisClient
import UsherCore

/// One queue kept in Redis: every `QueueEngine` operation as one call of
/// `queue.lua`, with the engine's semantics (`.atMostResource` holds). The
/// storage budget (`max_stored_bytes`) does not apply: Redis's `maxmemory` bounds it.
package struct RedisQueueStore: Sendable {
    static let script = ResourceScript(kindSources: PackageResources.line_lua, PackageResources.queue_lua)
    /// The parts of a queue's keys, in the order `queue.lua` reads `KEYS`.
    static let parts = ["meta", "wait", "arr", "hold", "exp", "delayed", "vis", "lk", "lp", "fin", "holds", "watch"]

    let keys: ResourceKeys
    let connections: RedisConnectionPool
    let time: ScriptTime
    /// Where operations publish their notices.
    let channel: String
    /// Where `delete` publishes (every instance must hear it).
    let deletionChannel: String
    let onDeadline: @Sendable (Timestamp?) -> Void
    /// Hears that a script found the resource's keys missing.
    let onMissing: @Sendable () -> Void
    let keyList: [String]

    package init(
        keys: ResourceKeys, connections: RedisConnectionPool, time: ScriptTime, channel: String,
        deletionChannel: String? = nil, onDeadline: @escaping @Sendable (Timestamp?) -> Void,
        onMissing: @escaping @Sendable () -> Void = {}
    ) {
        self.keys = keys
        self.connections = connections
        self.time = time
        self.channel = channel
        self.deletionChannel = deletionChannel ?? channel
        self.onDeadline = onDeadline
        self.onMissing = onMissing
        self.keyList = Self.parts.map(keys.key)
    }

    // MARK: - Resource

    /// Creates the queue, or answers the existing one's config with `created == false`.
    package func create(_ config: QueueConfig) async throws(QueueError) -> (config: QueueConfig, created: Bool) {
        let reply = try await run("create", Self.configArguments(config))
        return (try Self.config(reply.dropFirst()), reply.first?.string == "1")
    }

    /// Removes every key of the queue; true when it existed.
    package func delete() async throws(QueueError) -> Bool {
        try await run("delete", [], channel: deletionChannel).first?.string == "1"
    }

    package func config() async throws(QueueError) -> QueueConfig {
        try Self.config(try await run("config", [])[...])
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
        let arguments = [capacity, maxWaiting] + hold + [dedup, opposites, history] + idle + claim
        return try Self.config(try await run("patch", arguments)[...])
    }

    // MARK: - Visitors

    /// `QueueEngine.enqueue`, or with `tryOnce` `enqueueOrTimeOut`.
    package func enqueue(_ r: VisitorRequest, tryOnce: Bool = false) async throws(QueueError) -> (
        view: VisitorView, created: Bool
    ) {
        try enqueued(try await run("enqueue", Self.enqueueArguments(r, tryOnce: tryOnce), hold: r.holdSeconds))
    }

    /// `enqueue` answered through `answer`, from the connection's queue (no task).
    package func enqueue(
        _ r: VisitorRequest, tryOnce: Bool,
        answer: @escaping @Sendable (Result<(view: VisitorView, created: Bool), QueueError>) -> Void
    ) {
        send("enqueue", Self.enqueueArguments(r, tryOnce: tryOnce), hold: r.holdSeconds) { result in
            answer(result.flatMap { items in Result { () throws(QueueError) in try enqueued(items) } })
        }
    }

    private static func enqueueArguments(_ r: VisitorRequest, tryOnce: Bool) -> [String] {
        let problem = QueueEngine.requestProblem(r) ?? QueueEngine.holdRangeProblem(r.holdSeconds)
        let payload: String = r.payload.map(Self.jsonText) ?? ""
        let holdMicros: String = r.holdSeconds.map { String(Self.micros($0)) } ?? "-1"
        let holdText: String = r.holdSeconds.map(Self.secondsText) ?? ""
        let delay: String = String(r.delaySeconds.map(Self.micros) ?? 0)
        let request: [String] = [r.id ?? "", r.key ?? "", r.action ?? "", payload, String(r.priority)]
        return request + [holdMicros, holdText, delay] + Self.problemArguments(problem) + [tryOnce ? "1" : "0"]
    }

    private func enqueued(_ reply: [RedisReply]) throws(QueueError) -> (view: VisitorView, created: Bool) {
        (try view(reply.first), reply.dropFirst().first?.string == "1")
    }

    /// `operation` on one visitor, its view answered through `answer` from the
    /// connection's queue (no task): `complete`, `extend`, `remove`, `visitor`.
    package func visitorOperation(
        _ operation: VisitorOperation, answer: @escaping @Sendable (Result<VisitorView, QueueError>) -> Void
    ) {
        let (name, arguments, hold) = operation.call
        send(name, arguments, hold: hold) { result in
            answer(result.flatMap { items in Result { () throws(QueueError) in try view(items.first) } })
        }
    }

    /// The operations on one visitor that answer its view.
    package enum VisitorOperation: Sendable {
        case complete(id: String)
        case extend(id: String, holdSeconds: Double?)
        case remove(id: String)
        case read(id: String)

        /// The script's operation, its arguments and the hold asked for.
        var call: (String, [String], Double?) {
            switch self {
            case .complete(let id): ("complete", [id], nil)
            case .extend(let id, let holdSeconds):
                ("extend", RedisQueueStore.extendArguments(id, holdSeconds), holdSeconds)
            case .remove(let id): ("remove", [id], nil)
            case .read(let id): ("visitor", [id, ""], nil)
            }
        }
    }

    /// A try-acquire's wait ended: see `QueueEngine.timeOut`.
    package func timeOut(id: String) async throws(QueueError) -> VisitorView {
        try view(try await run("time_out", [id]).first)
    }

    package func complete(id: String) async throws(QueueError) -> VisitorView {
        try view(try await run("complete", [id]).first)
    }

    package func extend(id: String, holdSeconds: Double?) async throws(QueueError) -> VisitorView {
        try view(try await run("extend", Self.extendArguments(id, holdSeconds), hold: holdSeconds).first)
    }

    static func extendArguments(_ id: String, _ holdSeconds: Double?) -> [String] {
        let holdMicros: String = holdSeconds.map { String(Self.micros($0)) } ?? ""
        let holdText: String = holdSeconds.map(Self.secondsText) ?? ""
        return [id, holdMicros, holdText] + Self.problemArguments(QueueEngine.holdRangeProblem(holdSeconds))
    }

    package func remove(id: String) async throws(QueueError) -> VisitorView {
        try view(try await run("remove", [id]).first)
    }

    /// One visitor, live or remembered (a waiting one with its position and estimate).
    /// `heardUntil`: a long-poll parked on it until then (its client counts as heard of meanwhile).
    package func visitor(id: String, heardUntil: Timestamp? = nil) async throws(QueueError) -> VisitorView {
        try view(try await run("visitor", [id, heardUntil.map { String($0.micros) } ?? ""]).first)
    }

    /// See `QueueEngine.undoGrant`: nil, changing nothing, when `id` no longer holds grant `fence`.
    package func undoGrant(id: String, fence: Int64) async throws(QueueError) -> VisitorView? {
        let reply = try await run("undo_grant", [id, String(fence)])
        return reply.isEmpty ? nil : try view(reply.first)
    }

    /// The client of a waiting or delayed visitor hung up (`QueueEngine.disconnect`);
    /// nil when no visitor has this id.
    package func disconnect(id: String) async throws(QueueError) -> VisitorView? {
        do {
            return try view(try await run("disconnect", [id]).first)
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
        let reply = try await run("state", arguments)
        guard reply.count >= 25, let holdingCount = reply[1].int, let waitingCount = reply[2].int,
            let delayedCount = reply[3].int, reply.count == 25 + Int(holdingCount + waitingCount + delayedCount)
        else { throw .backendUnavailable("unexpected state reply") }
        let counts = try Self.counts(reply[4..<17])
        let config = try Self.config(reply[17..<25])
        var index = 25
        func views(_ n: Int64) throws(QueueError) -> [(view: VisitorView, seq: Int64?)] {
            var out: [(VisitorView, Int64?)] = []
            for _ in 0..<n {
                out.append(try decodedView(reply[index]))
                index += 1
            }
            return out
        }
        let holding = try views(holdingCount)
        let waiting = try views(waitingCount)
        let delayed = try views(delayedCount)
        var state = QueueState(
            name: keys.name, config: config, holding: holding.map(\.view), waiting: waiting.map(\.view), counts: counts)
        state.delayed = delayed.map(\.view)
        state.cursors =
            holding.map { .holding(fence: $0.view.fence ?? 0) }
            + waiting.map { .waiting(priority: Int32($0.view.priority), seq: $0.seq ?? 0) }
        state.more = reply[0].string == "1"
        return state
    }

    /// Counts and totals after applying now, and when the oldest waiter entered the line.
    package func counts() async throws(QueueError) -> (counts: QueueCounts, oldestWaitingSince: Timestamp?) {
        let reply = try await run("counts", [])
        guard reply.count == 14 else { throw .backendUnavailable("unexpected counts reply") }
        return (try Self.counts(reply[0..<13]), reply[13].int.map(Timestamp.init(micros:)))
    }

    /// Applies what is due (any instance may run it at a deadline it knows).
    package func tick() async throws(QueueError) {
        _ = try await run("tick", [])
    }

    // MARK: - Calls

    /// Runs `operation`; reports the next deadline; maps refusals to `QueueError`.
    /// `hold` is the hold the caller asked for (for the message of a too long one).
    private func run(
        _ operation: String, _ arguments: [String], hold: Double? = nil, channel: String? = nil
    ) async throws(QueueError) -> [RedisReply] {
        do {
            return try await Self.script.call(
                operation, keys: keyList, time: time, channel: channel ?? self.channel,
                arguments: [keys.name] + arguments, on: connections, onDeadline: onDeadline,
                onMissing: onMissing
            ).dropFirst().map { $0 }
        } catch {
            throw Self.error(error, hold: hold)
        }
    }

    /// `run` answered through `answer`, from the connection's queue (no task).
    private func send(
        _ operation: String, _ arguments: [String], hold: Double?,
        answer: @escaping @Sendable (Result<[RedisReply], QueueError>) -> Void
    ) {
        Self.script.send(
            operation, keys: keyList, time: time, channel: channel, arguments: [keys.name] + arguments,
            on: connections.route(keys: keyList)
        ) { result in
            switch result {
            case .success(let reply): answer(Result { () throws(QueueError) in try items(of: reply, operation) })
            case .failure(let error):
                if error.isMissing { onMissing() }
                answer(.failure(Self.error(error, hold: hold)))
            }
        }
    }

    /// The items of a reply after its first, the next deadline, which it reports.
    private func items(of reply: RedisReply, _ operation: String) throws(QueueError) -> [RedisReply] {
        do throws(ScriptFailure) {
            return try ResourceScript.deadlineLed(reply, operation, onDeadline: onDeadline).dropFirst().map { $0 }
        } catch {
            throw Self.error(error, hold: nil)
        }
    }

    static func error(_ failure: ScriptFailure, hold: Double?) -> QueueError {
        switch failure {
        case .unavailable(let why), .redis(let why):
            return .backendUnavailable(why)
        case .refused(let code, let detail):
            switch code {
            case "gone": return .gone
            case "not_found": return .notFound("visitor \"\(detail)\"")
            case "not_granted":
                return .notGranted(current: VisitorStatus(rawValue: detail) ?? .completed)
            case "full": return .full(retryAfterSeconds: Int(detail) ?? 1)
            case "invalid":
                // Redis turns newlines in errors into spaces; field names hold none.
                let parts = detail.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
                return .invalid(field: String(parts[0]), message: parts.count > 1 ? String(parts[1]) : "")
            case "hold_excess":
                if let hold, let limit = Double(detail),
                    let problem = QueueEngine.holdLimitProblem(hold, limit: limit)
                {
                    return problem
                }
                return .invalid(field: "hold_seconds", message: "too long for this queue")
            default:
                return .backendUnavailable("\(code) \(detail)")
            }
        }
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
        ] + secondsArguments(c.idleSeconds) + secondsArguments(c.claimSeconds)
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

    /// capacity, max_waiting, hold_seconds, dedup, opposites, history, idle_seconds, claim_seconds.
    static func config(_ fields: ArraySlice<RedisReply>) throws(QueueError) -> QueueConfig {
        let f = fields.map { $0.string ?? "" }
        guard f.count == 8, let capacity = Int(f[0]), let maxWaiting = Int(f[1]), let hold = Double(f[2]),
            let dedup = DedupMode(rawValue: f[3]), let history = Int(f[5]), let idle = Double(f[6]),
            let claim = Double(f[7]), case .array(let list) = try? JSONValue.parse(f[4])
        else { throw .backendUnavailable("unexpected config") }
        let opposites = list.map { pair -> [String] in
            guard case .array(let items) = pair else { return [] }
            return items.compactMap { if case .string(let s) = $0 { s } else { nil } }
        }
        return QueueConfig(
            capacity: capacity, maxWaiting: maxWaiting, holdSeconds: hold, dedup: dedup, opposites: opposites,
            history: history, idleSeconds: idle, claimSeconds: claim)
    }

    static func counts(_ fields: ArraySlice<RedisReply>) throws(QueueError) -> QueueCounts {
        let n = fields.map { $0.int.map(Int.init) }
        guard n.count == 13, n.allSatisfy({ $0 != nil }) else { throw .backendUnavailable("unexpected counts") }
        var c = QueueCounts()
        c.waiting = n[0]!
        c.holding = n[1]!
        c.delayed = n[2]!
        c.enqueuedTotal = n[3]!
        c.grantedTotal = n[4]!
        c.completedTotal = n[5]!
        c.releasedTotal = n[6]!
        c.expiredTotal = n[7]!
        c.cancelledTotal = n[8]!
        c.mergedTotal = n[9]!
        c.timedOutTotal = n[10]!
        c.abandonedTotal = n[11]!
        c.unclaimedTotal = n[12]!
        return c
    }

    func view(_ reply: RedisReply?) throws(QueueError) -> VisitorView {
        guard let reply else { throw .backendUnavailable("missing visitor") }
        return try decodedView(reply).view
    }

    func decodedView(_ reply: RedisReply) throws(QueueError) -> (view: VisitorView, seq: Int64?) {
        guard case .bulk(let bytes) = reply, let view = Self.view(bytes, queue: keys.name) else {
            throw .backendUnavailable("unexpected visitor")
        }
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
    package static func decodeNotice(_ payload: [UInt8]) -> QueueNotice? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any] else { return nil }
        return decodeNotice(object)
    }

    /// Decodes a notice already parsed into Foundation objects.
    package static func decodeNotice(_ object: [String: Any]) -> QueueNotice? {
        guard object["kind"] as? String == "queue", let name = object["name"] as? String else { return nil }
        guard let time = (object["time"] as? String).flatMap({ Int64($0) }) else { return nil }
        if object["deleted"] as? Bool == true {
            return QueueNotice(name: name, time: Timestamp(micros: time), changed: [], deleted: true)
        }
        var changed: [VisitorView] = []
        for case let text as String in object["changed"] as? [Any] ?? [] {
            guard let decoded = view(Array(text.utf8), queue: name) else { return nil }
            changed.append(decoded.view)
        }
        var updated: ConfigChanges?
        if let before = object["config_before"] as? [String], let after = object["config"] as? [String] {
            let b = try? config(before.map { RedisReply.bulk(Array($0.utf8)) }[...])
            let a = try? config(after.map { RedisReply.bulk(Array($0.utf8)) }[...])
            if let b, let a { updated = QueueConfig.changes(from: b, to: a) }
        }
        var notice = QueueNotice(name: name, time: Timestamp(micros: time), changed: changed, deleted: false)
        notice.next = (object["next"] as? String).flatMap { Int64($0) }.map(Timestamp.init(micros:))
        notice.updated = updated
        notice.grantWaits = (object["waits"] as? [String] ?? []).compactMap { Int64($0) }
        return notice
    }
}

/// What one queue operation changed, as every instance hears it.
package struct QueueNotice: Sendable {
    package var name: String
    /// The operation's time.
    package var time: Timestamp
    /// Each visitor whose status changed or who started waiting, in the engine's
    /// `drainChanges` order, as it stands after the operation.
    package var changed: [VisitorView]
    /// The queue's next deadline, if any.
    package var next: Timestamp?
    /// The queue was deleted.
    package var deleted: Bool
    /// What a `PATCH` changed (possibly nothing); nil for other operations.
    package var updated: ConfigChanges?
    /// How long, in µs, each visitor granted by the operation waited in the
    /// line (`QueueEngine.waitHistogram` observes the same).
    package var grantWaits: [Int64] = []

    init(name: String, time: Timestamp, changed: [VisitorView], deleted: Bool) {
        self.name = name
        self.time = time
        self.changed = changed
        self.deleted = deleted
    }
}
