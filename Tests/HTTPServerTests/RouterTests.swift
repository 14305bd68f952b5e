import Testing

@testable import HTTPServer

@Suite struct RouterTests {
    private func router() -> Router<String> {
        var r = Router<String>()
        r.add("GET", "/v1/queues", "list")
        r.add("PUT", "/v1/queues/{name}", "put")
        r.add("GET", "/v1/queues/{name}", "get")
        r.add("POST", "/v1/queues/{name}/visitors", "enqueue")
        r.add("GET", "/v1/queues/{name}/visitors/{id}", "visitor")
        r.add("POST", "/v1/queues/{name}/visitors/{id}/complete", "complete")
        return r
    }

    @Test func matchesLiteralAndParameterSegments() throws {
        guard case .found(let h, let template, let params) = router().match("GET", "/v1/queues/jobs/visitors/v1") else {
            Issue.record("no match")
            return
        }
        #expect(h == "visitor")
        #expect(template == "/v1/queues/{name}/visitors/{id}")
        #expect(params == ["name": "jobs", "id": "v1"])
    }

    @Test func literalBeatsParameter() {
        guard case .found(let h, _, let params) = router().match("GET", "/v1/queues") else {
            Issue.record("no match")
            return
        }
        #expect(h == "list")
        #expect(params.isEmpty)
    }

    @Test func wrongMethodListsAllowedMethods() {
        guard case .methodNotAllowed(let allowed) = router().match("DELETE", "/v1/queues/jobs") else {
            Issue.record("expected 405")
            return
        }
        #expect(allowed == ["GET", "HEAD", "PUT"])
    }

    @Test func unknownPathIsNotFound() {
        if case .notFound = router().match("GET", "/v1/nope") {} else { Issue.record("expected 404") }
        if case .notFound = router().match("GET", "/v1/queues/a/b/c/d/e") {} else { Issue.record("expected 404") }
        // A prefix of a route that has no handler itself is not a route.
        if case .notFound = router().match("GET", "/v1") {} else { Issue.record("expected 404") }
    }

    @Test func headFallsBackToGet() {
        guard case .found(let h, _, _) = router().match("HEAD", "/v1/queues/x") else {
            Issue.record("no match")
            return
        }
        #expect(h == "get")
    }
}
