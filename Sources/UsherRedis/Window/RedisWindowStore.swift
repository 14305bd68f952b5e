import Foundation
import RedisClient
import UsherCore

/// One window kept in Redis: every `WindowSlot` operation as one call of
/// `window.lua`, on the line `line.lua` keeps (capacity 1, `.ownOverrides`
/// display times). The storage budget (`max_stored_bytes`) does not apply:
/// Redis's `maxmemory` bounds it.
package struct RedisWindowStore: ScriptStore {
    /// A window's keys are the line's, in `RedisQueueStore.parts` order.
    static let parts = RedisQueueStore.parts

    let runner: ScriptRunner<WindowScript>
    var keys: ResourceKeys { runner.keys }

    init(runner: ScriptRunner<WindowScript>) {
        self.runner = runner
    }

    var name: String { keys.name }

    // MARK: - Resource

    /// Creates the window, or answers the existing one's config with `created == false`.
    package func create(_ config: WindowConfig) async throws(WindowError) -> (config: WindowConfig, created: Bool) {
        let arguments = [
            String(config.maxWaiting), RedisQueueStore.secondsText(config.displaySeconds),
            String(RedisQueueStore.micros(config.displaySeconds)), config.dedup.rawValue, String(WindowSlot.history),
            config.dedupKeep.rawValue,
        ]
        return try await run(.create, arguments) { r throws(ReplyShapeError) in
            let created = try r.flag("created")
            return (try Self.config(&r), created)
        }
    }

    /// Removes every key of the window; true when it existed.
    package func delete() async throws(WindowError) -> Bool {
        try await runner.delete(.delete, context: nil)
    }

    package func config() async throws(WindowError) -> WindowConfig {
        try await run(.config) { r throws(ReplyShapeError) in try Self.config(&r) }
    }

    /// `PATCH`: the config after the change (the notice carries what changed).
    package func apply(_ patch: WindowPatch) async throws(WindowError) -> WindowConfig {
        let display: [String] =
            patch.displaySeconds.map { [RedisQueueStore.secondsText($0), String(RedisQueueStore.micros($0))] }
            ?? ["", ""]
        let maxWaiting: String = patch.maxWaiting.map { String($0) } ?? ""
        let dedup: String = patch.dedup?.rawValue ?? ""
        let keep: String = patch.dedupKeep?.rawValue ?? ""
        return try await run(.patch, [maxWaiting] + display + [dedup, keep]) { r throws(ReplyShapeError) in
            try Self.config(&r)
        }
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
        let name = name
        return try await run(.show, arguments + RedisQueueStore.problemArguments(problem), item: r.id) {
            r throws(ReplyShapeError) in (try Self.item(&r, window: name), try r.flag("created"))
        }
    }

    /// `WindowSlot.dismiss`: without `id` the item shown (`nothingShowing`
    /// when none), with `id` that item; the next one is shown in the same step.
    package func dismiss(id: String? = nil) async throws(WindowError) -> Dismissal {
        let name = name
        return try await run(.dismiss, [id ?? ""], item: id) { r throws(ReplyShapeError) in
            let dismissed = try Self.item(&r, window: name)
            let showing = try r.optional { r throws(ReplyShapeError) in try Self.item(&r, window: name) }
            guard r.isAtEnd else { throw ReplyShapeError(what: "end of the dismissal") }
            return Dismissal(dismissed: dismissed, showing: showing)
        }
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
        let name = name
        return try await run(.showing) { r throws(ReplyShapeError) in
            try r.optional { r throws(ReplyShapeError) in try RedisQueueStore.view(&r, queue: name).view }
        }
    }

    /// One item as the line's visitor.
    func itemView(id: String) async throws(WindowError) -> VisitorView {
        let name = name
        return try await run(.item, [id], item: id) { r throws(ReplyShapeError) in
            try RedisQueueStore.view(&r, queue: name).view
        }
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
        let name = name
        return try await run(.state, arguments) { r throws(ReplyShapeError) in
            let more = try r.flag("more")
            let count = try r.int("queued count")
            let counts = try RedisQueueStore.counts(&r)
            let config = try Self.config(&r)
            let showing = try r.optional { r throws(ReplyShapeError) in try Self.item(&r, window: name) }
            var queued: [WindowItem] = []
            var cursors: [String] = []
            for (view, seq) in try r.list(
                count, { r throws(ReplyShapeError) in try RedisQueueStore.view(&r, queue: name) })
            {
                queued.append(WindowItem(view, window: name))
                cursors.append(QueueCursor.waiting(priority: Int32(view.priority), seq: seq ?? 0).text)
            }
            guard r.isAtEnd else { throw ReplyShapeError(what: "end of the state") }
            var state = WindowState(
                name: name, config: config, showing: showing, queued: queued, counts: WindowCounts(counts))
            state.cursors = cursors
            state.more = more
            return state
        }
    }

    /// Counts and totals after applying now, the id of the item shown, and
    /// when the item queued longest entered the line.
    package func counts() async throws(WindowError) -> (
        counts: WindowCounts, showing: String?, oldestWaitingSince: Timestamp?
    ) {
        try await run(.counts) { r throws(ReplyShapeError) in
            let counts = WindowCounts(try RedisQueueStore.counts(&r))
            let showing = try r.text("showing id")
            let oldest = try r.timestamp("oldest waiting since")
            guard r.isAtEnd else { throw ReplyShapeError(what: "end of the counts") }
            return (counts, showing.isEmpty ? nil : showing, oldest)
        }
    }

    /// Applies what is due (any instance may run it at a deadline it knows).
    package func tick() async throws(WindowError) {
        try await runner.run(ScriptCall(.tick, context: nil))
    }

    // MARK: - Calls

    /// `operation` (`item`: the item id it names, for a not found), its reply read by `read`.
    private func run<Reply: Sendable>(
        _ operation: WindowScript.Operation, _ arguments: [String] = [], item: String? = nil,
        read: @escaping @Sendable (inout ReplyReader) throws(ReplyShapeError) -> Reply
    ) async throws(WindowError) -> Reply {
        try await runner.run(ScriptCall(operation, arguments, context: item, read: read))
    }

    // MARK: - Decoding

    /// The config as `window.lua` lists it: max_waiting, display_seconds, dedup.
    static func config(_ r: inout ReplyReader) throws(ReplyShapeError) -> WindowConfig {
        WindowConfig(
            maxWaiting: try r.value("max_waiting") { Int($0) },
            displaySeconds: try r.value("display_seconds") { Double($0) },
            dedup: try r.value("dedup", DedupMode.init(rawValue:)),
            dedupKeep: try r.value("dedup_keep", DedupKeep.init(rawValue:)))
    }

    /// An item (the line's view as JSON text).
    static func item(_ r: inout ReplyReader, window: String) throws(ReplyShapeError) -> WindowItem {
        WindowItem(try RedisQueueStore.view(&r, queue: window).view, window: window)
    }

    /// Decodes a notice `window.lua` published; nil for another kind's or a malformed one.
    static func decodeNotice(_ payload: [UInt8]) -> WindowNotice? {
        guard let record = LineNoticeRecord.decode(payload, kind: WindowSlot.eventKind),
            let time = Int64(record.time)
        else { return nil }
        let name = record.name
        var notice = WindowNotice(name: name, time: Timestamp(micros: time))
        if record.deleted == true {
            notice.deleted = true
            return notice
        }
        for text in record.changed ?? [] {
            guard let (view, _) = RedisQueueStore.view(Array(text.utf8), queue: name) else { return nil }
            notice.changed.append(WindowItem(view, window: name))
        }
        if let before = record.configBefore, let after = record.config {
            var b = ReplyReader(texts: before)
            var a = ReplyReader(texts: after)
            if let b = try? config(&b), let a = try? config(&a) {
                notice.updated = WindowConfig.changes(from: b, to: a)
            }
        }
        notice.next = record.next.flatMap { Int64($0) }.map(Timestamp.init(micros:))
        return notice
    }
}

