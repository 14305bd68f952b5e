import Answers
import HTTPServer
import UsherCore

/// `/v1/queues`: lifecycle and visitors (docs/api.md, Queues).
enum QueueRoutes: ConfiguredKind {
    typealias Config = QueueConfig
    static let kind = ResourceKind.queues
    static let limitRange = 0...10_000

    static func parseConfig(_ body: inout FieldReader, settings: UsherConfig) throws(FieldError) -> QueueConfig {
        try QueueConfig.parse(&body)
    }

    static func parsePatch(_ body: inout FieldReader) throws(FieldError) -> QueuePatch { try QueuePatch.parse(&body) }
    static func cursor(_ raw: String) -> QueueCursor? { QueueCursor(raw) }

    static func manager(from resource: any ManagedResource) -> (any QueueService)? {
        // The memory queue (always, without Redis) without a dynamic cast.
        if ObjectIdentifier(type(of: resource)) == ObjectIdentifier(VisitorQueue.self) {
            return unsafeDowncast(resource, to: VisitorQueue.self)
        }
        return resource as? any QueueService
    }

    static func readState(of queue: any QueueService, limit: Int, after cursor: QueueCursor?) -> Pending<
        QueueState, QueueError
    > {
        queue.readState(limit: limit, after: cursor)
    }

    static func applyPatch(_ patch: QueuePatch, to queue: any QueueService) -> Pending<Void, QueueError> {
        queue.applyPatch(patch).map { _ in () }
    }

    static func reply(
        _ state: QueueState, _ call: Call, status: Int, headers: [(name: String, value: String)]
    ) -> HTTPResponse {
        var state = state
        Paging.cut(&state, resume: Paging.resume(call), maxBytes: call.app.config.maxResponseBytes)
        return Reply.encoded(QueueStateBody(state), status: status, headers: headers)
    }

    /// The waiting visitors listed carry estimates, reckoned from now.
    static func followsClock(_ state: QueueState) -> Bool { !state.waiting.isEmpty }

    static func apiError(_ error: QueueError) -> APIError { APIError(error) }

    static func add(to router: inout Router<Route>) {
        LifecycleRoutes<Self>.add(to: &router)
        router.add("POST", "/v1/queues/{name}/visitors", enqueue)
        router.add("GET", "/v1/queues/{name}/visitors/{id}", getVisitor)
        router.add("DELETE", "/v1/queues/{name}/visitors/{id}") { call throws(APIError) in
            try visitorOperation(call) { queue, id in queue.removeVisitor(id) }
        }
        router.add("POST", "/v1/queues/{name}/visitors/{id}/complete") { call throws(APIError) in
            try call.readBody { _ throws(FieldError) in }
            return try visitorOperation(call) { queue, id in queue.completeVisitor(id) }
        }
        router.add("POST", "/v1/queues/{name}/visitors/{id}/extend") { call throws(APIError) in
            let hold: Double? = try call.readBody { body throws(FieldError) in try body.duration("hold_seconds") }
            return try visitorOperation(call) { queue, id in queue.extendVisitor(id, holdSeconds: hold) }
        }
    }

    private static func queue(_ call: Call) throws(APIError) -> any QueueService {
        try LifecycleRoutes<Self>.manager(call)
    }

    private static func enqueue(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        let query = try call.query(allowing: ["wait", "on_disconnect", "on_timeout"])
        let wait = try query.wait()
        let withdraw = try query.onDisconnect() == .withdraw
        let cancel = try query.onTimeout() == .cancel
        let queue = try queue(call)
        let request: VisitorRequest = try call.readBody { body throws(FieldError) in try VisitorRequest.parse(&body) }
        // A try-acquire without a wait: granted now or cancelled now.
        let immediate = cancel && wait == nil
        let app = call.app
        let deadline = wait.map { app.deadline(after: $0) }
        let enqueued = queue.enqueueVisitor(request, tryOnce: immediate)
        // Without a wait, the answer as it comes (a handed-back one stays so: no task).
        guard let deadline else {
            return LifecycleRoutes<Self>.answer(call, enqueued) {
                granting($0.view, created: $0.created, in: queue, undo: withdraw, for: call)
            }
        }
        let pending = enqueued.flatMap { outcome -> Pending<EnqueueOutcome, QueueError> in
            guard outcome.view.status.isWaiting else { return .ready(.success(outcome)) }
            let id = outcome.view.id  // captured alone: the whole view (256 bytes) stays out of the parked closure
            let created = outcome.created
            return .async { () async throws(QueueError) -> EnqueueOutcome in
                let wait = await queue.parkUntilOutOfLine(
                    id: id, until: deadline, withdrawing: withdraw, cancellingOnTimeout: cancel)
                return EnqueueOutcome(view: try wait.view(), created: created)
            }
        }
        return LifecycleRoutes<Self>.answer(call, pending) {
            granting($0.view, created: $0.created, in: queue, undo: withdraw, for: call)
        }
    }

    /// The answer to a POST of a visitor; one that grants it a slot releases
    /// the slot again (reason `undelivered`) when the server could not hand it
    /// to its client, if the client asked for that (`undo`).
    /// 201 only for a visitor this request created that is still delayed,
    /// waiting or granted; a merged or cancelled one (a try-acquire that
    /// timed out included), or a known id, is 200.
    private static func granting(
        _ view: VisitorView, created: Bool, in queue: any QueueService, undo: Bool, for call: Call
    ) -> HTTPResponse {
        let response = call.object(VisitorBody(view), status: created && !view.status.isFinished ? 201 : 200)
        guard undo, view.status == .granted, let fence = view.fence else { return response }
        let id = view.id
        return response.undoing { queue.releaseUndelivered(id: id, fence: fence) }
    }

    /// `GET …/visitors/{id}[?wait=S]`.
    private static func getVisitor(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        try LifecycleRoutes<Self>.readOne(
            call, read: { q, id in q.readVisitor(id) },
            liveStatus: { $0.status.isFinished ? nil : $0.status },
            followsClock: { $0.status == .waiting },
            park: { q, id, status, deadline async throws(QueueError) in
                try await q.parkUntilChange(id: id, from: status, until: deadline).view()
            },
            reply: { call.object(VisitorBody($0), headers: $1) })
    }

    private static func visitorOperation(
        _ call: Call, _ body: (any QueueService, String) -> Pending<VisitorView, QueueError>
    ) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let queue = try queue(call)
        let id = try call.name("id")
        return LifecycleRoutes<Self>.answer(call, body(queue, id)) { call.object(VisitorBody($0)) }
    }
}
