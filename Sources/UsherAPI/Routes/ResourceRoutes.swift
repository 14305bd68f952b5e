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
    /// `GET /v1/{kind}[?limit=N&cursor=C]`: the resources of the kind with
    /// their summaries, by name, `limit` (default 1000) after the name `cursor`.
    static func list(_ call: Call, _ kind: ResourceKind) throws(APIError) -> HTTPHandlerResult {
        let query = try call.query(allowing: ["limit", "cursor"])
        let limit = try query.int("limit", in: 0...1_000_000) ?? 1000
        let after = try Paging.cursor(query) { Names.isValid($0) ? $0 : nil }
        let page = call.app.registry.list(kind, after: after, limit: limit)
        let maxBytes = call.app.config.maxResponseBytes
        @Sendable func reply(_ items: [JSONValue]) -> HTTPResponse {
            let list = ListBody(kind: kind, items: items, nextCursor: nil)
            return Paging.reply(
                list, list: \.items, nextCursor: \.nextCursor, cursors: page.resources.map(\.name), more: page.more,
                maxBytes: maxBytes, body: { $0 }, itemSize: { Wire.bytes($0).count })
        }
        let shared = page.resources.compactMap { $0 as? any SharedResource }
        guard !shared.isEmpty else { return .respond(reply(page.resources.map { $0.summary() })) }
        // Summaries of Redis-backed resources need their counts from Redis:
        // the page's are asked at once; the first that fails, in the list's
        // order, is the answer.
        let resources = page.resources
        return call.app.later { () async throws(APIError) -> HTTPResponse in
            let items = try await resources.mapAtOnce { (resource) async throws(APIError) -> JSONValue in
                guard let shared = resource as? any SharedResource else { return resource.summary() }
                return try await shared.sharedSummary().value()
            }
            return reply(items)
        }
    }

    /// `DELETE /v1/{kind}/{name}`: 204; requests waiting on it get 410.
    static func delete(_ call: Call, _ kind: ResourceKind) throws(APIError) -> HTTPHandlerResult {
        _ = try call.query(allowing: [])
        let name = try call.name("name")
        let app = call.app
        if let shared = try app.registry.resource(kind, name) as? any SharedResource {
            return try call.answer(shared.deleteShared()) { _ in
                app.registry.forget(kind, name)
                return Reply.noContent()
            }
        }
        try call.app.registry.remove(kind, name)
        call.app.trimmer.request()
        return .respond(Reply.noContent())
    }
}
