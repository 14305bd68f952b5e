import HTTPServer
import UsherCore

/// What each kind's routes provide to the app.
protocol ResourceAPI: Sendable {
    /// The kind these routes serve.
    static var kind: ResourceKind { get }
    /// Adds the kind's routes.
    static func add(to router: inout Router<Route>)
}

/// The lifecycle routes every kind shares.
enum ResourceRoutes {
    /// `GET /v1/{kind}[?limit=N&cursor=C]`: the resources of the kind with
    /// their summaries, by name, `limit` (default `Paging.defaultLimit`) after the name `cursor`.
    static func list(_ call: Call, _ kind: ResourceKind) throws(APIError) -> HTTPHandlerResult {
        let query = try call.query(allowing: ["limit", "cursor"])
        let limit = try query.int("limit", in: 0...1_000_000) ?? Paging.defaultLimit
        let after = try Paging.cursor(query) { Names.isValid($0) ? $0 : nil }
        let page = call.app.registry.list(kind, after: after, limit: limit)
        let maxBytes = call.app.config.maxResponseBytes
        let resume = Paging.resume(call)
        let request = call.request
        @Sendable func reply(_ listed: [(name: String, item: JSONValue)]) -> HTTPResponse {
            let items = listed.map(\.item)
            return EntityTag.answer(JSONValue.array(items + [.bool(page.more)]), to: request) { tag in
                Paging.reply(
                    ListBody(kind: kind, items: items, nextCursor: nil), list: \.items, nextCursor: \.nextCursor,
                    cursors: listed.map(\.name), more: page.more, resume: resume, maxBytes: maxBytes, headers: tag,
                    body: { $0 }, itemSize: { Wire.bytes($0).count })
            }
        }
        let resources = page.resources
        let summaries = resources.map { $0.listSummary() }
        let ready = summaries.compactMap { summary -> JSONValue? in
            guard case .ready(.success(let item)) = summary else { return nil }
            return item
        }
        if ready.count == resources.count { return .respond(reply(zip(resources, ready).map { ($0.name, $1) })) }
        // Summaries of Redis-backed resources need their counts from Redis:
        // the page's are asked at once. One deleted through another instance
        // (its notice not heard here yet) is left out and forgotten; any other
        // failure, the first in the list's order, is the answer.
        let app = call.app
        return app.later { () async throws(APIError) -> HTTPResponse in
            let items = try await Array(zip(resources, summaries)).mapAtOnce {
                (listed) async throws(APIError) -> JSONValue? in
                do throws(APIError) {
                    return try await listed.1.value()
                } catch {
                    guard error.status == 410 else { throw error }
                    app.registry.forget(kind, listed.0.name)
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
        return try call.answer(app.registry.resource(kind, name).deleting(from: app.registry)) { _ in
            app.trimmer.request()
            return Reply.noContent()
        }
    }
}
