import Foundation
import HTTPServer
import UsherCore

extension Pipeline: ManagedResource {
    package nonisolated func summary() -> JSONValue {
        withIsolation { pipeline in
            let state = pipeline.state(limit: 0)
            return .object([
                ("name", .string(pipeline.name)),
                ("capacity", .int(state.capacity)),
                ("ready", .int(state.ready)),
                ("in_flight", .int(state.inFlight)),
                ("delayed", .int(state.delayed)),
                ("dead", .int(state.dead)),
            ])
        }
    }

    package nonisolated func markDeleted() { withIsolation { $0.close() } }
    package nonisolated func markShuttingDown() { withIsolation { $0.shutdown() } }
}

/// `/v1/pipelines`: lifecycle, push, take, acknowledgement, the dead list and
/// filters (SPEC §5). Requests that need no waiting are answered on the
/// server thread; `wait` parks the connection (`UsherApp.later`).
enum PipelineRoutes: IsolatedKind {
    typealias Manager = Pipeline
    typealias State = PipelineSnapshot
    static let kind = ResourceKind.pipelines
    static let defaultLimit = 100
    static let limitRange = listLimit
    typealias Failure = PipelineError

    static func parseConfig(_ body: inout FieldReader, for call: Call) throws(FieldError) -> PipelineConfig {
        try PipelineConfig.parse(
            &body, allowRemoteSources: call.app.config.allowRemoteSources, limits: call.app.config.jsonLimits)
    }

    /// The mutable config and `paused`; filters and the source have routes of their own.
    static func parsePatch(_ body: inout FieldReader) throws(FieldError) -> PipelinePatch {
        if body.has("filters") {
            throw FieldError(
                field: "filters", message: "change filters with PUT or DELETE /v1/pipelines/{name}/filters/{filter}")
        }
        if body.has("source") {
            throw FieldError(field: "source", message: "cannot change; delete and re-create the pipeline")
        }
        var patch = try PipelinePatch.parse(&body)
        patch.paused = try body.bool("paused")
        return patch
    }

    /// Only a ready item's cursor.
    static func cursor(_ raw: String) -> PipelineCursor? {
        guard let c = PipelineCursor(raw), case .ready = c else { return nil }
        return c
    }

    static func state(of pipeline: isolated Pipeline, limit: Int, after cursor: PipelineCursor?) -> PipelineSnapshot {
        pipeline.state(limit: limit, after: cursor)
    }

    static func apply(_ patch: PipelinePatch, to pipeline: isolated Pipeline) throws(PipelineError) {
        try pipeline.apply(patch)
    }

    static func apiError(_ error: PipelineError) -> APIError { APIError(error) }

    /// Most items one `take` may ask for (`max`).
    static let maxTake = 1...1000
    /// `limit` on the state and the dead list.
    static let listLimit = 0...10_000
    /// An item id the routes cannot address: `…/items/batch` is the batch route.
    static let reservedID = "batch"

    static func prepareDeclared(name: String, config: JSONValue, path: String, in app: UsherApp) throws(FieldError)
        -> DeclaredResource
    {
        var reader = try FieldReader(config, path: path)
        let wanted = try PipelineConfig.parse(
            &reader, allowRemoteSources: app.config.allowRemoteSources, limits: app.config.jsonLimits)
        try reader.finish()
        return DeclaredResource(kind: kind, name: name) { app in
            guard let pipeline = try? app.registry.lookup(.pipelines, name, as: Pipeline.self) else {
                return .creating { () throws(APIError) in _ = try create(name: name, config: wanted, in: app) }
            }
            let patch = PipelinePatch(
                capacity: wanted.capacity, maxInFlight: wanted.maxInFlight, ackSeconds: wanted.ackSeconds,
                maxDeliveries: wanted.maxDeliveries, history: wanted.history, dedupSeconds: wanted.dedupSeconds)
            let fixed =
                "filters and source cannot change in place: change filters through "
                + "/v1/pipelines/\(name)/filters, or DELETE the pipeline and reload to re-create it"
            return .patching(current: { pipeline.withIsolation { $0.config } }, wanted: wanted, fixed: fixed) {
                () throws(APIError) in
                _ = try run(pipeline) { p throws(PipelineError) in try p.apply(patch) }
            }
        }
    }

