import Answers
import HTTPServer
import UsherCore

/// `/v1/pools`: lifecycle, fetch (with the long-poll), recycle, extend and
/// elements (docs/api.md, Pools).
enum PoolRoutes: ConfiguredKind {
    typealias Config = PoolConfig
    static let kind = ResourceKind.pools
    static let limitRange = 0...PoolConfig.Limits.elements.upperBound

    static func parseConfig(_ body: inout FieldReader, settings: UsherConfig) throws(FieldError) -> PoolConfig {
        try PoolConfig.parse(&body)
    }

    static func parsePatch(_ body: inout FieldReader) throws(FieldError) -> PoolPatch { try PoolPatch.parse(&body) }
    static func cursor(_ raw: String) -> Int64? { LeasePool.elementCursor(raw) }

    static func manager(from resource: any ManagedResource) -> (any PoolService)? {
        // The memory pool (always, without Redis) without a dynamic cast.
        if ObjectIdentifier(type(of: resource)) == ObjectIdentifier(LeasePool.self) {
            return unsafeDowncast(resource, to: LeasePool.self)
        }
        return resource as? any PoolService
    }

    static func readState(of pool: any PoolService, limit: Int, after cursor: Int64?) -> Pending<PoolState, PoolError> {
        pool.readState(limit: limit, after: cursor)
    }

    static func applyPatch(_ patch: PoolPatch, to pool: any PoolService) -> Pending<Void, PoolError> {
        pool.applyPatch(patch).map { _ in () }
    }

    static func apiError(_ error: PoolError) -> APIError { APIError(error) }

    /// What cannot change in place when a declaration differs from the pool there.
    static func fixedFields(_ name: String) -> String {
        "elements (and removing grow) cannot change in place: change elements through "
            + "/v1/pools/\(name)/elements, or DELETE the pool and reload to re-create it"
    }

    static func add(to router: inout Router<Route>) {
        LifecycleRoutes<Self>.add(to: &router)
        router.add("POST", "/v1/pools/{name}/fetch", fetch)
        router.add("POST", "/v1/pools/{name}/recycle", recycle)
        router.add("GET", "/v1/pools/{name}/leases/{id}", getLease)
        router.add("POST", "/v1/pools/{name}/leases/{id}/extend", extend)
        router.add("PUT", "/v1/pools/{name}/elements/{id}", putElement)
        router.add("DELETE", "/v1/pools/{name}/elements/{id}", removeElement)
    }

    private static func pool(_ call: Call) throws(APIError) -> any PoolService {
        try LifecycleRoutes<Self>.manager(call)
    }

    /// The lease, as `call` prefers it.
    private static func leaseReply(_ call: Call) -> @Sendable (Lease) -> HTTPResponse {
        { call.object(LeaseReplyBody(lease: $0)) }
    }

    /// The state as an answer, its elements cut at `max_response_bytes`:
    /// encoded whole first, measured element by element only when that does
    /// not fit. The waiting fetches get the room the elements leave.
    static func reply(
        _ state: PoolState, _ call: Call, status: Int, headers: [(name: String, value: String)]
    ) -> HTTPResponse {
        var state = state
        let maxBytes = call.app.config.maxResponseBytes
        if !state.waitingLeases.isEmpty {
            let leases = state.waitingLeases
            state.waitingLeases = []
            let room = maxBytes - Paging.cursorRoom - Wire.bytes(PoolStateBody(state)).count
            state.waitingLeases = Paging.preview(leases, room: room) { Wire.bytes(LeaseReplyBody(lease: $0)).count }
        }
        return Paging.reply(
            state, list: \.elements, nextCursor: \.nextCursor, cursors: state.cursors, more: state.more,
            resume: Paging.resume(call), maxBytes: maxBytes, status: status, headers: headers, body: PoolStateBody.init
        ) { Wire.bytes(PoolElementBody(element: $0)).count }
    }

    private static func fetch(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        let query = try call.query(allowing: ["wait", "on_disconnect"])
        let wait = try query.wait()
        let undo = try query.onDisconnect() == .withdraw
        let pool = try pool(call)
        let request: FetchRequest = try call.readBody { body throws(FieldError) in try FetchRequest.parse(&body) }
        let pending =
            if let wait {
                pool.fetchLease(request, until: call.app.deadline(after: wait))
            } else {
                pool.fetchLease(request)
            }
        return LifecycleRoutes<Self>.answer(call, pending) { leased($0, from: pool, undo: undo, for: call) }
    }

    /// The answer to a fetch; an active lease is recycled again (reason
    /// `undelivered`) when the server could not hand it to its client, if the
    /// client asked for that (`undo`).
    /// 201 when the fetch made the lease, 200 for a known `id`.
    private static func leased(_ outcome: FetchOutcome, from pool: any PoolService, undo: Bool, for call: Call)
        -> HTTPResponse
    {
        let response = call.object(LeaseReplyBody(lease: outcome.lease), status: outcome.created ? 201 : 200)
        let lease = outcome.lease
        guard undo, lease.status == .active, let fence = lease.fence else { return response }
        let id = lease.id
        return response.undoing { pool.recycleUndelivered(id: id, fence: fence) }
    }

    private static func recycle(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pool = try pool(call)
        let (lease, element) = try call.readBody { body throws(FieldError) in
            (try body.name("lease"), try body.name("element"))
        }
        switch (lease, element) {
        case (let id?, nil):
            return LifecycleRoutes<Self>.answer(call, pool.recycleLease(id), leaseReply(call))
        case (nil, let id?):
            return LifecycleRoutes<Self>.answer(call, pool.recycleElement(id), leaseReply(call))
        default:
            throw APIError.badRequest("give exactly one of lease and element")
        }
    }

    private static func getLease(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        try LifecycleRoutes<Self>.readOne(
            call, read: { p, id in p.readLease(id) },
            liveStatus: { $0.status.isFinished ? nil : $0.status },
            park: { p, id, status, deadline async throws(PoolError) in
                try await p.parkUntilChange(id: id, from: status, until: deadline).lease()
            },
            reply: { call.object(LeaseReplyBody(lease: $0), headers: $1) })
    }

    private static func extend(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pool = try pool(call)
        let id = try call.name("id")
        let seconds: Double? = try call.readBody { body throws(FieldError) in try body.duration("lease_seconds") }
        return LifecycleRoutes<Self>.answer(call, pool.extendLease(id, leaseSeconds: seconds), leaseReply(call))
    }

    private static func putElement(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pool = try pool(call)
        let id = try call.name("id")
        let data: JSONValue? = try call.readBody { body throws(FieldError) in body.value("data") }
        return LifecycleRoutes<Self>.answer(call, pool.putElement(id: id, data: data)) {
            Reply.encoded(PoolElementBody(element: $0.element), status: $0.created ? 201 : 200)
        }
    }

    private static func removeElement(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        let force = try call.query(allowing: ["force"]).bool("force") ?? false
        let pool = try pool(call)
        let id = try call.name("id")
        return LifecycleRoutes<Self>.answer(call, pool.removeElement(id: id, force: force)) {
            Reply.encoded(ElementRemovalBody(removal: $0))
        }
    }
}
