import HTTPServer
import UsherCore

/// What each kind's routes provide to the app.
protocol ResourceAPI: Sendable {
    /// The kind these routes serve.
    static var kind: ResourceKind { get }
    /// Adds the kind's routes.
    static func add(to router: inout Router<Route>)
    /// Reads a resource the config file declares, without applying it;
    /// errors name the field under `path` (e.g. `queues.printer.capacity`).
    static func prepareDeclared(name: String, config: JSONValue, path: String, in app: UsherApp) throws(FieldError)
        -> DeclaredResource
}

/// The lifecycle routes every kind shares.
enum ResourceRoutes {
    /// `GET /v1/{kind}`: every resource of the kind with its summary.
    static func list(_ call: Call, _ kind: ResourceKind) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let items = call.app.registry.list(kind).map { $0.summary() }
        return .respond(Reply.json(.object([(kind.rawValue, .array(items))])))
    }

    /// `DELETE /v1/{kind}/{name}`: 204; requests waiting on it get 410.
    static func delete(_ call: Call, _ kind: ResourceKind) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        try call.app.registry.remove(kind, try call.name("name"))
        return .respond(Reply.noContent())
    }
}