/// `window.lua` on `line.lua`: its operations and refusals.
enum WindowScript: ScriptKind {
    static let script = ResourceScript(kindSources: PackageResources.line_lua, PackageResources.window_lua)

    enum Operation: String, Sendable {
        case create, delete, config, patch, show, dismiss, showing, item, state, counts, tick
    }

    /// The line's refusals, and the window's own.
    enum Refusal: ScriptRefusal {
        case line(QueueScript.Refusal)
        case nothingShowing

        init?(code: String) {
            if code == "nothing_showing" {
                self = .nothingShowing
            } else if let line = QueueScript.Refusal(rawValue: code) {
                self = .line(line)
            } else {
                return nil
            }
        }
    }

    /// The item id a call names, for a not found.
    typealias Context = String?

    static func failure(_ refusal: Refusal, detail: String, context item: String?) -> WindowError {
        switch refusal {
        case .nothingShowing: .nothingShowing
        case .line(let line): WindowError(QueueScript.failure(line, detail: detail, context: nil), item: item)
        }
    }
}

/// What one window operation changed, as every instance hears it.
struct WindowNotice: Sendable {
    package var name: String
    /// The operation's time.
    var time: Timestamp
    /// Each item whose status changed or that was queued, in the engine's
    /// `drainChanges` order, as it stands after the operation.
    var changed: [WindowItem] = []
    /// The window's next deadline, if any.
    package var next: Timestamp?
    /// The window was deleted.
    var deleted = false
    /// What a `PATCH` changed (possibly nothing); nil for other operations.
    var updated: ConfigChanges?

    init(name: String, time: Timestamp) {
        self.name = name
        self.time = time
    }
}
