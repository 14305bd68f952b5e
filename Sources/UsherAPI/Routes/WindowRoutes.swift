import Answers
import HTTPServer
import UsherCore

/// `/v1/windows`: lifecycle, show, dismiss and the showing long-poll (docs/api.md, Windows).
enum WindowRoutes: ConfiguredKind {
    typealias Config = WindowConfig
    static let kind = ResourceKind.windows
    static let limitRange = 0...10_000

    static func parseConfig(_ body: inout FieldReader, settings: UsherConfig) throws(FieldError) -> WindowConfig {
        try WindowConfig.parse(&body)
    }

    static func parsePatch(_ body: inout FieldReader) throws(FieldError) -> WindowPatch {
        try WindowPatch.parse(&body)
    }

    /// Only a queued item's cursor: the shown item is on every page.
    static func cursor(_ raw: String) -> QueueCursor? {
        guard let c = QueueCursor(raw), case .waiting = c else { return nil }
        return c
    }

    static func manager(from resource: any ManagedResource) -> (any WindowService)? {
        // The memory window (always, without Redis) without a dynamic cast.
        if ObjectIdentifier(type(of: resource)) == ObjectIdentifier(WindowSlot.self) {
            return unsafeDowncast(resource, to: WindowSlot.self)
        }
        return resource as? any WindowService
    }

    static func readState(of window: any WindowService, limit: Int, after cursor: QueueCursor?) -> Pending<
        WindowState, WindowError
    > {
        window.readState(limit: limit, after: cursor)
    }

    static func applyPatch(_ patch: WindowPatch, to window: any WindowService) -> Pending<Void, WindowError> {
        window.applyPatch(patch).map { _ in () }
    }

    static func apiError(_ error: WindowError) -> APIError { APIError(error) }

    /// The patch that brings a window to `config`.
    static func patch(to config: WindowConfig) -> WindowPatch {
        WindowPatch(
            maxWaiting: config.maxWaiting, displaySeconds: config.displaySeconds, dedup: config.dedup,
            dedupKeep: config.dedupKeep)
    }

    static func add(to router: inout Router<Route>) {
        LifecycleRoutes<Self>.add(to: &router)
        router.add("POST", "/v1/windows/{name}/show", show)
        router.add("POST", "/v1/windows/{name}/dismiss", dismiss)
        router.add("GET", "/v1/windows/{name}/showing", showing)
        router.add("GET", "/v1/windows/{name}/items/{id}", getItem)
    }

    private static func window(_ call: Call) throws(APIError) -> any WindowService {
        try LifecycleRoutes<Self>.manager(call)
    }

    /// The state as an answer, its queued items cut at `max_response_bytes`:
    /// encoded whole first, measured item by item only when that does not fit.
    static func reply(
        _ state: WindowState, _ call: Call, status: Int, headers: [(name: String, value: String)]
    ) -> HTTPResponse {
        Paging.reply(
            state, list: \.queued, nextCursor: \.nextCursor, cursors: state.cursors, more: state.more,
            resume: Paging.resume(call), maxBytes: call.app.config.maxResponseBytes, status: status, headers: headers,
            body: WindowStateBody.init
        ) { Wire.bytes(WindowItemBody($0)).count }
    }

    private static func show(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let window = try window(call)
        let request: ShowRequest = try call.readBody { body throws(FieldError) in try ShowRequest.parse(&body) }
        return LifecycleRoutes<Self>.answer(call, window.showItem(request)) { outcome in
            call.object(
                WindowItemBody(outcome.item), status: outcome.created && outcome.item.status != .merged ? 201 : 200)
        }
    }

    private static func dismiss(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let window = try window(call)
        let id: String? = try call.readBody { body throws(FieldError) in try body.name("id") }
        return LifecycleRoutes<Self>.answer(call, window.dismissItem(id: id)) { dismissal in
            call.object(DismissalBody(dismissal: dismissal))
        }
    }

    private static func showing(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        let query = try call.query(allowing: ["after", "wait"])
        let wait = try query.wait()
        let after = query["after"]
        if let after, !Names.isValid(after) {
            throw APIError.badRequest("after: '\(after)' is not a valid item id", field: "after")
        }
        let window = try window(call)
        let app = call.app
        let read = window.readShowing()
        guard case .ready(let result) = read else {
            // Redis: the read, then perhaps the wait, both later.
            let deadline = wait.map { app.deadline(after: $0) }
            let pending = read.flatMap { now -> Pending<WindowItem?, WindowError> in
                guard let deadline, now?.id == after else { return .ready(.success(now)) }
                return .async { () async throws(WindowError) -> WindowItem? in
                    try await window.parkUntilShowing(after: after, until: deadline).item()
                }
            }
            return LifecycleRoutes<Self>.answer(call, pending) { reply($0, call) }
        }
        // Memory: answered now, or parked with nothing but the wait in its task.
        let now: WindowItem?
        do throws(WindowError) { now = try result.get() } catch { throw APIError(error) }
        guard let wait, now?.id == after else { return .respond(reply(now, call)) }
        let deadline = app.deadline(after: wait)
        return app.later { () async throws(APIError) -> HTTPResponse in
            do throws(WindowError) {
                return reply(try await window.parkUntilShowing(after: after, until: deadline).item(), call)
            } catch { throw APIError(error) }
        }
    }

    private static func getItem(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        try LifecycleRoutes<Self>.readOne(
            call, read: { w, id in w.readItem(id) },
            liveStatus: { $0.status.isFinished ? nil : $0.status },
            park: { w, id, status, deadline async throws(WindowError) in
                try await w.parkUntilChange(id: id, from: status, until: deadline).item()
            },
            reply: { call.object(WindowItemBody($0), headers: $1) })
    }

    /// The item shown, bare, with its `ETag`; 204 when nothing is.
    private static func reply(_ showing: WindowItem?, _ call: Call) -> HTTPResponse {
        guard let showing else { return Reply.noContent() }
        return EntityTag.answer(showing, to: call.request) { Reply.encoded(WindowItemBody(showing), headers: $0) }
    }
}
