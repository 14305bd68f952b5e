import HTTPServer
import UsherCore
import UsherRedis

extension StateMachine: ManagedResource {
    package nonisolated func summary() -> JSONValue {
        let snapshot = withIsolation { $0.snapshot() }
        return .object([
            ("name", .string(name)),
            ("definition", MachineRoutes.definitionSummary(definitionName, definition)),
            ("state", .string(snapshot.state)),
            ("version", .int(Int(snapshot.version))),
        ])
    }

    package nonisolated func markDeleted() { withIsolation { $0.close() } }
    package nonisolated func markShuttingDown() { withIsolation { $0.shutdown() } }
}

/// What a machine is made from: a named definition or an inline one.
struct MachineSpec: Sendable, Equatable {
    var definitionName: String?
    var definition: MachineDefinition

    /// Reads `{"definition": "player"}`, `{"definition": {…}}` or a bare inline
    /// definition (`{"initial": …, "transitions": …}`).
    static func parse(_ value: JSONValue?, path: String, definitions: [String: MachineDefinition]) throws(FieldError)
        -> MachineSpec
    {
        var reader = try FieldReader(value, path: path)
        guard reader.has("definition") else {
            guard let value, reader.has("initial") else {
                throw FieldError(
                    field: reader.fieldPath("definition"),
                    message: "required: a definition name or an inline definition")
            }
            return MachineSpec(definitionName: nil, definition: try MachineDefinition.parse(value, path: path))
        }
        let field = reader.fieldPath("definition")
        switch reader.value("definition") {
        case .string(let name)?:
            guard let definition = definitions[name] else {
                let known = definitions.keys.sorted().joined(separator: ", ")
                throw FieldError(field: field, message: "unknown definition '\(name)' (known: \(known))")
            }
            try reader.finish()
            return MachineSpec(definitionName: name, definition: definition)
        case let inline?:
            let spec = MachineSpec(definitionName: nil, definition: try MachineDefinition.parse(inline, path: field))
            try reader.finish()
            return spec
        case nil:
            throw FieldError(field: field, message: "must be a definition name or an object")
        }
    }
}

/// `/v1/machines`: lifecycle, events, transactions, long-poll on version (docs/api.md, Machines).
enum MachineRoutes: ResourceAPI {
    static let kind = ResourceKind.machines

    static func prepareDeclared(name: String, config: JSONValue, path: String, in app: UsherApp) throws(FieldError)
        -> DeclaredResource
    {
        let spec = try MachineSpec.parse(config, path: path, definitions: app.config.definitions)
        return DeclaredResource(kind: kind, name: name) { app in
            guard let machine = try? app.registry.lookup(.machines, name, as: StateMachine.self) else {
                return .creating { () throws(APIError) in _ = try create(name: name, spec: spec, in: app) }
            }
            // A machine has no PATCH: its definition is its identity.
            let fixed = "a machine's definition cannot change in place: DELETE the machine and reload to re-create it"
            return .patching(
                current: { MachineSpec(definitionName: machine.definitionName, definition: machine.definition) },
                wanted: spec, fixed: fixed
            ) { () throws(APIError) in }
        }
    }

    /// A machine's definition as its own GET shows it: the name, or the inline definition.
    static func definitionSummary(_ name: String?, _ definition: MachineDefinition) -> JSONValue {
        name.map { .string($0) } ?? Wire.value(MachineDefinitionBody(definition: definition))
    }

    static func add(to router: inout Router<Route>) {
        router.add("GET", "/v1/machines") { call throws(APIError) in try ResourceRoutes.list(call, .machines) }
        router.add("PUT", "/v1/machines/{name}", put)
        router.add("GET", "/v1/machines/{name}", get)
        router.add("DELETE", "/v1/machines/{name}") { call throws(APIError) in
            try ResourceRoutes.delete(call, .machines)
        }
        router.add("POST", "/v1/machines/{name}/events/{event}", fire)
        router.add("POST", "/v1/machines/{name}/transactions", openTransaction)
        router.add("POST", "/v1/machines/{name}/transactions/{id}/commit", commit)
        router.add("POST", "/v1/machines/{name}/transactions/{id}/abort", abort)
    }

