import HTTPServer
import UsherCore

/// `/healthz`, `/readyz`, `/metrics`, `/openapi.json` and `GET /v1` (docs/api.md, Operations).
enum OperationsRoutes {
    static func add(to router: inout Router<Route>) {
        router.add("GET", "/healthz") { _ throws(APIError) in
            .respond(Reply.encoded(StatusBody(status: "ok")))
        }
        router.add("GET", "/metrics") { call throws(APIError) in
            MetricsRoute.handle(call.app)
        }
        router.add("GET", "/readyz") { call throws(APIError) in
            let app = call.app
            if app.isStopping {
                // Not `Connection: close`: the connection may carry the next request.
                var refusal = APIError.shuttingDown()
                refusal.headers.removeAll { $0.name == "Connection" }
                return .respond(refusal.response)
            }
            guard let redis = app.redis else { return .respond(Reply.encoded(StatusBody(status: "ready"))) }
            return app.later { () async throws(APIError) -> HTTPResponse in
                if let reason = await redis.unavailableReason() { throw APIError.backendUnavailable(reason) }
                return Reply.encoded(StatusBody(status: "ready"))
            }
        }
        router.add("GET", "/openapi.json") { call throws(APIError) in
            .respond(OpenAPIDocument.answer.answer(call.request))
        }
        router.add("GET", "/v1") { call throws(APIError) in
            _ = try call.query(allowing: [])
            let counts = call.app.registry.counts()
            let kinds = ResourceKind.allCases.map { KindsBody.Kind(kind: $0, count: counts[$0] ?? 0) }
            return .respond(Reply.encoded(KindsBody(kinds: kinds)))
        }
    }
}
