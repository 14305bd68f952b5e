import HTTPServer

/// A route's code: answers now, or defers work that waits.
struct Route: Sendable {
    /// Its index in the router (`Router.routes`): its slot in `HTTPMetrics`.
    package let slot: Int
    /// Who may call it.
    let access: RouteAccess
    /// The kind whose resource its `{name}` must name (every route under
    /// `/v1/{kind}/{name}` but the `PUT` that creates one), else nil.
    let resource: ResourceKind?
    /// Handles a routed call.
    package let run: @Sendable (Call) throws(APIError) -> HTTPHandlerResult
}

extension Router where Handler == Route {
    /// Adds a route whose code is `run`.
    mutating func add(
        _ method: String, _ template: String, _ run: @escaping @Sendable (Call) throws(APIError) -> HTTPHandlerResult
    ) {
        let resource = ResourceKind.allCases.first { kind in
            let root = "/v1/\(kind.rawValue)/{name}"
            return template.hasPrefix(root) && !(method == "PUT" && template == root)
        }
        add(
            method, template,
            Route(slot: routes.count, access: RouteAccess(path: template), resource: resource, run: run))
    }
}