    /// Creates a machine (PUT and the config file share this).
    static func create(name: String, spec: MachineSpec, in app: UsherApp) throws(APIError) -> (StateMachine, Bool) {
        try app.registry.create(
            .machines, name,
            make: {
                StateMachine(
                    name: name, definitionName: spec.definitionName, definition: spec.definition, clock: app.clock,
                    events: app.events,
                    budget: app.storage)
            },
            matches: { $0.definitionName == spec.definitionName && $0.definition == spec.definition })
    }

    /// Creates a machine in memory or in Redis, or finds the one there with
    /// the same definition (PUT and the config file share this).
    static func creating(name: String, spec: MachineSpec, backend: Backend, in app: UsherApp) -> Pending<
        Created<any MachineService>, APIError
    > {
        guard backend == .memory else { return creatingShared(name: name, spec: spec, in: app) }
        return .now { () throws(APIError) in
            let (machine, created) = try create(name: name, spec: spec, in: app)
            return Created(manager: machine, created: created)
        }
    }

    /// Creates a machine in Redis, or finds the one there with the same
    /// definition (created through any instance).
    private static func creatingShared(name: String, spec: MachineSpec, in app: UsherApp) -> Pending<
        Created<any MachineService>, APIError
    > {
        guard let redis = app.redis else { return .ready(.failure(.noRedisBlock)) }
        @Sendable func matches(_ snapshot: MachineSnapshot) -> Bool {
            snapshot.definitionName == spec.definitionName && snapshot.definition == spec.definition
        }
        if let existing = try? app.registry.resource(.machines, name) {
            guard let machine = existing as? RedisMachine else {
                return .ready(.failure(.alreadyExists("machine", name)))
            }
            return machine.readSnapshot().mapError(APIError.init).flatMap { snapshot in
                matches(snapshot)
                    ? .ready(.success(Created(manager: machine, created: false)))
                    : .ready(.failure(.alreadyExists("machine", name)))
            }
        }
        return .async { () async throws(APIError) -> Created<any MachineService> in
            let made = RedisMachine(name: name, backend: redis, events: app.events)
            let shared = try await app.createShared(.machines, name, manager: made) { () async throws(APIError) in
                do throws(MachineError) {
                    let (snapshot, created) = try await made.create(
                        definitionName: spec.definitionName, definition: spec.definition)
                    return (snapshot, created)
                } catch { throw APIError(error) }
            }
            guard let machine = shared.registered as? RedisMachine, matches(shared.value) else {
                throw APIError.alreadyExists("machine", name)
            }
            return Created(manager: machine, created: shared.created)
        }
    }

    /// The machine the path names, whichever backend holds it.
    private static func machine(_ call: Call) throws(APIError) -> any MachineService {
        let name = try call.name("name")
        let resource = try call.app.registry.resource(.machines, name)
        // The memory machine (always, without Redis) without a dynamic cast.
        if ObjectIdentifier(type(of: resource)) == ObjectIdentifier(StateMachine.self) {
            return unsafeDowncast(resource, to: StateMachine.self)
        }
        guard let machine = resource as? any MachineService else {
            throw APIError.notFound("machine \(name) not found")
        }
        return machine
    }

    /// Answers with `reply` of the value, now or once it is there.
    private static func answer<T: Sendable>(
        _ call: Call, _ pending: Pending<T, MachineError>, _ reply: @escaping @Sendable (T) -> HTTPResponse
    ) throws(APIError) -> HTTPHandlerResult {
        try call.answer(pending.mapError(APIError.init), reply)
    }

    private static func reply(_ snapshot: MachineSnapshot, status: Int = 200, withDefinition: Bool = false)
        -> HTTPResponse
    {
        // `?include=definition`: the normalized definition even when it has a
        // name (the dashboard draws it), as `definition_detail`.
        Reply.encoded(
            MachineBody(snapshot: snapshot, withDefinition: withDefinition), status: status,
            headers: [("ETag", "\"\(snapshot.version)\"")])
    }

    private static func put(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let name = try call.name("name")
        let body = try call.bodyValue()
        let spec: MachineSpec
        let backend: Backend
        do throws(FieldError) {
            let (rest, chosen) = try Backend.split(
                body ?? .object([]), path: "", otherwise: call.app.config.defaultBackend)
            spec = try MachineSpec.parse(body == nil ? nil : rest, path: "", definitions: call.app.config.definitions)
            backend = chosen
        } catch {
            throw APIError(error)
        }
        let pending = creating(name: name, spec: spec, backend: backend, in: call.app).flatMap { made in
            made.manager.readSnapshot().mapError(APIError.init).map { (snapshot: $0, created: made.created) }
        }
        return try call.answer(pending) { reply($0.snapshot, status: $0.created ? 201 : 200) }
    }

