import Answers
import Foundation
import HTTPServer
import UsherCore

/// `/v1/pipelines`: lifecycle, push, take, acknowledgement, the dead list and
/// filters (docs/api.md, Pipelines). Requests to a pipeline in memory that need no waiting
/// are answered on the server thread; `wait`, and every request to a
/// Redis-backed one, parks the connection (`UsherApp.later`).
enum PipelineRoutes: ConfiguredKind {
    typealias State = PipelineSnapshot
    typealias Config = PipelineConfig
    static let kind = ResourceKind.pipelines
    static let limitRange = listLimit
    typealias Failure = PipelineError

    static func parseConfig(_ body: inout FieldReader, settings: UsherConfig) throws(FieldError) -> PipelineConfig {
        if body.has("paused") {
            throw FieldError(field: "paused", message: "is the pipeline's state, not its config: set it with PATCH")
        }
        _ = body.value("paused")
        return try PipelineConfig.parse(
            &body, allowRemoteSources: settings.allowRemoteSources, limits: settings.jsonLimits)
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
        // `null` means absent, as everywhere.
        _ = (body.value("filters"), body.value("source"))
        var patch = try PipelinePatch.parse(&body)
        patch.paused = try body.bool("paused")
        return patch
    }

    /// Only a ready item's cursor.
    static func cursor(_ raw: String) -> PipelineCursor? {
        guard let c = PipelineCursor(raw), case .ready = c else { return nil }
        return c
    }

    static func manager(from resource: any ManagedResource) -> (any PipelineService)? {
        // The memory pipeline (always, without Redis) without a dynamic cast.
        if ObjectIdentifier(type(of: resource)) == ObjectIdentifier(Pipeline.self) {
            return unsafeDowncast(resource, to: Pipeline.self)
        }
        return resource as? any PipelineService
    }

    static func readState(of pipeline: any PipelineService, limit: Int, after cursor: PipelineCursor?) -> Pending<
        PipelineSnapshot, PipelineError
    > {
        pipeline.readState(limit: limit, after: cursor)
    }

    static func applyPatch(_ patch: PipelinePatch, to pipeline: any PipelineService) -> Pending<Void, PipelineError> {
        pipeline.applyPatch(patch).map { _ in () }
    }

    static func apiError(_ error: PipelineError) -> APIError { APIError(error) }

    /// Most items one `take` may ask for (`max`).
    static let maxTake = 1...1000
    /// `limit` on the state and the dead list.
    static let listLimit = 0...10_000
    /// An item id the routes cannot address: `…/items/batch` is the batch route.
    static let reservedID = "batch"

