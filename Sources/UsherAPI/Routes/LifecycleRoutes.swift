import Answers
import HTTPServer
import UsherCore

/// What the lifecycle routes need from a kind whose resources are made from a
/// config: `PUT` creates one (200 for the same config again), `GET` answers a
/// page of its state, `PATCH` changes the config and answers the state.
/// Queues, windows, pools and pipelines share this one shape; machines, made
/// from a definition and read with a version wait, have their own.
protocol ConfiguredKind: BackedKind {
    /// What the routes call: an actor in memory, or a service whose answers may come later.
    associatedtype Manager: Sendable
    associatedtype Patch: Sendable
    associatedtype State: Sendable, Hashable
    associatedtype Cursor: Sendable
    associatedtype Failure: Error

    /// The page sizes allowed (`Paging.defaultLimit` without `?limit=`).
    static var limitRange: ClosedRange<Int> { get }

    /// Reads a `PUT` body (unknown members are refused by the caller).
    static func parseConfig(_ body: inout FieldReader, settings: UsherConfig) throws(FieldError) -> Config
    /// Reads a `PATCH` body.
    static func parsePatch(_ body: inout FieldReader) throws(FieldError) -> Patch
    /// A `cursor` this kind's pages answered, or nil.
    static func cursor(_ raw: String) -> Cursor?

    /// The registry's resource as this kind's manager.
    static func manager(from resource: any ManagedResource) -> Manager?
    static func readState(of manager: Manager, limit: Int, after cursor: Cursor?) -> Pending<State, Failure>
    static func applyPatch(_ patch: Patch, to manager: Manager) -> Pending<Void, Failure>
    /// The state as an answer, cut at `max_response_bytes`, with `headers`.
    static func reply(_ state: State, _ call: Call, status: Int, headers: [(name: String, value: String)])
        -> HTTPResponse
    /// Whether the state's body shows what the clock moves (its `ETag` is weak then).
    static func followsClock(_ state: State) -> Bool
    static func apiError(_ error: Failure) -> APIError
}

extension ConfiguredKind {
    static func followsClock(_ state: State) -> Bool { false }

    /// The state's entity tag.
    static func tag(of state: State) -> EntityTag { EntityTag(of: state, weak: followsClock(state)) }

    static func parseDeclared(_ config: JSONValue, path: String, settings: UsherConfig) throws(FieldError) -> Config {
        var reader = try FieldReader(config, path: path)
        let parsed = try parseConfig(&reader, settings: settings)
        try reader.finish()
        return parsed
    }
}

