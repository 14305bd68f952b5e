import Foundation
import RedisClient
import UsherCore

/// One window kept in Redis: every `WindowSlot` operation as one call of
/// `window.lua`, on the line `line.lua` keeps (capacity 1, `.ownOverrides`
/// display times). The storage budget (`max_stored_bytes`) does not apply:
/// Redis's `maxmemory` bounds it.
package struct RedisWindowStore: Sendable {
    static let script = ResourceScript(kindSources: PackageResources.line_lua, PackageResources.window_lua)
    /// A window's keys are the line's, in `RedisQueueStore.parts` order.
    static let parts = RedisQueueStore.parts

    let keys: ResourceKeys
    let connections: RedisConnectionPool
    let time: ScriptTime
    let channel: String
    let onDeadline: @Sendable (Timestamp?) -> Void
    /// Hears that a script found the resource's keys missing.
    let onMissing: @Sendable () -> Void
    let keyList: [String]

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
        self.keyList = Self.parts.map(keys.key)
    }

    var name: String { keys.name }

    // MARK: - Resource

    /// Creates the window, or answers the existing one's config with `created == false`.
    package func create(_ config: WindowConfig) async throws(WindowError) -> (config: WindowConfig, created: Bool) {
        let arguments = [
            String(config.maxWaiting), RedisQueueStore.secondsText(config.displaySeconds),
            String(RedisQueueStore.micros(config.displaySeconds)), config.dedup.rawValue, String(WindowSlot.history),
        ]
        let reply = try await run("create", arguments)
        return (try Self.config(reply.dropFirst()), reply.first?.string == "1")
    }

    /// Removes every key of the window; true when it existed.
    package func delete() async throws(WindowError) -> Bool {
        try await run("delete", []).first?.string == "1"
    }

    package func config() async throws(WindowError) -> WindowConfig {
        try Self.config(try await run("config", [])[...])
    }

    /// `PATCH`: the config after the change (the notice carries what changed).
    package func apply(_ patch: WindowPatch) async throws(WindowError) -> WindowConfig {
        let display: [String] =
            patch.displaySeconds.map { [RedisQueueStore.secondsText($0), String(RedisQueueStore.micros($0))] }
            ?? ["", ""]
        let maxWaiting: String = patch.maxWaiting.map { String($0) } ?? ""
        let dedup: String = patch.dedup?.rawValue ?? ""
        return try Self.config(try await run("patch", [maxWaiting] + display + [dedup])[...])
    }

    // MARK: - Items

    /// `WindowSlot.show`: shown at once, queued, delayed or merged; an id
    /// that exists answers that item with `created == false`.
    package func show(_ request: ShowRequest) async throws(WindowError) -> (item: WindowItem, created: Bool) {
        let r = request.visitorRequest
        let problem = QueueEngine.requestProblem(r) ?? QueueEngine.holdRangeProblem(r.holdSeconds)
        let arguments: [String] = [
            r.id ?? "", r.key ?? "", r.payload.map(RedisQueueStore.jsonText) ?? "", String(r.priority),
            r.holdSeconds.map { String(RedisQueueStore.micros($0)) } ?? "-1",
            String(r.delaySeconds.map(RedisQueueStore.micros) ?? 0),
        ]
        let reply = try await run("show", arguments + RedisQueueStore.problemArguments(problem), item: r.id)
        return (try item(reply.first), reply.dropFirst().first?.string == "1")
    }

    /// `WindowSlot.dismiss`: without `id` the item shown (`nothingShowing`
    /// when none), with `id` that item; the next one is shown in the same step.
    package func dismiss(id: String? = nil) async throws(WindowError) -> Dismissal {
        let reply = try await run("dismiss", [id ?? ""], item: id)
        guard reply.count == 2 else { throw .backendUnavailable("unexpected dismiss reply") }
        return Dismissal(dismissed: try item(reply[0]), showing: try optionalItem(reply[1]))
    }

    /// The item shown now, or nil.
    package func showing() async throws(WindowError) -> WindowItem? {
        try await showingView().map { WindowItem($0, window: name) }
    }

    /// One item, live or remembered.
    package func item(id: String) async throws(WindowError) -> WindowItem {
        WindowItem(try await itemView(id: id), window: name)
    }

    /// The item shown now as the line's visitor (what a long-poll's answer holds).
    func showingView() async throws(WindowError) -> VisitorView? {
        try optionalView(try await run("showing", []).first)
    }

    /// One item as the line's visitor.
    func itemView(id: String) async throws(WindowError) -> VisitorView {
        guard let view = try optionalView(try await run("item", [id], item: id).first) else {
            throw .backendUnavailable("missing item")
        }
        return view
    }

    // MARK: - Listing

    /// `WindowSlot.state`: the item shown and the first `limit` queued after
    /// `cursor` (a waiting-line cursor; any other starts at the front).
    package func state(limit: Int, after cursor: QueueCursor? = nil) async throws(WindowError) -> WindowState {
        let limit = min(max(0, limit), 1_000_000_000)
        var arguments = [String(limit)]
        if case .waiting(let priority, let seq)? = cursor {
            arguments += [String(priority), String(seq)]
        } else {
            arguments += ["", ""]
        }
        let reply = try await run("state", arguments)
        // more, count, 13 counts, 3 config fields, the item shown, the queued ones.
        guard reply.count >= 19, let count = reply[1].int, reply.count == 19 + Int(count) else {
            throw .backendUnavailable("unexpected state reply")
        }
        let counts: QueueCounts
        do throws(QueueError) { counts = try RedisQueueStore.counts(reply[2..<15]) } catch {
            throw WindowError(error, item: nil)
        }
        let config = try Self.config(reply[15..<18])
        let showing = try optionalItem(reply[18])
        var queued: [WindowItem] = []
        var cursors: [String] = []
        for raw in reply[19...] {
            guard case .bulk(let bytes) = raw, let (view, seq) = RedisQueueStore.view(bytes, queue: name) else {
                throw .backendUnavailable("unexpected item")
            }
            queued.append(WindowItem(view, window: name))
            cursors.append(QueueCursor.waiting(priority: Int32(view.priority), seq: seq ?? 0).text)
        }
        var state = WindowState(
            name: name, config: config, showing: showing, queued: queued, counts: WindowCounts(counts))
        state.cursors = cursors
        state.more = reply[0].string == "1"
        return state
    }

    /// Counts and totals after applying now, the id of the item shown, and
    /// when the item queued longest entered the line.
    package func counts() async throws(WindowError) -> (
        counts: WindowCounts, showing: String?, oldestWaitingSince: Timestamp?
    ) {
        let reply = try await run("counts", [])
        guard reply.count == 15 else { throw .backendUnavailable("unexpected counts reply") }
        do throws(QueueError) {
            let counts = WindowCounts(try RedisQueueStore.counts(reply[0..<13]))
            let showing = reply[13].string ?? ""
            return (counts, showing.isEmpty ? nil : showing, reply[14].int.map(Timestamp.init(micros:)))
        } catch {
            throw WindowError(error, item: nil)
        }
    }

    /// Applies what is due (any instance may run it at a deadline it knows).
    package func tick() async throws(WindowError) {
        _ = try await run("tick", [])
    }

    // MARK: - Calls

    /// Runs `operation`; reports the next deadline; maps refusals to
    /// `WindowError` (`item`: the item id the operation names, for a not found).
    private func run(_ operation: String, _ arguments: [String], item: String? = nil) async throws(WindowError)
        -> [RedisReply]
    {
        do {
            return try await Self.script.call(
                operation, keys: keyList, time: time, channel: channel, arguments: [name] + arguments,
                on: connections, onDeadline: onDeadline,
                onMissing: onMissing
            ).dropFirst().map { $0 }
        } catch {
            if case .refused("nothing_showing", _) = error { throw .nothingShowing }
            throw WindowError(RedisQueueStore.error(error, hold: nil), item: item)
        }
    }

    // MARK: - Decoding

    /// max_waiting, display_seconds, dedup.
    static func config(_ fields: ArraySlice<RedisReply>) throws(WindowError) -> WindowConfig {
        let f = fields.map { $0.string ?? "" }
        guard f.count == 3, let maxWaiting = Int(f[0]), let display = Double(f[1]),
            let dedup = DedupMode(rawValue: f[2])
        else { throw .backendUnavailable("unexpected config") }
        return WindowConfig(maxWaiting: maxWaiting, displaySeconds: display, dedup: dedup)
    }

    func item(_ reply: RedisReply?) throws(WindowError) -> WindowItem {
        guard let item = try optionalItem(reply) else { throw .backendUnavailable("missing item") }
        return item
    }

    /// An item, or nil for `''`.
    func optionalItem(_ reply: RedisReply?) throws(WindowError) -> WindowItem? {
        try optionalView(reply).map { WindowItem($0, window: name) }
    }

    /// An item's view as `line.lua` writes it, or nil for `''`.
    func optionalView(_ reply: RedisReply?) throws(WindowError) -> VisitorView? {
        guard case .bulk(let bytes)? = reply else { throw .backendUnavailable("missing item") }
        if bytes.isEmpty { return nil }
        guard let (view, _) = RedisQueueStore.view(bytes, queue: name) else {
            throw .backendUnavailable("unexpected item")
        }
        return view
    }

    /// Decodes a notice `window.lua` published; nil for another kind's or a malformed one.
    package static func decodeNotice(_ payload: [UInt8]) -> WindowNotice? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any] else { return nil }
        return decodeNotice(object)
    }

    /// Decodes a notice already parsed into Foundation objects.
    package static func decodeNotice(_ object: [String: Any]) -> WindowNotice? {
        guard object["kind"] as? String == WindowSlot.eventKind, let name = object["name"] as? String,
            let time = (object["time"] as? String).flatMap({ Int64($0) })
        else { return nil }
        var notice = WindowNotice(name: name, time: Timestamp(micros: time))
        if object["deleted"] as? Bool == true {
            notice.deleted = true
            return notice
        }
        for case let text as String in object["changed"] as? [Any] ?? [] {
            guard let (view, _) = RedisQueueStore.view(Array(text.utf8), queue: name) else { return nil }
            notice.changed.append(WindowItem(view, window: name))
        }
        if let before = object["config_before"] as? [String], let after = object["config"] as? [String] {
            let b = try? config(before.map { RedisReply.bulk(Array($0.utf8)) }[...])
            let a = try? config(after.map { RedisReply.bulk(Array($0.utf8)) }[...])
            if let b, let a { notice.updated = WindowConfig.changes(from: b, to: a) }
        }
        notice.next = (object["next"] as? String).flatMap { Int64($0) }.map(Timestamp.init(micros:))
        return notice
    }
}

/// What one window operation changed, as every instance hears it.
package struct WindowNotice: Sendable {
    package var name: String
    /// The operation's time.
    package var time: Timestamp
    /// Each item whose status changed or that was queued, in the engine's
    /// `drainChanges` order, as it stands after the operation.
    package var changed: [WindowItem] = []
    /// The window's next deadline, if any.
    package var next: Timestamp?
    /// The window was deleted.
    package var deleted = false
    /// What a `PATCH` changed (possibly nothing); nil for other operations.
    package var updated: ConfigChanges?

    init(name: String, time: Timestamp) {
        self.name = name
        self.time = time
    }
}