    static func add(to router: inout Router<Route>) {
        LifecycleRoutes<Self>.add(to: &router)
        router.add("POST", "/v1/pipelines/{name}/items", push)
        router.add("POST", "/v1/pipelines/{name}/items/batch", pushBatch)
        router.add("POST", "/v1/pipelines/{name}/take", take)
        router.add("GET", "/v1/pipelines/{name}/items/{id}", getItem)
        router.add("DELETE", "/v1/pipelines/{name}/items/{id}", cancel)
        router.add("POST", "/v1/pipelines/{name}/items/{id}/consume", consume)
        router.add("POST", "/v1/pipelines/{name}/items/{id}/release", release)
        router.add("POST", "/v1/pipelines/{name}/items/{id}/extend", extend)
        router.add("GET", "/v1/pipelines/{name}/dead", dead)
        router.add("POST", "/v1/pipelines/{name}/dead/redrive", redrive)
        router.add("GET", "/v1/pipelines/{name}/filters/{filter}", getFilter)
        router.add("PUT", "/v1/pipelines/{name}/filters/{filter}", putFilter)
        router.add("DELETE", "/v1/pipelines/{name}/filters/{filter}", deleteFilter)
    }

    /// Creates a pipeline (PUT and the config file share this). Its source,
    /// if any, reads files under `data_dir` and GETs through `HTTPClient`.
    static func create(name: String, config: PipelineConfig, in app: UsherApp) throws(APIError) -> (Pipeline, Bool) {
        if case .file = config.source?.kind { try checkDataDir(app.config.dataDir) }
        let maxDepth = app.config.jsonLimits.maxDepth
        let factory = PipelineSources.factory(
            dataDir: app.config.dataDir, maxLineBytes: app.config.maxBodyBytes, maxDepth: maxDepth,
            http: HTTPSourceReader.factory(maxBodyBytes: app.config.maxBodyBytes, maxDepth: maxDepth))
        return try app.registry.create(
            .pipelines, name,
            make: {
                Pipeline(
                    name: name, config: config, clock: app.clock, sourceFactory: factory, events: app.events,
                    budget: app.storage,
                    maxTakeBytes: app.config.maxResponseBytes)
            },
            matches: { existing in existing.withIsolation { $0.config } == config })
    }

    // MARK: - Helpers

