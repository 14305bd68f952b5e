import Foundation
import Locking
import RedisClient
import UsherCore

/// What one pipeline operation changed, as `pipeline.lua` publishes it.
struct PipelineNotice: Sendable {
    /// One item event (`pushed`, `delivered`, `consumed`, `released`,
    /// `dead-lettered`, `extended`, `cancelled`) with the item as it was then.
    struct ItemEvent: Sendable {
        package let type: String
        package let item: PipelineItem
        package let reason: String?
    }

    package let name: String
    /// A consumer may now get something (an item ready, a slot freed, resumed).
    let itemsAvailable: Bool
    /// A producer may now push (an item left, capacity grew).
    let roomAvailable: Bool
    /// Ack deadlines that passed: items handed out again, and items that went dead.
    let redelivered: Int
    let deadLettered: Int
    package let events: [ItemEvent]
    /// The config and `paused` before and after a `PATCH` that changed them.
    let updated: (before: PipelineConfig, wasPaused: Bool, after: PipelineConfig, paused: Bool)?
    /// The next deadline (a delay ending or an ack deadline), if any.
    package let next: Timestamp?
    let deleted: Bool
}

/// One pipeline kept in Redis: `PipelineEngine`'s operations, each one
/// EVALSHA of `pipeline.lua` that first applies the deadlines due.
///
/// Payloads are opaque text to Lua. Filters run here, in Swift, on what a
/// take claimed: a take that finds filters reports back in a second call
/// (`taken`) which drops what a filter dropped (`filtered_total`) and
/// announces the rest with the payload delivered. Fences are time-based
/// (max(last + 1, now in µs)), not +1 as in memory. The storage budget
/// (`max_stored_bytes`) does not apply: Redis's `maxmemory` bounds it.
package struct RedisPipelineStore: ScriptStore {
    /// The script's name in Redis (`EVALSHA`), for measurements.
    static var scriptSHA1: String { PipelineScript.script.script.sha1 }
    /// Limits for reading stored filters back: they were checked when they were put.
    private static let storedLimits = JSONLimits(
        maxDepth: JSONLimits.maxDepthRange.upperBound, maxPointerSegments: Int(Int32.max))

    /// The parts of a pipeline's keys, in the order `pipeline.lua` reads `KEYS`.
    static let parts = ["meta", "items", "ready", "timers", "dead", "finished", "filters"]

    let runner: ScriptRunner<PipelineScript>
    package var keys: ResourceKeys { runner.keys }
    /// The live filters last read, by their version.
    private let filterCache = FilterCache()

    init(runner: ScriptRunner<PipelineScript>) {
        self.runner = runner
    }

    // MARK: - Lifecycle

    /// Creates the pipeline, or, when it exists, answers its config as it is
    /// (`created` false; the caller compares). A `source` is the caller's to refuse.
    package func create(_ config: PipelineConfig) async throws(PipelineError) -> (
        config: PipelineConfig, created: Bool
    ) {
        var arguments = [keys.name] + Self.configFields(PipelinePatch(config: config))
        arguments += ["cfilters", try Self.filtersText(config.filters)]
        for (name, filter) in config.filters.sorted(by: { $0.key < $1.key }) {
            arguments += ["filter:\(name)", try Self.encode(StoredJSON(Self.filterJSON(filter)))]
        }
        return try await run(.create, arguments) { r throws(ReplyShapeError) in
            (try Self.config(&r), try r.flag("created"))
        }
    }

    /// Deletes every key of the pipeline; false when there was none.
    package func delete() async throws(PipelineError) -> Bool {
        try await runner.delete(.delete, context: ())
    }

    /// Applies the deadlines due now; harmless to run from any number of instances.
    package func tick() async throws(PipelineError) {
        try await runner.run(ScriptCall(.tick, context: ()))
    }

    // MARK: - Producers

    /// Adds an item (see `PipelineEngine.push`).
    package func push(_ request: PipelinePushRequest) async throws(PipelineError) -> PipelinePushResult {
        try PipelineEngine.validate(request, field: "")
        return try await run(.push, Self.pushArguments(request)) { r throws(ReplyShapeError) in
            try Self.pushResult(&r)
        }
    }

    /// Adds every item or none (see `PipelineEngine.pushBatch`). As in
    /// memory, a batch larger than `capacity` is refused before its entries
    /// are checked: the script checks the size, then refuses an invalid batch.
    func pushBatch(_ requests: [PipelinePushRequest]) async throws(PipelineError) -> [PipelinePushResult] {
        var invalid: PipelineError?
        for (i, r) in requests.enumerated() where invalid == nil {
            do throws(PipelineError) { try PipelineEngine.validate(r, field: "items[\(i)].") } catch { invalid = error }
        }
        var arguments = [invalid == nil ? "valid" : "invalid"]
        if invalid == nil {
            for r in requests { arguments += try Self.pushArguments(r) }
        } else {
            arguments += Array(repeating: "", count: 4 * requests.count)
        }
        do throws(PipelineError) {
            return try await run(.pushBatch, arguments) { r throws(ReplyShapeError) in
                try r.remaining { r throws(ReplyShapeError) in try Self.pushResult(&r) }
            }
        } catch .invalid(field: "", message: "entries") {
            throw invalid ?? Self.unreadable("batch")
        }
    }

    // MARK: - Consumers

    /// Hands out up to `max` items (see `PipelineEngine.take`); filters run
    /// here on what the script claimed, and a dropped item does not count
    /// against `max`. `maxBytes` is measured on the stored payloads.
    package func take(max: Int, ackSeconds: Double? = nil, maxBytes: Int = .max) async throws(PipelineError)
        -> [PipelineDelivery]
    {
        let ack = try Self.ackArgument(ackSeconds)
        var out: [PipelineDelivery] = []
        repeat {
            let taken = try await run(.take, [String(Swift.max(0, max - out.count)), ack, String(maxBytes)]) {
                r throws(ReplyShapeError) in
                (
                    filtersVersion: try r.text("filters version"), unfiltered: try r.flag("unfiltered"),
                    items: try r.remaining { r throws(ReplyShapeError) in try Self.item(&r) }
                )
            }
            let items = taken.items
            if taken.unfiltered || items.isEmpty {
                return out + items.map { PipelineDelivery(handing: $0, payload: $0.payload) }
            }
            let filters = try await filters(version: taken.filtersVersion)
            var report: [String] = []
            var dropped = 0
            for item in items {
                let fence = String(item.fence ?? 0)
                if let shown = filters.apply(to: item.payload) {
                    out.append(PipelineDelivery(handing: item, payload: shown))
                    report += [item.id, fence, try Self.encode(StoredJSON(shown))]
                } else {
                    dropped += 1
                    report += [item.id, fence, ""]
                }
            }
            try await runner.run(ScriptCall(.taken, report, context: ()))
            if dropped == 0 { return out }
        } while out.count < max
        return out
    }

    /// Finishes an in-flight item.
    @discardableResult
    package func consume(_ id: String, fence: Int64? = nil) async throws(PipelineError) -> PipelineItem {
        try await itemCall(.consume, [id, fence.map(String.init) ?? ""])
    }

    /// Puts an in-flight item back (see `PipelineEngine.release`).
    @discardableResult
    func release(_ id: String, delaySeconds: Double? = nil, fence: Int64? = nil) async throws(PipelineError)
        -> PipelineItem
    {
        if let delaySeconds, !Durations.isAllowed(delaySeconds) {
            throw .invalid(field: "delay_seconds", message: Durations.range())
        }
        let delay = String(Timestamp.micros(fromSeconds: delaySeconds ?? 0))
        return try await itemCall(.release, [id, delay, fence.map(String.init) ?? ""])
    }

    /// Moves an in-flight item's ack deadline later (see `PipelineEngine.extend`).
    @discardableResult
    func extend(_ id: String, ackSeconds: Double? = nil, fence: Int64? = nil) async throws(PipelineError)
        -> PipelineItem
    {
        let ack = try Self.ackArgument(ackSeconds)
        return try await itemCall(.extend, [id, ack, fence.map(String.init) ?? ""])
    }

    /// Hand-outs that never reached their consumer go back without counting
    /// (see `PipelineEngine.undeliver`); returns the items that went back.
    @discardableResult
    func undeliver(_ deliveries: [(id: String, fence: Int64)]) async throws(PipelineError) -> [PipelineItem] {
        try await run(.undeliver, deliveries.flatMap { [$0.id, String($0.fence)] }) { r throws(ReplyShapeError) in
            try r.remaining { r throws(ReplyShapeError) in try Self.item(&r) }
        }
    }

    /// Removes a ready, delayed or dead item; a finished one answers as it is.
    @discardableResult
    func cancel(_ id: String) async throws(PipelineError) -> PipelineItem {
        try await itemCall(.cancel, [id])
    }

    /// The item with this id (live, dead or remembered) and its place while ready.
    package func item(_ id: String) async throws(PipelineError) -> (item: PipelineItem, position: Int?) {
        try await run(.item, [id]) { r throws(ReplyShapeError) in
            (try Self.item(&r), Int(try r.text("position")))
        }
    }

    // MARK: - Dead list

    /// Moves dead items back, oldest first, while there is room: how many
    /// moved, and how many are left.
    func redrive() async throws(PipelineError) -> (moved: Int, dead: Int) {
        try await run(.redrive) { r throws(ReplyShapeError) in (try r.int("moved"), try r.int("dead")) }
    }

    /// Up to `limit` dead items after `cursor`, oldest first, with cursors;
    /// and how many there are.
    func deadPage(limit: Int, after cursor: PipelineCursor?) async throws(PipelineError) -> (
        dead: Int, items: [PipelineItem], cursors: [String], more: Bool
    ) {
        var after = ""
        if case .dead(let serial) = cursor { after = String(serial) }
        return try await run(.dead, [String(Swift.max(0, Swift.min(limit, Int.max - 1))), after]) {
            r throws(ReplyShapeError) in
            let count = try r.int("dead count")
            let more = try r.flag("more")
            // Each dead item follows its serial, the cursor after it.
            let page = try r.remaining { r throws(ReplyShapeError) in
                (cursor: PipelineCursor.dead(serial: try r.int64("dead serial")).text, item: try Self.item(&r))
            }
            return (count, page.map(\.item), page.map(\.cursor), more)
        }
    }

    // MARK: - State and config

    /// The state with the first `limit` ready items after `cursor` (no parked callers).
    package func state(limit: Int, after cursor: PipelineCursor? = nil) async throws(PipelineError) -> PipelineSnapshot
    {
        var after = ""
        if case .ready(let priority, let seq) = cursor { after = Self.readyPrefix(priority: priority, seq: seq) }
        let limit = Swift.max(0, Swift.min(limit, Int.max - 1))
        let name = keys.name
        return try await run(.state, [String(limit), after]) { r throws(ReplyShapeError) in
            let config = try Self.config(&r)
            let counts = try Self.counts(&r)
            // The gauges: one text of six numbers.
            var g = ReplyReader(texts: try r.text("gauges").split(separator: " ").map(String.init))
            let (ready, delayed, inFlight) = (try g.int("ready"), try g.int("delayed"), try g.int("in flight"))
            let (dead, fence, paused) = (try g.int("dead"), try g.int64("fence"), try g.flag("paused"))
            let more = try r.flag("more")
            var pairs = ReplyReader(texts: try r.json([String].self, "filters"))
            let filters = try Self.filters(&pairs)
            let items = try r.remaining { r throws(ReplyShapeError) in try Self.item(&r) }
            var snapshot = PipelineSnapshot(
                stored: name, config: config, ready: ready, inFlight: inFlight, delayed: delayed, dead: dead,
                fence: fence, filters: filters, items: items, counts: counts)
            snapshot.paused = paused
            snapshot.cursors = items.map { PipelineCursor.ready(priority: Int32($0.priority), seq: $0.readySeq).text }
            snapshot.more = more
            return snapshot
        }
    }

    /// The config (creation filters, patches applied).
    package func config() async throws(PipelineError) -> PipelineConfig {
        try await state(limit: 0).config
    }

    /// Changes the mutable config and `paused` (see `PipelineEngine.apply`); the new config.
    @discardableResult
    package func apply(_ patch: PipelinePatch) async throws(PipelineError) -> PipelineConfig {
        let paused = patch.paused.map { $0 ? "1" : "0" } ?? ""
        return try await run(.patch, [paused] + Self.configFields(patch)) { r throws(ReplyShapeError) in
            try Self.config(&r)
        }
    }

    /// The filters that run now.
    package func filters() async throws(PipelineError) -> PipelineFilters {
        let (version, filters) = try await run(.filters) { r throws(ReplyShapeError) in
            (try r.text("filters version"), try Self.filters(&r))
        }
        filterCache.last.withLock { $0 = (version, filters) }
        return filters
    }

    /// Adds or replaces a filter; true when it is new.
    @discardableResult
    func putFilter(name: String, _ filter: PipelineFilter) async throws(PipelineError) -> Bool {
        guard Names.isValid(name) else {
            throw .invalid(field: "name", message: "must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
        }
        let text = try Self.encode(StoredJSON(Self.filterJSON(filter)))
        return try await run(.filterPut, [name, text, String(PipelineFilter.Limits.count)]) {
            r throws(ReplyShapeError) in try r.flag("created")
        }
    }

    /// Removes a filter; `.notFound(name)` when there is none.
    func removeFilter(name: String) async throws(PipelineError) {
        try await runner.run(ScriptCall(.filterRemove, [name], context: ()))
    }

    // MARK: - Notices

    /// A notice `pipeline.lua` published, or nil when the payload is not a pipeline's.
    static func decodeNotice(_ payload: [UInt8]) -> PipelineNotice? {
        guard let record = try? JSONDecoder().decode(NoticeRecord.self, from: Data(payload)), record.kind == "pipeline"
        else { return nil }
        do throws(PipelineError) {
            var updated: (PipelineConfig, Bool, PipelineConfig, Bool)?
            if let u = record.updated {
                let before = try decode(ConfigRecord.self, u.before)
                let after = try decode(ConfigRecord.self, u.after)
                updated = (try config(before), before.paused == "1", try config(after), after.paused == "1")
            }
            return PipelineNotice(
                name: record.name, itemsAvailable: record.items ?? false, roomAvailable: record.room ?? false,
                redelivered: record.redelivered ?? 0, deadLettered: record.dead_lettered ?? 0,
                events: try (record.events ?? []).map { e throws(PipelineError) in
                    PipelineNotice.ItemEvent(type: e.t, item: try item(e.item), reason: e.reason)
                },
                updated: updated, next: try record.next.map { n throws(PipelineError) in try timestamp(n) },
                deleted: record.deleted ?? false)
        } catch {
            return nil
        }
    }

    // MARK: - Calls

    /// `operation`, its reply read by `read`.
    private func run<Reply: Sendable>(
        _ operation: PipelineScript.Operation, _ arguments: [String] = [],
        read: @escaping @Sendable (inout ReplyReader) throws(ReplyShapeError) -> Reply
    ) async throws(PipelineError) -> Reply {
        try await runner.run(ScriptCall(operation, arguments, read: read))
    }

    /// `operation` answering one item.
    private func itemCall(_ operation: PipelineScript.Operation, _ arguments: [String]) async throws(PipelineError)
        -> PipelineItem
    {
        try await run(operation, arguments) { r throws(ReplyShapeError) in try Self.item(&r) }
    }

    /// The filters of `version`, read again when the cached ones are older.
    private func filters(version: String) async throws(PipelineError) -> PipelineFilters {
        if let cached = filterCache.last.withLock({ $0 }), cached.version == version { return cached.filters }
        return try await filters()
    }

    private static func unreadable(_ what: String) -> PipelineError {
        .backendUnavailable("unreadable \(what) in the pipeline script's reply")
    }

    // MARK: - Encoding

    /// The ack limit argument: µs, or "" for the pipeline's.
    private static func ackArgument(_ seconds: Double?) throws(PipelineError) -> String {
        guard let seconds else { return "" }
        guard Durations.isAllowed(seconds) else { throw .invalid(field: "ack_seconds", message: Durations.range()) }
        return String(Timestamp.micros(fromSeconds: seconds))
    }

    private static func pushArguments(_ r: PipelinePushRequest) throws(PipelineError) -> [String] {
        [
            r.id ?? "", try encode(StoredJSON(r.payload)), String(r.priority),
            String(Timestamp.micros(fromSeconds: r.delaySeconds ?? 0)),
        ]
    }

    /// The patch's fields as the meta hash keeps them (seconds as given and in µs).
    private static func configFields(_ p: PipelinePatch) -> [String] {
        var fields: [String] = []
        if let v = p.capacity { fields += ["capacity", String(v)] }
        if let v = p.maxInFlight { fields += ["max_in_flight", String(v)] }
        if let v = p.ackSeconds { fields += ["ack_s", String(v), "ack_us", String(Timestamp.micros(fromSeconds: v))] }
        if let v = p.maxDeliveries { fields += ["max_deliveries", String(v)] }
        if let v = p.history { fields += ["history", String(v)] }
        if let v = p.dedupSeconds {
            fields += ["dedup_s", String(v), "dedup_us", String(Timestamp.micros(fromSeconds: v))]
        }
        return fields
    }

    /// The first part of a ready member (see `pipeline.lua`): hand-out order as text.
    static func readyPrefix(priority: Int32, seq: Int64) -> String {
        let p = 1_000_000 - Int64(Swift.min(Swift.max(Int(priority), -1_000_000), 1_000_000))
        let s = Swift.min(Swift.max(seq, -seqBias), seqBias - 1) + seqBias
        return padded(p, 7) + padded(s, 16)
    }

    private static let seqBias: Int64 = 1 << 52

    private static func padded(_ n: Int64, _ width: Int) -> String {
        let text = String(n)
        return String(repeating: "0", count: Swift.max(0, width - text.count)) + text
    }

    /// A filter as its request body, which `PipelineFilter.parse` reads back.
    static func filterJSON(_ f: PipelineFilter) -> JSONValue {
        var members: [(String, JSONValue)] = [("priority", .int(f.priority))]
        if let when = f.when {
            var w: [(String, JSONValue)] = [("field", .string(when.field.description))]
            switch when.test {
            case .equals(let v): w.append(("equals", v))
            case .notEquals(let v): w.append(("not_equals", v))
            case .isIn(let vs): w.append(("in", .array(vs)))
            case .exists(let b): w.append(("exists", .bool(b)))
            }
            members.append(("when", .object(w)))
        }
        switch f.action {
        case .drop:
            members.append(("action", .string("drop")))
        case .set(let field, let value):
            members += [("action", .string("set")), ("field", .string(field.description)), ("value", value)]
        case .remove(let field):
            members += [("action", .string("remove")), ("field", .string(field.description))]
        }
        return .object(members)
    }

    private static func filtersText(_ filters: [String: PipelineFilter]) throws(PipelineError) -> String {
        try encode(StoredJSON(.object(filters.sorted { $0.key < $1.key }.map { ($0.key, filterJSON($0.value)) })))
    }

    private static func encode(_ value: some Encodable) throws(PipelineError) -> String {
        do {
            return String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
        } catch {
            throw .backendUnavailable("could not encode for Redis: \(error)")
        }
    }

    // MARK: - Decoding

    private static func decode<T: Decodable>(_ type: T.Type, _ text: String?) throws(PipelineError) -> T {
        guard let text else { throw unreadable("reply") }
        do {
            return try JSONDecoder().decode(type, from: Data(text.utf8))
        } catch {
            throw unreadable("\(T.self)")
        }
    }

    private static func int(_ text: String) throws(PipelineError) -> Int64 {
        guard let value = Int64(text) else { throw unreadable("number") }
        return value
    }

    private static func timestamp(_ text: String) throws(PipelineError) -> Timestamp {
        Timestamp(micros: try int(text))
    }

    private static func json(_ text: String) throws(PipelineError) -> JSONValue {
        do {
            return try JSONValue.parse(text)
        } catch {
            throw unreadable("payload")
        }
    }

    private static func item(_ text: String?) throws(PipelineError) -> PipelineItem {
        try item(try decode(ItemRecord.self, text))
    }

    private static func item(_ r: ItemRecord) throws(PipelineError) -> PipelineItem {
        guard let status = PipelineItemStatus(rawValue: r.st) else { throw unreadable("status") }
        var seq: Int64 = 0
        if let member = r.rm {
            let digits = member.utf8.dropFirst(7).prefix(16)
            guard let value = Int64(String(decoding: digits, as: UTF8.self)) else { throw unreadable("seq") }
            seq = value - seqBias
        }
        return PipelineItem(
            stored: r.id, payload: try json(r.p), priority: r.pri, status: status, deliveries: r.dl,
            createdAt: try timestamp(r.pu), availableAt: try timestamp(r.av),
            takenAt: try r.tk.map { t throws(PipelineError) in try timestamp(t) },
            ackDeadline: try r.ak.map { t throws(PipelineError) in try timestamp(t) },
            fence: try r.fe.map { t throws(PipelineError) in try int(t) },
            deadAt: try r.da.map { t throws(PipelineError) in try timestamp(t) }, seq: seq)
    }

    private static func pushResult(_ text: String?) throws(PipelineError) -> PipelinePushResult {
        let r = try decode(PushRecord.self, text)
        return PipelinePushResult(stored: try item(r.item), position: Int(r.position), created: r.created)
    }

    private static func config(_ text: String?) throws(PipelineError) -> PipelineConfig {
        try config(try decode(ConfigRecord.self, text))
    }

    private static func config(_ r: ConfigRecord) throws(PipelineError) -> PipelineConfig {
        guard let capacity = Int(r.capacity), let maxInFlight = Int(r.max_in_flight),
            let ack = Double(r.ack_seconds), let maxDeliveries = Int(r.max_deliveries), let history = Int(r.history),
            let dedup = Double(r.dedup_seconds)
        else { throw unreadable("config") }
        var filters: [String: PipelineFilter] = [:]
        if case .object(let members) = try json(r.filters) {
            for (name, value) in members { filters[name] = try filter(value) }
        }
        return PipelineConfig(
            capacity: capacity, maxInFlight: maxInFlight, ackSeconds: ack, maxDeliveries: maxDeliveries,
            filters: filters, history: history, dedupSeconds: dedup)
    }

    private static func filter(_ value: JSONValue) throws(PipelineError) -> PipelineFilter {
        do throws(FieldError) {
            var reader = try FieldReader(value)
            let filter = try PipelineFilter.parse(&reader, limits: storedLimits)
            try reader.finish()
            return filter
        } catch {
            throw unreadable("filter")
        }
    }

    /// HGETALL pairs (name, filter JSON) as the filters in running order.
    private static func filters(_ r: inout ReplyReader) throws(ReplyShapeError) -> PipelineFilters {
        var filters = PipelineFilters()
        while !r.isAtEnd {
            let name = try r.text("filter name")
            let text = try r.text("filter")
            guard let filter = try? filter(try json(text)) else { throw ReplyShapeError(what: "filter") }
            filters.put(name: name, filter)
        }
        return filters
    }

    /// The totals: a JSON list of ten numbers as text.
    private static func counts(_ r: inout ReplyReader) throws(ReplyShapeError) -> PipelineCounts {
        var f = ReplyReader(texts: try r.json([String].self, "counts"))
        func total(_ what: String) throws(ReplyShapeError) -> Int { Int(try f.text(what)) ?? 0 }
        var c = PipelineCounts()
        c.pushedTotal = try total("pushed_total")
        c.deliveredTotal = try total("delivered_total")
        c.consumedTotal = try total("consumed_total")
        c.filteredTotal = try total("filtered_total")
        c.redeliveredTotal = try total("redelivered_total")
        c.deadTotal = try total("dead_total")
        c.deadDroppedTotal = try total("dead_dropped_total")
        c.cancelledTotal = try total("cancelled_total")
        c.extendedTotal = try total("extended_total")
        c.deduplicatedTotal = try total("deduplicated_total")
        guard f.isAtEnd else { throw ReplyShapeError(what: "end of the counts") }
        return c
    }

    /// An item (JSON text).
    private static func item(_ r: inout ReplyReader) throws(ReplyShapeError) -> PipelineItem {
        let text = try r.text("item")
        do throws(PipelineError) { return try item(text) } catch { throw ReplyShapeError(what: "item") }
    }

    /// A push's result (JSON text).
    private static func pushResult(_ r: inout ReplyReader) throws(ReplyShapeError) -> PipelinePushResult {
        let text = try r.text("push result")
        do throws(PipelineError) { return try pushResult(text) } catch { throw ReplyShapeError(what: "push result") }
    }

    /// The config (JSON text).
    private static func config(_ r: inout ReplyReader) throws(ReplyShapeError) -> PipelineConfig {
        let text = try r.text("config")
        do throws(PipelineError) { return try config(text) } catch { throw ReplyShapeError(what: "config") }
    }
}

/// `pipeline.lua`: its operations and refusals.
enum PipelineScript: ScriptKind {
    static let script = ResourceScript(kindSources: PackageResources.pipeline_lua)
    static var leadsWithName: Bool { false }

    enum Operation: String, Sendable {
        case create, delete, tick, push, take, taken, consume, release, extend, undeliver, cancel, item, redrive, dead
        case state, patch, filters
        case pushBatch = "push_batch"
        case filterPut = "filter_put"
        case filterRemove = "filter_remove"
    }

    enum Refusal: String, ScriptRefusal {
        case gone, full, invalid
        case notFound = "not_found"
        case notInFlight = "not_in_flight"
        case inFlight = "in_flight"
    }

    typealias Context = Void

    static func failure(_ refusal: Refusal, detail: String, context: Void) -> PipelineError {
        switch refusal {
        case .gone: return .gone
        case .notFound: return .notFound(detail)
        case .notInFlight: return .notInFlight(current: detail)
        case .inFlight: return .inFlight
        case .full: return .full(retryAfterSeconds: 1)
        case .invalid:
            let field = detail.prefix { $0 != "|" }
            return .invalid(field: String(field), message: String(detail.dropFirst(field.count + 1)))
        }
    }
}

/// The live filters last read, by their version (a counter the script moves at each change).
private final class FilterCache: Sendable {
    let last = Locked<(version: String, filters: PipelineFilters)?>(nil)
}

// MARK: - Records (the script's cjson objects; times and fences are decimal text)

// swift-format-ignore: AlwaysUseLowerCamelCase
private struct ItemRecord: Decodable {
    var id: String
    var p: String
    var pri: Int
    var st: String
    var dl: Int
    var pu: String
    var av: String
    var tk: String?
    var ak: String?
    var fe: String?
    var da: String?
    var rm: String?
}

private struct PushRecord: Decodable {
    var item: ItemRecord
    var position: String
    var created: Bool
}

// swift-format-ignore: AlwaysUseLowerCamelCase
private struct ConfigRecord: Decodable {
    var capacity: String
    var max_in_flight: String
    var ack_seconds: String
    var max_deliveries: String
    var history: String
    var dedup_seconds: String
    var filters: String
    var paused: String
}

// swift-format-ignore: AlwaysUseLowerCamelCase
private struct NoticeRecord: Decodable {
    struct Event: Decodable {
        var t: String
        var item: ItemRecord
        var reason: String?
    }
    struct Updated: Decodable {
        var before: String
        var after: String
    }
    var kind: String
    var name: String
    var next: String?
    var items: Bool?
    var room: Bool?
    var redelivered: Int?
    var dead_lettered: Int?
    var events: [Event]?
    var updated: Updated?
    var deleted: Bool?
}
