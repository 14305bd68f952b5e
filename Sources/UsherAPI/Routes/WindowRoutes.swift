import HTTPServer
import UsherCore
import UsherRedis

extension WindowSlot: ManagedResource {
    package nonisolated func summary() -> JSONValue {
        withIsolation { window in
            let showing = (try? window.showing()) ?? nil
            return .object([
                ("name", .string(window.name)),
                ("showing", showing.map { .string($0.id) } ?? .null),
                ("queued", .int(window.counts.queued)),
            ])
        }
    }

    package nonisolated func markDeleted() { withIsolation { $0.close() } }
    package nonisolated func markShuttingDown() { withIsolation { $0.shutdown() } }
}

/// `/v1/windows`: lifecycle, show, dismiss and the showing long-poll (docs/api.md, Windows).
enum WindowRoutes: ConfiguredKind {
    static let kind = ResourceKind.windows
    static let defaultLimit = 100
    static let limitRange = 0...10_000

    static func parseConfig(_ body: inout FieldReader, for call: Call) throws(FieldError) -> WindowConfig {
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

    static func prepareDeclared(name: String, config: JSONValue, path: String, in app: UsherApp) throws(FieldError)
        -> DeclaredResource
    {
        var reader = try FieldReader(config, path: path)
        let wanted = try WindowConfig.parse(&reader)
        try reader.finish()
        return DeclaredResource(kind: kind, name: name) { app in
            guard let window = try? app.registry.lookup(.windows, name, as: WindowSlot.self) else {
                return .creating { () throws(APIError) in
                    _ = try creating(name: name, config: wanted, backend: .memory, in: app).readyValue()
                }
            }
            return .patching(current: { window.withIsolation { $0.config } }, wanted: wanted, fixed: "") {
                () throws(APIError) in
                do throws(WindowError) {
                    _ = try window.withIsolation { w throws(WindowError) in try w.apply(patch(to: wanted)) }
                } catch {
                    throw APIError(error)
                }
            }
        }
    }

    /// The patch that brings a window to `config`.
    static func patch(to config: WindowConfig) -> WindowPatch {
        WindowPatch(maxWaiting: config.maxWaiting, displaySeconds: config.displaySeconds, dedup: config.dedup)
    }

    static func add(to router: inout Router<Route>) {
        LifecycleRoutes<Self>.add(to: &router)
        router.add("POST", "/v1/windows/{name}/show", show)
        router.add("POST", "/v1/windows/{name}/dismiss", dismiss)
        router.add("GET", "/v1/windows/{name}/showing", showing)
        router.add("GET", "/v1/windows/{name}/items/{id}", getItem)
    }

    /// Creates a window in memory or in Redis, or finds the one there with
    /// the same config (PUT and the config file share this).
    static func creating(name: String, config: WindowConfig, backend: Backend, in app: UsherApp) -> Pending<
        Created<any WindowService>, APIError
    > {
        guard backend == .memory else {
            return RedisLifecycle<RedisWindow>.creating(name: name, config: config, in: app).map {
                Created(manager: $0.manager, created: $0.created)
            }
        }
        return .now { () throws(APIError) in
            let (window, created) = try app.registry.create(
                .windows, name,
                make: {
                    WindowSlot(name: name, config: config, clock: app.clock, events: app.events, budget: app.storage)
                },
                matches: { existing in existing.withIsolation { $0.config } == config })
            return Created(manager: window, created: created)
        }
    }

    private static func window(_ call: Call) throws(APIError) -> any WindowService {
        try LifecycleRoutes<Self>.manager(call)
    }

    /// The state as an answer, its queued items cut at `max_response_bytes`:
    /// encoded whole first, measured item by item only when that does not fit.
    static func reply(_ state: WindowState, _ call: Call, status: Int = 200) -> HTTPResponse {
        Paging.reply(
            state, list: \.queued, nextCursor: \.nextCursor, cursors: state.cursors, more: state.more,
            maxBytes: call.app.config.maxResponseBytes, status: status, body: WindowStateBody.init
        ) { Wire.bytes(WindowItemBody($0)).count }
    }

    private static func show(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let window = try window(call)
        let request: ShowRequest = try call.readBody { body throws(FieldError) in try ShowRequest.parse(&body) }
        return try LifecycleRoutes<Self>.answer(call, window.showItem(request)) { outcome in
            Reply.encoded(
                WindowItemBody(outcome.item), status: outcome.created && outcome.item.status != .merged ? 201 : 200)
        }
    }

    private static func dismiss(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let window = try window(call)
        let id: String? = try call.readBody { body throws(FieldError) in try body.name("id") }
        return try LifecycleRoutes<Self>.answer(call, window.dismissItem(id: id)) { dismissal in
            Reply.encoded(DismissalBody(dismissed: dismissal.dismissed, showing: dismissal.showing))
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
            return try LifecycleRoutes<Self>.answer(call, pending, reply)
        }
        // Memory: answered now, or parked with nothing but the wait in its task.
        let now: WindowItem?
        do throws(WindowError) { now = try result.get() } catch { throw APIError(error) }
        guard let wait, now?.id == after else { return .respond(reply(now)) }
        let deadline = app.deadline(after: wait)
        return app.later { () async throws(APIError) -> HTTPResponse in
            do throws(WindowError) {
                return reply(try await window.parkUntilShowing(after: after, until: deadline).item())
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
            reply: { Reply.encoded(WindowItemBody($0)) })
    }

    @Sendable private static func reply(_ showing: WindowItem?) -> HTTPResponse {
        Reply.encoded(DismissalBody(dismissed: nil, showing: showing))
    }
}