/// A resource a `PUT` found or made.
struct Created<Manager: Sendable>: Sendable {
    let manager: Manager
    /// False: one of that name and config existed.
    let created: Bool
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
        let name = try call.name("name")
        guard let manager = Kind.manager(from: try call.app.registry.resource(Kind.kind, name)) else {
            throw APIError.notFound("\(Kind.kind.noun) \(name) not found")
        }
        return manager
    }

    /// Answers with `reply` of the value, now or once it is there; a failure is the kind's error.
    static func answer<T: Sendable>(
        _ call: Call, _ pending: Pending<T, Kind.Failure>, _ reply: @escaping @Sendable (T) -> HTTPResponse
    ) -> HTTPHandlerResult {
        call.answer(pending.mapError(Kind.apiError), reply)
    }

    private static func put(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let name = try call.name("name")
        let (config, backend) = try readConfig(call)
        let pending = Kind.creating(name: name, config: config, backend: backend, in: call.app).flatMap {
            made -> Pending<(state: Kind.State, created: Bool), APIError> in
            guard let manager = Kind.manager(from: made.manager) else {
                return .ready(.failure(.alreadyExists(Kind.kind.noun, name)))
            }
            return Kind.readState(of: manager, limit: Paging.defaultLimit, after: nil).mapError(Kind.apiError)
                .map { (state: $0, created: made.created) }
        }
        return call.answer(pending) {
            Kind.reply($0.state, call, status: $0.created ? 201 : 200, headers: [Kind.tag(of: $0.state).header])
        }
    }

    /// A `PUT` body: the kind's config, and `backend` (default `default_backend`).
    private static func readConfig(_ call: Call) throws(APIError) -> (Kind.Config, Backend) {
        let body = try call.bodyValue() ?? .object([])
        do throws(FieldError) {
            let (rest, backend) = try Backend.split(body, path: "", otherwise: call.app.config.defaultBackend)
            var reader = try FieldReader(rest)
            let config = try Kind.parseConfig(&reader, settings: call.app.config)
            try reader.finish()
            return (config, backend)
        } catch { throw APIError(error) }
    }

    /// `GET /v1/{kind}/{name}[?wait=S]`: the state now, or with `wait`, once
    /// its tag differs from the one `If-None-Match` names (without one, from
    /// the state's when the request came) or when `S` passes.
    private static func get(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        let query = try call.query(allowing: ["limit", "cursor", "wait"])
        let limit = try query.int("limit", in: Kind.limitRange) ?? Paging.defaultLimit
        let cursor = try Paging.cursor(query, Kind.cursor)
        let wait = try query.wait()
        let manager = try manager(call)
        let name = try call.name("name")
        let held = HeldTags(call.request)
        let app = call.app
        // Only the first page's answer is kept.
        let answers = query["limit"] == nil && query["cursor"] == nil ? app.registry.answers(Kind.kind, name) : nil
        guard let wait else {
            return answer(call, Kind.readState(of: manager, limit: limit, after: cursor)) {
                tagged($0, call, held: held, answers: answers)
            }
        }
        let deadline = app.deadline(after: wait)
        let pending = Pending<Kind.State, Kind.Failure>.async { () async throws(Kind.Failure) -> Kind.State in
            var first: EntityTag?
            while true {
                let mark = app.changes.mark()
                let state = try await Kind.readState(of: manager, limit: limit, after: cursor).value()
                let tag = Kind.tag(of: state)
                let unchanged = held.map { tag.isHeld(by: $0) } ?? (first.map { $0 == tag } ?? true)
                if first == nil { first = tag }
                guard unchanged, app.clock.now() < deadline, !Task.isCancelled else { return state }
                await app.changes.nextChange(of: Kind.kind.noun, name, after: mark, until: deadline)
            }
        }
        return answer(call, pending) { tagged($0, call, held: held, answers: answers) }
    }

    /// The state's answer with its `ETag`: 304 when `If-None-Match` names
    /// it, else the kept answer while it is current, else encoded (and kept).
    private static func tagged(_ state: Kind.State, _ call: Call, held: HeldTags?, answers: AnswerCache?)
        -> HTTPResponse
    {
        let tag = Kind.tag(of: state)
        if tag.isHeld(by: held) { return tag.notModified }
        let answers = tag.weak ? nil : answers
        if let kept = answers?.answer(tagged: tag) { return kept }
        let response = Kind.reply(state, call, status: 200, headers: [tag.header])
        answers?.keep(response, tagged: tag)
        return response
    }

    private static func patch(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let manager = try manager(call)
        let patch = try call.readBody { body throws(FieldError) in try Kind.parsePatch(&body) }
        let pending = Kind.applyPatch(patch, to: manager).flatMap { _ in
            Kind.readState(of: manager, limit: Paging.defaultLimit, after: nil)
        }
        return answer(call, pending) { Kind.reply($0, call, status: 200, headers: [Kind.tag(of: $0).header]) }
    }
}

extension LifecycleRoutes {
    /// `GET …/{id}[?wait=S]` of one visitor, item or lease, with its `ETag`
    /// (weak where `followsClock`): as it is now, or, with `wait`, once its
    /// status differs from the one it has now, or when `S` passes. A
    /// finished one (`status` nil), or one whose tag `If-None-Match` does not
    /// name, answers at once; one whose tag it names answers 304.
    static func readOne<Object: Sendable & Hashable, Status: Sendable>(
        _ call: Call,
        read: @Sendable (Kind.Manager, String) -> Pending<Object, Kind.Failure>,
        liveStatus: @escaping @Sendable (Object) -> Status?,
        followsClock: @escaping @Sendable (Object) -> Bool = { _ in false },
        park: @escaping @Sendable (Kind.Manager, String, Status, Timestamp) async throws(Kind.Failure) -> Object,
        reply: @escaping @Sendable (Object, _ headers: [(name: String, value: String)]) -> HTTPResponse
    ) throws(APIError) -> HTTPHandlerResult {
        let wait = try call.query(allowing: ["wait"]).wait()
        let manager = try manager(call)
        let id = try call.name("id")
        let held = HeldTags(call.request)
        let app = call.app
        let deadline = wait.map { app.deadline(after: $0) }
        let pending = read(manager, id).flatMap { object -> Pending<Object, Kind.Failure> in
            guard let deadline, let status = liveStatus(object) else { return .ready(.success(object)) }
            if let held, !EntityTag(of: object, weak: followsClock(object)).isHeld(by: held) {
                return .ready(.success(object))
            }
            return .async { () async throws(Kind.Failure) -> Object in try await park(manager, id, status, deadline) }
        }
        let request = call.request
        return answer(call, pending) { object in
            EntityTag.answer(object, weak: followsClock(object), to: request) { reply(object, $0) }
        }
    }
}
