import HTTPServer
import UsherCore

/// What the lifecycle routes need from a kind whose resources are made from a
/// config: `PUT` creates one (200 for the same config again), `GET` answers a
/// page of its state, `PATCH` changes the config and answers the state.
/// Queues, windows, pools and pipelines share this one shape; machines, made
/// from a definition and read with a version wait, have their own.
protocol ConfiguredKind: ResourceAPI {
    associatedtype Manager: ManagedResource & LockIsolatedActor
    associatedtype Config: Sendable
    associatedtype Patch: Sendable
    associatedtype State: Sendable
    associatedtype Cursor: Sendable
    associatedtype Failure: Error

    /// The page size without `?limit=`, and the sizes allowed.
    static var defaultLimit: Int { get }
    static var limitRange: ClosedRange<Int> { get }

    /// Reads a `PUT` body (unknown members are refused by the caller).
    static func parseConfig(_ body: inout FieldReader, for call: Call) throws(FieldError) -> Config
    /// Reads a `PATCH` body.
    static func parsePatch(_ body: inout FieldReader) throws(FieldError) -> Patch
    /// A `cursor` this kind's pages answered, or nil.
    static func cursor(_ raw: String) -> Cursor?

    /// Creates the resource, or finds it with the same config (PUT and the config file share this).
    static func create(name: String, config: Config, in app: UsherApp) throws(APIError) -> (Manager, Bool)
    static func state(of manager: isolated Manager, limit: Int, after cursor: Cursor?) throws(Failure) -> State
    static func apply(_ patch: Patch, to manager: isolated Manager) throws(Failure)
    /// The state as an answer, cut at `max_response_bytes`.
    static func reply(_ state: State, _ call: Call, status: Int) -> HTTPResponse
    static func apiError(_ error: Failure) -> APIError
}

/// `GET /v1/{kind}`, and `PUT`, `GET`, `PATCH`, `DELETE /v1/{kind}/{name}`.
enum LifecycleRoutes<Kind: ConfiguredKind> {
    static func add(to router: inout Router<Route>) {
        let path = "/v1/\(Kind.kind.rawValue)"
        router.add("GET", path) { call throws(APIError) in try ResourceRoutes.list(call, Kind.kind) }
        router.add("PUT", path + "/{name}", put)
        router.add("GET", path + "/{name}", get)
        router.add("PATCH", path + "/{name}", patch)
        router.add("DELETE", path + "/{name}") { call throws(APIError) in try ResourceRoutes.delete(call, Kind.kind) }
    }

    /// The resource the path names.
    static func manager(_ call: Call) throws(APIError) -> Kind.Manager {
        try call.app.registry.lookup(Kind.kind, try call.name("name"), as: Kind.Manager.self)
    }

    /// Runs a synchronous operation isolated to the resource, mapping its error.
    static func run<T: Sendable>(
        _ manager: Kind.Manager, _ body: (isolated Kind.Manager) throws(Kind.Failure) -> T
    ) throws(APIError) -> T {
        do throws(Kind.Failure) { return try manager.withIsolation(body) } catch { throw Kind.apiError(error) }
    }

    private static func put(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let name = try call.name("name")
        let config = try call.readBody { body throws(FieldError) in try Kind.parseConfig(&body, for: call) }
        let (manager, created) = try Kind.create(name: name, config: config, in: call.app)
        let state = try run(manager) { m throws(Kind.Failure) in
            try Kind.state(of: m, limit: Kind.defaultLimit, after: nil)
        }
        return .respond(Kind.reply(state, call, status: created ? 201 : 200))
    }

    private static func get(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        let query = try call.query(allowing: ["limit", "cursor"])
        let limit = try query.int("limit", in: Kind.limitRange) ?? Kind.defaultLimit
        let cursor = try Paging.cursor(query, Kind.cursor)
        let manager = try manager(call)
        let state = try run(manager) { m throws(Kind.Failure) in try Kind.state(of: m, limit: limit, after: cursor) }
        return .respond(Kind.reply(state, call, status: 200))
    }

    private static func patch(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let manager = try manager(call)
        let patch = try call.readBody { body throws(FieldError) in try Kind.parsePatch(&body) }
        let state = try run(manager) { m throws(Kind.Failure) in
            try Kind.apply(patch, to: m)
            return try Kind.state(of: m, limit: Kind.defaultLimit, after: nil)
        }
        return .respond(Kind.reply(state, call, status: 200))
    }
}

extension LifecycleRoutes {
    /// `GET …/{id}[?wait=S]` of one visitor, item or lease: as it is now, or,
    /// with `wait`, once its status differs from the one it has now, or when
    /// `S` passes. A finished one (`status` nil) answers at once.
    static func readOne<Object: Sendable, Status: Sendable>(
        _ call: Call,
        read: @Sendable (isolated Kind.Manager, String) throws(Kind.Failure) -> Object,
        liveStatus: (Object) -> Status?,
        park: @escaping @Sendable (Kind.Manager, String, Status, Timestamp) async throws(Kind.Failure) -> Object,
        reply: @escaping @Sendable (Object) -> HTTPResponse
    ) throws(APIError) -> HTTPHandlerResult {
        let wait = try call.query(allowing: ["wait"]).wait()
        let manager = try manager(call)
        let id = try call.name("id")
        let object = try run(manager) { m throws(Kind.Failure) in try read(m, id) }
        guard let wait, let status = liveStatus(object) else { return .respond(reply(object)) }
        let deadline = call.app.deadline(after: wait)
        return call.app.later { () async throws(APIError) -> HTTPResponse in
            do throws(Kind.Failure) {
                return reply(try await park(manager, id, status, deadline))
            } catch { throw Kind.apiError(error) }
        }
    }
}
