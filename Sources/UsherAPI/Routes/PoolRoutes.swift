import HTTPServer
import UsherCore

extension LeasePool: ManagedResource {
    package nonisolated func summary() -> JSONValue {
        withIsolation { pool in
            let state = try? pool.state(limit: 0)
            return .object([
                ("name", .string(pool.name)),
                ("size", .int(state?.size ?? 0)),
                ("available", .int(state?.available ?? 0)),
                ("leased", .int(state?.leased ?? 0)),
                ("waiting", .int(state?.waiting ?? 0)),
            ])
        }
    }

    package nonisolated func markDeleted() { withIsolation { $0.close() } }
    package nonisolated func markShuttingDown() { withIsolation { $0.shutdown() } }
}

/// `/v1/pools`: lifecycle, fetch (with the long-poll), recycle, extend and
/// elements (SPEC §4).
enum PoolRoutes: IsolatedKind {
    typealias Manager = LeasePool
    typealias State = PoolState
    typealias Failure = PoolError
    static let kind = ResourceKind.pools
    static let defaultLimit = 1000
    static let limitRange = 0...PoolConfig.Limits.elements.upperBound

    static func parseConfig(_ body: inout FieldReader, for call: Call) throws(FieldError) -> PoolConfig {
        try PoolConfig.parse(&body)
    }

    static func parsePatch(_ body: inout FieldReader) throws(FieldError) -> PoolPatch { try PoolPatch.parse(&body) }
    static func cursor(_ raw: String) -> Int64? { LeasePool.elementCursor(raw) }

    static func state(of pool: isolated LeasePool, limit: Int, after cursor: Int64?) throws(PoolError) -> PoolState {
        try pool.state(limit: limit, after: cursor)
    }

    static func apply(_ patch: PoolPatch, to pool: isolated LeasePool) throws(PoolError) { _ = try pool.apply(patch) }
    static func apiError(_ error: PoolError) -> APIError { APIError(error) }

    static func prepareDeclared(name: String, config: JSONValue, path: String, in app: UsherApp) throws(FieldError)
        -> DeclaredResource
    {
        var reader = try FieldReader(config, path: path)
        let wanted = try PoolConfig.parse(&reader)
        try reader.finish()
        return DeclaredResource(kind: kind, name: name) { app in
            guard let pool = try? app.registry.lookup(.pools, name, as: LeasePool.self) else {
                return .creating { () throws(APIError) in _ = try create(name: name, config: wanted, in: app) }
            }
            let patch = PoolPatch(leaseSeconds: wanted.leaseSeconds, maxWaiting: wanted.maxWaiting, grow: wanted.grow)
            let fixed =
                "elements (and removing grow) cannot change in place: change elements through "
                + "/v1/pools/\(name)/elements, or DELETE the pool and reload to re-create it"
            return .patching(current: { pool.withIsolation { $0.config } }, wanted: wanted, fixed: fixed) {
                () throws(APIError) in
                _ = try run(pool) { p throws(PoolError) in try p.apply(patch) }
            }
        }
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

    /// Creates a pool (PUT and the config file share this). The same config
    /// again means the same declared elements and the current mutable fields.
    static func create(name: String, config: PoolConfig, in app: UsherApp) throws(APIError) -> (LeasePool, Bool) {
        try app.registry.create(
            .pools, name,
            make: { LeasePool(name: name, config: config, clock: app.clock, events: app.events, budget: app.storage) },
            matches: { existing in existing.withIsolation { $0.config } == config })
    }

    private static func pool(_ call: Call) throws(APIError) -> LeasePool {
        try LifecycleRoutes<Self>.manager(call)
    }

    private static func leaseReply(_ lease: Lease) -> HTTPResponse {
        Reply.encoded(LeaseReplyBody(lease: lease))
    }

    /// The state as an answer, its elements cut at `max_response_bytes`:
    /// encoded whole first, measured element by element only when that does
    /// not fit. The waiting fetches get the room the elements leave.
    static func reply(_ state: PoolState, _ call: Call, status: Int = 200) -> HTTPResponse {
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
            maxBytes: maxBytes, status: status, body: PoolStateBody.init
        ) { Wire.bytes(PoolElementBody(element: $0)).count }
    }