    static func fixedFields(_ name: String) -> String {
        "filters and source cannot change in place: change filters through "
            + "/v1/pipelines/\(name)/filters, or DELETE the pipeline and reload to re-create it"
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

    // MARK: - Helpers

    private static func pipeline(_ call: Call) throws(APIError) -> any PipelineService {
        try LifecycleRoutes<Self>.manager(call)
    }

    /// Answers with `reply` of the value, now or once it is there; `.notFound`
    /// names a filter on the filter routes, else an item. (Error mappings
    /// without captures: a memory pipeline's answer allocates no closure.)
    private static func answer<T: Sendable>(
        _ call: Call, _ pending: Pending<T, PipelineError>, filter: Bool = false,
        _ reply: @escaping @Sendable (T) -> HTTPResponse
    ) -> HTTPHandlerResult {
        call.answer(pending.mapError(filter ? filterError : itemError), reply)
    }

    private static func itemError(_ error: PipelineError) -> APIError { APIError(error) }
    private static func filterError(_ error: PipelineError) -> APIError { APIError(error, subject: "filter") }

    private static func checkNotReserved(_ request: PipelinePushRequest, field: String) throws(APIError) {
        if request.id == reservedID {
            throw APIError.badRequest(
                "\(field): '\(reservedID)' is reserved (POST …/items/batch is the batch route)", field: field)
        }
    }

    // MARK: - Lifecycle

    /// The state as an answer, its ready items cut at `max_response_bytes`:
    /// encoded whole first, measured item by item only when that does not fit.
    static func reply(
        _ state: PipelineSnapshot, _ call: Call, status: Int, headers: [(name: String, value: String)]
    ) -> HTTPResponse {
        Paging.reply(
            state, list: \.items, nextCursor: \.nextCursor, cursors: state.cursors, more: state.more,
            resume: Paging.resume(call), maxBytes: call.app.config.maxResponseBytes, status: status, headers: headers,
            body: PipelineStateBody.init
        ) { Wire.bytes(PipelineItemBody($0)).count }
    }

    // MARK: - Producers

    private static func push(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        let wait = try call.query(allowing: ["wait"]).wait()
        let pipeline = try pipeline(call)
        let request = try call.readBody { r throws(FieldError) in try PipelinePushRequest.parse(&r) }
        try checkNotReserved(request, field: "id")
        let pending = pushing(request, to: pipeline, waiting: wait, in: call.app)
        return answer(call, pending) { call.object(PipelineItemBody($0.item), status: $0.created ? 201 : 200) }
    }

    /// The push; full, and the producer will wait `wait` seconds: held until
    /// there is room (back-pressure).
    private static func pushing(
        _ request: PipelinePushRequest, to pipeline: any PipelineService, waiting wait: Double?, in app: UsherApp
    ) -> Pending<PipelinePushResult, PipelineError> {
        let first = pipeline.pushItem(request)
        guard let wait else { return first }
        @Sendable func park() -> Pending<PipelinePushResult, PipelineError> {
            .async { () async throws(PipelineError) in
                try await pipeline.parkPush(request, until: app.deadline(after: wait))
            }
        }
        switch first {
        case .ready(.failure(.full)): return park()
        case .ready: return first
        case .later, .handedBack:
            return .later {
                let result = await first.result()
                if case .failure(.full) = result { return await park().result() }
                return result
            }
        }
    }

    private static func pushBatch(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pipeline = try pipeline(call)
        let requests = try call.readBody { r throws(FieldError) in try PipelinePushRequest.parseBatch(&r) }
        for (i, request) in requests.enumerated() { try checkNotReserved(request, field: "items[\(i)].id") }
        return answer(call, pipeline.pushItems(requests)) { results in
            // A batch that only repeats items already there (a retried request) is 200.
            let created = results.isEmpty || results.contains { $0.created }
            return Reply.encoded(PipelineBatchBody(ids: results.map(\.item.id)), status: created ? 201 : 200)
        }
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
        let first = pipeline.takeItems(max: max, ackSeconds: ack)
        // In memory, answered here with no closure unless the consumer will wait.
        if case .ready(let result) = first {
            let items: [PipelineDelivery]
            do throws(PipelineError) { items = try result.get() } catch { throw APIError(error) }
            guard items.isEmpty, wait != nil else { return .respond(deliveries(items, from: pipeline, undo: undo)) }
        }
        let app = call.app
        let pending = first.flatMap { items -> Pending<[PipelineDelivery], PipelineError> in
            guard items.isEmpty, let wait else { return .ready(.success(items)) }
            let deadline = app.deadline(after: wait)
            return .async { () async throws(PipelineError) in
                try await pipeline.parkTake(max: max, ackSeconds: ack, until: deadline)
            }
        }
        return answer(call, pending) { deliveries($0, from: pipeline, undo: undo) }
    }

    /// 200 `{items: […]}`, or 204 when there are none. Items handed out go
    /// back without counting the hand-out (reason `undelivered`) when the
    /// server could not hand the answer to its client, if the client asked
    /// for that (`undo`).
    private static func deliveries(
        _ items: [PipelineDelivery], from pipeline: any PipelineService, undo: Bool
    ) -> HTTPResponse {
        guard !items.isEmpty else { return Reply.noContent() }
        let response = Reply.encoded(PipelineDeliveriesBody(items: items))
        guard undo else { return response }
        let handed = items.map { (id: $0.id, fence: $0.fence) }
        return response.undoing { pipeline.undeliverItems(handed) }
    }

    private static func consume(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pipeline = try pipeline(call)
        let id = try call.name("id")
        let fence = try call.readBody { r throws(FieldError) in try r.int("fence", in: 0...Int.max) }
        return answer(call, pipeline.consumeItem(id, fence: fence.map(Int64.init))) {
            call.object(PipelineItemBody($0))
        }
    }

    private static func release(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pipeline = try pipeline(call)
        let id = try call.name("id")
        let (delay, fence) = try call.readBody { r throws(FieldError) in
            (try r.duration("delay_seconds"), try r.int("fence", in: 0...Int.max))
        }
        return answer(call, pipeline.releaseItem(id, delaySeconds: delay, fence: fence.map(Int64.init))) {
            call.object(PipelineItemBody($0))
        }
    }

    private static func extend(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pipeline = try pipeline(call)
        let id = try call.name("id")
        let (ack, fence) = try call.readBody { r throws(FieldError) in
            (try r.duration("ack_seconds"), try r.int("fence", in: 0...Int.max))
        }
        return answer(call, pipeline.extendItem(id, ackSeconds: ack, fence: fence.map(Int64.init))) {
            call.object(PipelineItemBody($0))
        }
    }

    // MARK: - Items

    private static func getItem(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        try LifecycleRoutes<Self>.readOne(
            call, read: { p, id in p.readItem(id) },
            liveStatus: { $0.status.isFinished ? nil : $0 },
            park: { p, id, earlier, deadline async throws(PipelineError) in
                try await p.parkUntilChange(id: id, from: earlier, until: deadline)
            },
            reply: { call.object(PipelineItemBody($0), headers: $1) })
    }

    private static func cancel(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pipeline = try pipeline(call)
        let id = try call.name("id")
        return answer(call, pipeline.cancelItem(id)) { call.object(PipelineItemBody($0)) }
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
        let maxBytes = call.app.config.maxResponseBytes
        let resume = Paging.resume(call)
        return answer(call, pipeline.readDead(limit: limit, after: cursor)) { page in
            EntityTag.answer(page, to: call.request) { tag in
                let body = PipelineDeadBody(dead: page.dead, items: page.items, nextCursor: nil)
                return Paging.reply(
                    body, list: \.items, nextCursor: \.nextCursor, cursors: page.cursors, more: page.more,
                    resume: resume, maxBytes: maxBytes, headers: tag, body: { $0 }
                ) { Wire.bytes(PipelineItemBody($0)).count }
            }
        }
    }

    private static func redrive(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pipeline = try pipeline(call)
        try call.readBody { _ throws(FieldError) in }
        return answer(call, pipeline.redriveDead()) {
            Reply.encoded(PipelineRedriveBody(moved: $0.moved, dead: $0.dead))
        }
    }

    // MARK: - Filters

    private static func getFilter(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pipeline = try pipeline(call)
        let name = try call.name("filter")
        let pending = pipeline.readFilters().flatMap { filters -> Pending<PipelineFilter, PipelineError> in
            guard let filter = filters[name] else { return .ready(.failure(.notFound(name))) }
            return .ready(.success(filter))
        }
        return answer(call, pending, filter: true) { filter in
            EntityTag.answer(filter, to: call.request) {
                Reply.encoded(PipelineFilterBody(name: name, filter: filter), headers: $0)
            }
        }
    }

    private static func putFilter(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pipeline = try pipeline(call)
        let name = try call.name("filter")
        let limits = call.app.config.jsonLimits
        let filter = try call.readBody { r throws(FieldError) in try PipelineFilter.parse(&r, limits: limits) }
        return answer(call, pipeline.storeFilter(name: name, filter), filter: true) { created in
            Reply.encoded(PipelineFilterBody(name: name, filter: filter), status: created ? 201 : 200)
        }
    }

    private static func deleteFilter(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pipeline = try pipeline(call)
        let name = try call.name("filter")
        return answer(call, pipeline.dropFilter(name: name), filter: true) { Reply.noContent() }
    }
}