    private static func get(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        let query = try call.query(allowing: ["wait", "version", "include"])
        let wait = try query.wait()
        let withDefinition: Bool
        switch query["include"] {
        case nil: withDefinition = false
        case "definition"?: withDefinition = true
        default: throw APIError.badRequest("include must be 'definition'", field: "include")
        }
        let version: Int64?
        if let raw = query["version"] {
            guard let v = Int64(raw) else { throw APIError.badRequest("version must be an integer", field: "version") }
            version = v
        } else {
            version = nil
        }
        let machine = try machine(call)
        let app = call.app
        let deadline = wait.map { app.deadline(after: $0) }
        let pending = machine.readSnapshot().flatMap { snapshot -> Pending<MachineSnapshot, MachineError> in
            guard let deadline, snapshot.version == (version ?? snapshot.version) else {
                return .ready(.success(snapshot))
            }
            let seen = snapshot.version  // captured alone, not the whole snapshot
            return .async { () async throws(MachineError) -> MachineSnapshot in
                try await machine.parkUntilVersion(other: seen, until: deadline)
            }
        }
        return try answer(call, pending) { reply($0, withDefinition: withDefinition) }
    }

    private static func fire(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let machine = try machine(call)
        let event = try call.name("event")
        let data: JSONValue? = try call.readBody { body throws(FieldError) in body.value("data") }
        let expected = try ifMatch(call.request.header("if-match"))
        return try answer(call, machine.fireEvent(event, expectedVersion: expected, data: data), transitionReply)
    }

    /// `{"event", "timeout_seconds"?, "data"?}`, optional `If-Match`: 201 with the open transaction.
    private static func openTransaction(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let machine = try machine(call)
        let config = call.app.config
        let (event, seconds, data) = try call.readBody { body throws(FieldError) in
            guard let event = try body.name("event") else {
                throw FieldError(field: "event", message: "is required")
            }
            let seconds = try body.number(
                "timeout_seconds", in: Durations.minimumSeconds...config.maxMachineTransactionSeconds)
            return (event, seconds ?? config.machineTransactionSeconds, body.value("data"))
        }
        let expected = try ifMatch(call.request.header("if-match"))
        let pending = machine.openTransaction(event: event, expectedVersion: expected, data: data, seconds: seconds)
        return try answer(call, pending) { opened in
            Reply.encoded(
                TransactionBody(transaction: opened), status: 201, headers: [("ETag", "\"\(opened.version)\"")])
        }
    }

    /// Commits a transaction: answered as a plain event is.
    private static func commit(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let machine = try machine(call)
        let id = try call.name("id")
        try call.readBody { _ throws(FieldError) in }
        return try answer(call, machine.commitTransaction(id), transitionReply)
    }

    /// Aborts a transaction: 200 with it, `status: "aborted"`.
    private static func abort(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let machine = try machine(call)
        let id = try call.name("id")
        try call.readBody { _ throws(FieldError) in }
        return try answer(call, machine.abortTransaction(id)) { aborted in
            Reply.encoded(TransactionBody(transaction: aborted), headers: [("ETag", "\"\(aborted.version)\"")])
        }
    }

    /// An event's or a commit's answer.
    @Sendable private static func transitionReply(_ result: TransitionResult) -> HTTPResponse {
        Reply.encoded(TransitionResultBody(result: result), headers: [("ETag", "\"\(result.version)\"")])
    }

    /// `If-Match: "7"` or `If-Match: 7`; nil when absent or `*`.
    static func ifMatch(_ header: String?) throws(APIError) -> Int64? {
        guard var value = header?.trimmingCharacters(in: .whitespaces), !value.isEmpty, value != "*" else { return nil }
        if value.hasPrefix("W/") { value.removeFirst(2) }
        if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") {
            value = String(value.dropFirst().dropLast())
        }
        guard let version = Int64(value) else {
            throw APIError.badRequest("If-Match must be a version, quoted (\"7\") or bare (7)", field: "If-Match")
        }
        return version
    }
}