    private static func fetch(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        let query = try call.query(allowing: ["wait", "on_disconnect"])
        let wait = try query.wait()
        let undo = try query.onDisconnect() == .withdraw
        let pool = try pool(call)
        let request: FetchRequest = try call.readBody { body throws(FieldError) in try FetchRequest.parse(&body) }
        guard let wait else {
            return .respond(
                leased(try run(pool) { p throws(PoolError) in try p.fetch(request) }, from: pool, undo: undo))
        }
        // Answer on the server thread when an element is free now; park only to wait.
        do throws(PoolError) {
            let lease = try pool.withIsolation { p throws(PoolError) in try p.fetch(request) }
            return .respond(leased(lease, from: pool, undo: undo))
        } catch {
            guard case .exhausted = error else { throw APIError(error) }
        }
        let app = call.app
        let deadline = app.deadline(after: wait)
        return app.later { () async throws(APIError) -> HTTPResponse in
            do throws(PoolError) {
                return leased(try await pool.fetch(request, until: deadline), from: pool, undo: undo)
            } catch { throw APIError(error) }
        }
    }

    /// The answer to a fetch; an active lease is recycled again (reason
    /// `undelivered`) when the server could not hand it to its client, if the
    /// client asked for that (`undo`).
    private static func leased(_ lease: Lease, from pool: LeasePool, undo: Bool) -> HTTPResponse {
        let response = leaseReply(lease)
        guard undo, lease.status == .active, let fence = lease.fence else { return response }
        let id = lease.id
        return response.undoing {
            _ = try? pool.withIsolation { p throws(PoolError) in try p.recycleUndelivered(lease: id, fence: fence) }
        }
    }

    private static func recycle(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pool = try pool(call)
        let (lease, element) = try call.readBody { body throws(FieldError) in
            (try body.name("lease"), try body.name("element"))
        }
        switch (lease, element) {
        case (let id?, nil):
            return .respond(leaseReply(try run(pool) { p throws(PoolError) in try p.recycle(lease: id) }))
        case (nil, let id?):
            return .respond(leaseReply(try run(pool) { p throws(PoolError) in try p.recycle(element: id) }))
        default:
            throw APIError.badRequest("give exactly one of lease and element")
        }
    }

    private static func getLease(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        try LifecycleRoutes<Self>.readOne(
            call, read: isolatedRead { p, id throws(PoolError) in try p.lease(id: id) },
            liveStatus: { $0.status.isFinished ? nil : $0.status },
            park: { p, id, status, deadline async throws(PoolError) in
                try await p.parkForChange(id: id, from: status, until: deadline).lease()
            },
            reply: { leaseReply($0) })
    }

    private static func extend(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pool = try pool(call)
        let id = try call.name("id")
        let seconds: Double? = try call.readBody { body throws(FieldError) in try body.duration("lease_seconds") }
        return .respond(
            leaseReply(try run(pool) { p throws(PoolError) in try p.extend(lease: id, leaseSeconds: seconds) }))
    }

    private static func putElement(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let pool = try pool(call)
        let id = try call.name("id")
        let data: JSONValue? = try call.readBody { body throws(FieldError) in body.value("data") }
        let (element, created) = try run(pool) { p throws(PoolError) in try p.putElement(id, data: data) }
        return .respond(Reply.encoded(ElementReplyBody(element: element), status: created ? 201 : 200))
    }

    private static func removeElement(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        let force = try call.query(allowing: ["force"]).bool("force") ?? false
        let pool = try pool(call)
        let id = try call.name("id")
        let removal = try run(pool) { p throws(PoolError) in try p.removeElement(id, force: force) }
        return .respond(Reply.encoded(ElementRemovalBody(removal: removal)))
    }
}
