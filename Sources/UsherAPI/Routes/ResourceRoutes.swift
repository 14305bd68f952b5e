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
        @Sendable func reply(_ listed: [(name: String, item: JSONValue)]) -> HTTPResponse {
            let list = ListBody(kind: kind, items: listed.map(\.item), nextCursor: nil)
            return Paging.reply(
                list, list: \.items, nextCursor: \.nextCursor, cursors: listed.map(\.name), more: page.more,
                maxBytes: maxBytes, body: { $0 }, itemSize: { Wire.bytes($0).count })
        }
        let resources = page.resources
        guard resources.contains(where: { $0 is any SharedResource }) else {
            return .respond(reply(resources.map { ($0.name, $0.summary()) }))
        }
        // Summaries of Redis-backed resources need their counts from Redis:
        // the page's are asked at once. One deleted through another instance
        // (its notice not heard here yet) is left out and forgotten; any other
        // failure, the first in the list's order, is the answer.
        let app = call.app
        return app.later { () async throws(APIError) -> HTTPResponse in
            let items = try await resources.mapAtOnce { (resource) async throws(APIError) -> JSONValue? in
                guard let shared = resource as? any SharedResource else { return resource.summary() }
                do throws(APIError) {
                    return try await shared.sharedSummary().value()
                } catch {
                    guard error.status == 410 else { throw error }
                    app.registry.forget(kind, resource.name)
                    return nil
                }
            }
            return reply(zip(resources, items).compactMap { resource, item in item.map { (resource.name, $0) } })
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
