import Answers
import HTTPServer
import UsherCore

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
enum MachineRoutes: BackedKind {
    static let kind = ResourceKind.machines

    static func parseDeclared(_ config: JSONValue, path: String, settings: UsherConfig) throws(FieldError)
        -> MachineSpec
    {
        try MachineSpec.parse(config, path: path, definitions: settings.definitions)
    }

    static func fixedFields(_ name: String) -> String {
        "a machine's definition cannot change in place: DELETE the machine and reload to re-create it"
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

    /// The machine the path names, whichever backend holds it.
    private static func machine(_ call: Call) throws(APIError) -> any MachineService {
        let name = try call.name("name")
        guard let machine = machine(from: try call.app.registry.resource(.machines, name)) else {
            throw APIError.notFound("machine \(name) not found")
        }
        return machine
    }

    private static func machine(from resource: any ManagedResource) -> (any MachineService)? {
        // The memory machine (always, without Redis) without a dynamic cast.
        if ObjectIdentifier(type(of: resource)) == ObjectIdentifier(StateMachine.self) {
            return unsafeDowncast(resource, to: StateMachine.self)
        }
        return resource as? any MachineService
    }

    /// Answers with `reply` of the value, now or once it is there.
    private static func answer<T: Sendable>(
        _ call: Call, _ pending: Pending<T, MachineError>, _ reply: @escaping @Sendable (T) -> HTTPResponse
    ) -> HTTPHandlerResult {
        call.answer(pending.mapError(APIError.init), reply)
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
        let pending = creating(name: name, config: spec, backend: backend, in: call.app).flatMap {
            made -> Pending<(snapshot: MachineSnapshot, created: Bool), APIError> in
            guard let machine = machine(from: made.manager) else {
                return .ready(.failure(.alreadyExists("machine", name)))
            }
            return machine.readSnapshot().mapError(APIError.init).map { (snapshot: $0, created: made.created) }
        }
        return call.answer(pending) { reply($0.snapshot, status: $0.created ? 201 : 200) }
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
        let held = HeldTags(call.request)
        let machine = try machine(call)
        let app = call.app
        let deadline = wait.map { app.deadline(after: $0) }
        let pending = machine.readSnapshot().flatMap { snapshot -> Pending<MachineSnapshot, MachineError> in
            // What the client holds: `version`, else the versions If-None-Match names, else the current one.
            let unchanged = version.map { $0 == snapshot.version } ?? held?.holds(String(snapshot.version)) ?? true
            guard let deadline, unchanged else { return .ready(.success(snapshot)) }
            let seen = snapshot.version  // captured alone, not the whole snapshot
            return .async { () async throws(MachineError) -> MachineSnapshot in
                try await machine.parkUntilVersion(other: seen, until: deadline)
            }
        }
        return answer(call, pending) { snapshot in
            if held?.holds(String(snapshot.version)) == true { return notModified(snapshot) }
            return reply(snapshot, withDefinition: withDefinition)
        }
    }

    /// 304: the client's copy is current; its `ETag`, no body.
    private static func notModified(_ snapshot: MachineSnapshot) -> HTTPResponse {
        EntityTag(opaque: String(snapshot.version), weak: false).notModified
    }

    private static func fire(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let machine = try machine(call)
        let event = try call.name("event")
        let data: JSONValue? = try call.readBody { body throws(FieldError) in body.value("data") }
        let expected = try ifMatch(call.request.header("if-match"))
        return answer(call, machine.fireEvent(event, expectedVersion: expected, data: data), transitionReply(call))
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
        return answer(call, pending) { opened in
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
        return answer(call, machine.commitTransaction(id), transitionReply(call))
    }

    /// Aborts a transaction: 200 with it, `status: "aborted"`.
    private static func abort(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let machine = try machine(call)
        let id = try call.name("id")
        try call.readBody { _ throws(FieldError) in }
        return answer(call, machine.abortTransaction(id)) { aborted in
            Reply.encoded(TransactionBody(transaction: aborted), headers: [("ETag", "\"\(aborted.version)\"")])
        }
    }

    /// An event's or a commit's answer.
    private static func transitionReply(_ call: Call) -> @Sendable (TransitionResult) -> HTTPResponse {
        { result in call.object(TransitionResultBody(result: result), headers: [("ETag", "\"\(result.version)\"")]) }
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
