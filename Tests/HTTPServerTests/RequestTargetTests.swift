import Testing

@testable import HTTPServer

@Suite struct RequestTargetTests {
    private func parse(_ raw: String) throws(HTTPRefusal) -> RequestTarget {
        try RequestTarget(raw: Array(raw.utf8))
    }

    private func refused(_ raw: String) -> String? {
        do throws(HTTPRefusal) {
            _ = try parse(raw)
            return nil
        } catch {
            guard case .badRequest(let reason) = error else { return "not a 400" }
            return reason
        }
    }

    @Test func decodesPathSegmentsAndQuery() throws {
        let target = try parse("/v1/queues/print%65r/visitors?limit=2&name=a+b%2Bc&flag&&x=%F0%9F%98%80")
        #expect(target.path == "/v1/queues/printer/visitors")
        #expect(target.segments == ["v1", "queues", "printer", "visitors"])
        #expect(target.query.map(\.name) == ["limit", "name", "flag", "x"])
        #expect(target.query.map(\.value) == ["2", "a b+c", "", "😀"])
        #expect(try parse("/").path == "/")
        #expect(try parse("/").segments.isEmpty)
        #expect(try parse("/?a=1").path == "/")
    }

    @Test func refusesEverySecondWayOfWritingAPath() {
        for raw in [
            "//v1/queues", "/v1//queues", "/v1/queues/", "/v1/./queues", "/v1/../v1/queues", "/./", "/..",
            "/v1/%2e/queues", "/v1/%2E%2E/queues", "/v1/queues%2Fx", "/v1/queues%2fx",
        ] {
            #expect(refused(raw) != nil, "\(raw)")
        }
    }

    @Test func refusesNulAndControlCharactersAnywhere() {
        for raw in [
            "/v1/queues/keep%00-x", "/v1/queues/a%0Ab", "/v1/queues/a%7Fb", "/v1/queues/a%1fb",
            "/v1/queues?wait=1%00", "/v1/queues?a%00=1", "/v1/queues?x=%0d%0aSet-Cookie:1",
        ] {
            #expect(refused(raw)?.contains("NUL or control") == true, "\(raw)")
        }
    }

    @Test func refusesMalformedTargets() {
        for raw in [
            "", "*", "http://example.com/v1", "v1/queues", "/v1 /queues", "/v1/q\u{7F}", "/v1/é", "/v1#frag",
            "/v1/%", "/v1/%4", "/v1/%zz", "/v1?a=%g0", "/v1/%C3%28", "/v1/%FF",
        ] {
            #expect(refused(raw) != nil, "\(raw)")
        }
    }
}