    /// A file source needs `data_dir` to exist when it is created (its file may come later).
    private static func checkDataDir(_ dataDir: String) throws(APIError) {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: dataDir, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw APIError.badRequest(
                "data_dir \(dataDir) does not exist or is not a directory: a file source needs it", field: "source.path"
            )
        }
    }

    private static func pipeline(_ call: Call) throws(APIError) -> Pipeline {
        try LifecycleRoutes<Self>.manager(call)
    }

    /// Runs a synchronous operation isolated to the pipeline, mapping its error.
    private static func run<T: Sendable>(
        _ pipeline: Pipeline, subject: String = "item", _ body: (isolated Pipeline) throws(PipelineError) -> T
    ) throws(APIError) -> T {
        do throws(PipelineError) { return try pipeline.withIsolation(body) } catch {
            throw APIError(error, subject: subject)
        }
    }

    private static func checkNotReserved(_ request: PipelinePushRequest, field: String) throws(APIError) {
        if request.id == reservedID {
            throw APIError.badRequest(
                "\(field): '\(reservedID)' is reserved (POST …/items/batch is the batch route)", field: field)
        }
    }

    // MARK: - Lifecycle

    /// The state as an answer, its ready items cut at `max_response_bytes`:
    /// encoded whole first, measured item by item only when that does not fit.
    static func reply(_ state: PipelineSnapshot, _ call: Call, status: Int = 200) -> HTTPResponse {
        Paging.reply(
            state, list: \.items, nextCursor: \.nextCursor, cursors: state.cursors, more: state.more,
            maxBytes: call.app.config.maxResponseBytes, status: status, body: PipelineStateBody.init
        ) { Wire.bytes(PipelineItemBody($0)).count }
    }

    // MARK: - Producers

    private static func push(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        let wait = try call.query(allowing: ["wait"]).wait()
        let pipeline = try pipeline(call)
        let request = try call.readBody { r throws(FieldError) in try PipelinePushRequest.parse(&r) }
        try checkNotReserved(request, field: "id")
        do throws(PipelineError) {
            let result = try pipeline.withIsolation { p throws(PipelineError) in try p.push(request) }
            return .respond(Reply.encoded(PipelineItemBody(result.item), status: result.created ? 201 : 200))
        } catch .full where wait != nil {
            // Full, and the producer will wait: hold it until there is room (back-pressure).
        } catch {
            throw APIError(error)
        }
        let deadline = call.app.deadline(after: wait ?? 0)
        return call.app.later { () async throws(APIError) -> HTTPResponse in
            do throws(PipelineError) {
                let result = try await pipeline.pushWaiting(request, until: deadline)
                return Reply.encoded(PipelineItemBody(result.item), status: result.created ? 201 : 200)
            } catch { throw APIError(error) }
        }
    }

    private static func pushBatch(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pipeline = try pipeline(call)
        let requests = try call.readBody { r throws(FieldError) in try PipelinePushRequest.parseBatch(&r) }
        for (i, request) in requests.enumerated() { try checkNotReserved(request, field: "items[\(i)].id") }
        let results = try run(pipeline) { p throws(PipelineError) in try p.pushBatch(requests) }
        // A batch that only repeats items already there (a retried request) is 200.
        let created = results.isEmpty || results.contains { $0.created }
        return .respond(Reply.encoded(PipelineBatchBody(ids: results.map(\.item.id)), status: created ? 201 : 200))
    }

    // MARK: - Consumers

    private static func take(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        let query = try call.query(allowing: ["wait", "max", "on_disconnect"])
        let wait = try query.wait()
        let max = try query.int("max", in: maxTake) ?? 1
        let undo = try query.onDisconnect() == .withdraw
        let pipeline = try pipeline(call)
        let ack = try call.readBody { r throws(FieldError) in
            try r.duration("ack_seconds")
        }
        let items = try run(pipeline) { p throws(PipelineError) in try p.take(max: max, ackSeconds: ack) }
        guard items.isEmpty, let wait else { return .respond(deliveries(items, from: pipeline, undo: undo)) }
        let deadline = call.app.deadline(after: wait)
        return call.app.later { () async throws(APIError) -> HTTPResponse in
            do throws(PipelineError) {
                let items = try await pipeline.takeWaiting(max: max, ackSeconds: ack, until: deadline)
                return deliveries(items, from: pipeline, undo: undo)
            } catch { throw APIError(error) }
        }
    }

    /// 200 `{items: […]}`, or 204 when there are none. Items handed out go
    /// back without counting the hand-out (reason `undelivered`) when the
    /// server could not hand the answer to its client, if the client asked
    /// for that (`undo`).
    private static func deliveries(_ items: [PipelineDelivery], from pipeline: Pipeline, undo: Bool) -> HTTPResponse {
        guard !items.isEmpty else { return Reply.noContent() }
        let response = Reply.encoded(PipelineDeliveriesBody(items: items))
        guard undo else { return response }
        let handed = items.map { (id: $0.id, fence: $0.fence) }
        return response.undoing { pipeline.withIsolation { _ = $0.undeliver(handed) } }
    }

    private static func consume(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pipeline = try pipeline(call)
        let id = try call.name("id")
        let fence = try call.readBody { r throws(FieldError) in try r.int("fence", in: 0...Int.max) }
        let item = try run(pipeline) { p throws(PipelineError) in try p.consume(id, fence: fence.map(Int64.init)) }
        return .respond(Reply.encoded(PipelineItemBody(item)))
    }

    private static func release(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pipeline = try pipeline(call)
        let id = try call.name("id")
        let (delay, fence) = try call.readBody { r throws(FieldError) in
            (try r.duration("delay_seconds"), try r.int("fence", in: 0...Int.max))
        }
        let item = try run(pipeline) { p throws(PipelineError) in
            try p.release(id, delaySeconds: delay, fence: fence.map(Int64.init))
        }
        return .respond(Reply.encoded(PipelineItemBody(item)))
    }

    private static func extend(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pipeline = try pipeline(call)
        let id = try call.name("id")
        let (ack, fence) = try call.readBody { r throws(FieldError) in
            (try r.duration("ack_seconds"), try r.int("fence", in: 0...Int.max))
        }
        let item = try run(pipeline) { p throws(PipelineError) in
            try p.extend(id, ackSeconds: ack, fence: fence.map(Int64.init))
        }
        return .respond(Reply.encoded(PipelineItemBody(item)))
    }

    // MARK: - Items

    private static func getItem(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pipeline = try pipeline(call)
        let id = try call.name("id")
        return .respond(
            Reply.encoded(PipelineItemBody(try run(pipeline) { p throws(PipelineError) in try p.item(id) })))
    }

    private static func cancel(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pipeline = try pipeline(call)
        let id = try call.name("id")
        let item = try run(pipeline) { p throws(PipelineError) in try p.cancel(id) }
        return .respond(Reply.encoded(PipelineItemBody(item)))
    }

    // MARK: - Dead list

    private static func dead(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        let query = try call.query(allowing: ["limit", "cursor"])
        let limit = try query.int("limit", in: listLimit) ?? 100
        let cursor = try Paging.cursor(query) { raw -> PipelineCursor? in
            guard let c = PipelineCursor(raw), case .dead = c else { return nil }
            return c
        }
        let pipeline = try pipeline(call)
        let (count, page) = pipeline.withIsolation { p in
            (p.state(limit: 0).dead, p.deadPage(limit: limit, after: cursor))
        }
        let body = PipelineDeadBody(dead: count, items: page.items, nextCursor: nil)
        return .respond(
            Paging.reply(
                body, list: \.items, nextCursor: \.nextCursor, cursors: page.cursors, more: page.more,
                maxBytes: call.app.config.maxResponseBytes, body: { $0 }
            ) { Wire.bytes(PipelineItemBody($0)).count })
    }

    private static func redrive(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pipeline = try pipeline(call)
        try call.readBody { _ throws(FieldError) in }
        let (moved, left) = try run(pipeline) { p throws(PipelineError) in (try p.redrive(), p.state(limit: 0).dead) }
        return .respond(Reply.encoded(PipelineRedriveBody(moved: moved, dead: left)))
    }

    // MARK: - Filters

    private static func getFilter(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pipeline = try pipeline(call)
        let name = try call.name("filter")
        guard let filter = pipeline.withIsolation({ $0.state(limit: 0).filters[name] }) else {
            throw APIError(PipelineError.notFound(name), subject: "filter")
        }
        return .respond(Reply.encoded(PipelineFilterBody(name: name, filter: filter)))
    }

    private static func putFilter(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pipeline = try pipeline(call)
        let name = try call.name("filter")
        let limits = call.app.config.jsonLimits
        let filter = try call.readBody { r throws(FieldError) in try PipelineFilter.parse(&r, limits: limits) }
        let created = try run(pipeline, subject: "filter") { p throws(PipelineError) in
            try p.putFilter(name: name, filter)
        }
        return .respond(Reply.encoded(PipelineFilterBody(name: name, filter: filter), status: created ? 201 : 200))
    }

    private static func deleteFilter(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pipeline = try pipeline(call)
        let name = try call.name("filter")
        try run(pipeline, subject: "filter") { p throws(PipelineError) in try p.removeFilter(name: name) }
        return .respond(Reply.noContent())
    }
}
