import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import HTTPServer
@testable import UsherAPI
@testable import UsherCore

/// `depth` nested arrays around `1`: `[[1]]` is 2 deep.
private func nested(_ depth: Int) -> String {
    String(repeating: "[", count: depth) + "1" + String(repeating: "]", count: depth)
}

/// `depth` nested objects: `{"a":{"a":1}}` is 2 deep.
private func nestedObject(_ depth: Int) -> String {
    String(repeating: #"{"a":"#, count: depth) + "1" + String(repeating: "}", count: depth)
}

/// A pointer of `segments` tokens `a`: `/a/a`.
private func pointer(_ segments: Int) -> String { String(repeating: "/a", count: segments) }

extension TestHTTPClient.Response {
    /// True when Foundation's parser (512 levels at most) reads the body.
    fileprivate var parses: Bool {
        (try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed])) != nil
    }
    fileprivate var detail: String { json["detail"] as? String ?? "" }
    fileprivate var problemField: String? { json["field"] as? String }
}

/// An upstream for an `http` source: answers every GET with one body.
private final class FixedSource: HTTPHandler {
    private let body: String
    init(_ body: String) { self.body = body }
    func handle(_ request: HTTPRequest) -> HTTPHandlerResult {
        .respond(HTTPResponse(status: 200, contentType: "application/json", text: body))
    }
    func payloadTooLarge(limit: Int) -> HTTPResponse { HTTPResponse(status: 413) }
}

/// Structures the server builds from client input stay within the depth the
/// request parser accepts, and every response stays within the 512 levels
/// Foundation's parser reads: no request can make the server recurse off its
/// stack, and every refusal is a 400 after which the server goes on serving.
@Suite struct DeepStructureLiveTests {
    /// The security probe's four requests: a `set` filter whose pointer had
    /// 50,000 empty segments built a 50,000-deep payload at `take`, and writing
    /// it overflowed the stack (SIGSEGV, all state lost).
    @Test func longPointerFilterIsRefusedAndServerLives() throws {
        let s = try AppTester()
        #expect(try s.call("PUT", "/v1/pipelines/p", "{}").status == 201)
        let field = String(repeating: "/", count: 50_000)
        let filter = try s.call("PUT", "/v1/pipelines/p/filters/f", #"{"action":"set","field":"\#(field)","value":1}"#)
        #expect(filter.status == 400)
        #expect(filter.code == "bad_request")
        #expect(filter.problemField == "field")
        #expect(filter.detail.contains("max_pointer_segments"))
        #expect(try s.call("POST", "/v1/pipelines/p/items", #"{"payload":{}}"#).status == 201)
        let take = try s.call("POST", "/v1/pipelines/p/take")
        #expect(take.status == 200)
        #expect(try s.call("GET", "/healthz").status == 200)
    }

    @Test func pointerSegmentsAreBounded() throws {
        let s = try AppTester()
        #expect(try s.call("PUT", "/v1/pipelines/p", "{}").status == 201)
        let at32 = try s.call(
            "PUT", "/v1/pipelines/p/filters/f", #"{"action":"set","field":"\#(pointer(32))","value":1}"#)
        #expect(at32.status == 201)
        let cases: [(String, String)] = [
            (#"{"action":"set","field":"\#(pointer(33))","value":1}"#, "field"),
            (#"{"action":"remove","field":"\#(pointer(33))"}"#, "field"),
            (#"{"when":{"field":"\#(pointer(33))","exists":true},"action":"drop"}"#, "when.field"),
        ]
        for (body, field) in cases {
            let r = try s.call("PUT", "/v1/pipelines/p/filters/g", body)
            #expect(r.status == 400)
            #expect(r.problemField == field)
            #expect(r.detail.contains("33 segments"))
        }
        // The same bound in a pipeline's config, and a smaller one when configured.
        let put = try s.call(
            "PUT", "/v1/pipelines/q", #"{"filters":{"f":{"action":"remove","field":"\#(pointer(33))"}}}"#)
        #expect(put.status == 400)
        #expect(put.problemField == "filters.f.field")
        let small = try AppTester(#"{"max_pointer_segments": 4}"#)
        #expect(try small.call("PUT", "/v1/pipelines/p", "{}").status == 201)
        #expect(
            try small.call("PUT", "/v1/pipelines/p/filters/f", #"{"action":"remove","field":"\#(pointer(4))"}"#).status
                == 201)
        #expect(
            try small.call("PUT", "/v1/pipelines/p/filters/f", #"{"action":"remove","field":"\#(pointer(5))"}"#).status
                == 400)
        #expect(try s.call("GET", "/healthz").status == 200)
    }

    /// A `set` builds `segments + depth(value)` levels: refused at creation
    /// when that passes `max_json_depth`, so no payload handed out is deeper.
    @Test func setCannotBuildAPayloadDeeperThanTheLimit() throws {
        let s = try AppTester()
        #expect(try s.call("PUT", "/v1/pipelines/p", #"{"max_in_flight": 10}"#).status == 201)
        let over = try s.call(
            "PUT", "/v1/pipelines/p/filters/f", #"{"action":"set","field":"\#(pointer(32))","value":\#(nested(469))}"#)
        #expect(over.status == 400)
        #expect(over.problemField == "value")
        #expect(over.detail.contains("501 levels"))
        let at = try s.call(
            "PUT", "/v1/pipelines/p/filters/f", #"{"action":"set","field":"\#(pointer(32))","value":\#(nested(468))}"#)
        #expect(at.status == 201)
        #expect(try s.call("POST", "/v1/pipelines/p/items", #"{"payload":{}}"#).status == 201)
        // The deepest payload a set can build, inside the take's envelope, still parses.
        let take = try s.call("POST", "/v1/pipelines/p/take")
        #expect(take.status == 200)
        #expect(take.parses)
        let payload = try JSONValue.parse(take.body, maxDepth: 512)["items"]
        guard case .array(let items)? = payload, let first = items.first?["payload"] else {
            Issue.record("no payload in \(take.text.prefix(200))")
            return
        }
        #expect(first.depth == 500)
        // A pushed payload as deep as a body allows, set deeper by a filter: capped the same way.
        let deepPayload = try s.call("POST", "/v1/pipelines/p/items", #"{"payload":\#(nestedObject(499))}"#)
        #expect(deepPayload.status == 201)
        let again = try s.call("POST", "/v1/pipelines/p/take")
        #expect(again.status == 200)
        #expect(again.parses)
        #expect(try s.call("GET", "/v1/pipelines/p").parses)
        #expect(try s.call("GET", "/healthz").status == 200)
    }

    /// Every route that stores a client's JSON value: 400 beyond
    /// `max_json_depth` (ours, 500, and Foundation's, 512), accepted at it, and
    /// every answer that shows the value parses again.
    @Test func deepValuesAreRefusedOrKeptEverywhere() throws {
        let s = try AppTester(
            #"""
            {"queues": {"q": {}}, "windows": {"w": {}}, "pools": {"gpus": {"elements": ["g1"]}},
             "pipelines": {"p": {}}, "machines": {"m": {"definition": "player"}}}
            """#)
        // (method, path, body wrapping a value of the given depth, GET that shows it)
        let routes: [(String, String, (String) -> String, String)] = [
            ("POST", "/v1/queues/q/visitors", { #"{"payload":\#($0)}"# }, "/v1/queues/q"),
            ("POST", "/v1/windows/w/show", { #"{"payload":\#($0)}"# }, "/v1/windows/w"),
            ("PUT", "/v1/pools/gpus/elements/g2", { #"{"data":\#($0)}"# }, "/v1/pools/gpus"),
            ("POST", "/v1/pipelines/p/items", { #"{"payload":\#($0)}"# }, "/v1/pipelines/p"),
            ("POST", "/v1/pipelines/p/items/batch", { #"{"items":[{"payload":\#($0)}]}"# }, "/v1/pipelines/p"),
            ("POST", "/v1/machines/m/events/prepare", { #"{"data":\#($0)}"# }, "/v1/machines/m"),
            (
                "PUT", "/v1/pipelines/p/filters/f", { #"{"when":{"field":"/a","equals":\#($0)},"action":"drop"}"# },
                "/v1/pipelines/p"
            ),
            ("PUT", "/v1/pipelines/p/filters/g", { #"{"action":"set","field":"","value":\#($0)}"# }, "/v1/pipelines/p"),
        ]
        for (method, path, body, show) in routes {
            let wrapper = body("1").filter { $0 == "{" || $0 == "[" }.count
            for tooDeep in [501 - wrapper, 513, 30_000] {
                let r = try s.call(method, path, body(nested(tooDeep)))
                #expect(r.status == 400, "\(path) at \(tooDeep)")
                #expect(r.code == "bad_request")
                if tooDeep + wrapper <= 512 { #expect(r.detail.contains("max_json_depth"), "\(r.detail)") }
            }
            let ok = try s.call(method, path, body(nested(500 - wrapper)))
            #expect((200..<300).contains(ok.status), "\(path): \(ok.status) \(ok.text.prefix(300))")
            #expect(ok.parses, "\(path)")
            let state = try s.call("GET", show)
            #expect(state.status == 200)
            #expect(state.parses, "\(show)")
            #expect(try s.call("GET", "/healthz").status == 200)
        }
        let take = try s.call("POST", "/v1/pipelines/p/take?max=10")
        #expect(take.parses)
        let fetch = try s.call("POST", "/v1/pools/gpus/fetch", #"{"id":"g2-lease"}"#)
        #expect(fetch.parses)
    }

    /// The event stream wraps a stored value in two more levels; it parses too.
    @Test func eventsOfDeepValuesParse() throws {
        let s = try LiveServer(#"{"pipelines": {"p": {}}, "machines": {"m": {"definition": "player"}}}"#)
        let events = try SSEReader(port: s.port)
        #expect(events.head.status == 200)
        #expect(try s.call("POST", "/v1/pipelines/p/items", #"{"payload":\#(nested(499))}"#).status == 201)
        #expect(try s.call("POST", "/v1/pipelines/p/take").status == 200)
        #expect(try s.call("POST", "/v1/machines/m/events/prepare", #"{"data":\#(nested(499))}"#).status == 200)
        for expected in ["pushed", "delivered", "transition"] {
            let event = try #require(try events.next())
            #expect(event.type == expected)
            #expect(event.data["data"] != nil, "\(expected) did not parse")
        }
    }

    @Test func deepSourceLinesAreSkippedAndCounted() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("usher-depth-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let lines = [nested(501), nested(500), nested(600), #"{"n":1}"#]
        try lines.joined(separator: "\n").write(
            to: dir.appendingPathComponent("deep.ndjson"), atomically: true, encoding: .utf8)
        let s = try AppTester(
            #"""
            {"data_dir": "\#(dir.path)", "pipelines": {"p": {"capacity": 10, "max_in_flight": 10,
              "source": {"kind": "file", "path": "deep.ndjson", "low_water": 10}}}}
            """#)
        var source: [String: Any] = [:]
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            source = try await s.callAsync("GET", "/v1/pipelines/p").json["source"] as? [String: Any] ?? [:]
            if source["exhausted"] as? Bool == true { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(source["pulled_total"] as? Int == 2)
        #expect(source["errors_total"] as? Int == 2)
        #expect((source["last_error"] as? String)?.contains("line 3") == true)
        let first = try await s.callAsync("GET", "/v1/pipelines/p")
        #expect(first.parses)
        let take = try await s.callAsync("POST", "/v1/pipelines/p/take?max=10")
        #expect(take.parses)
        #expect((take.json["items"] as? [Any])?.count == 2)
    }

    @Test func aDeepHTTPSourceBodyIsAnError() async throws {
        var config = HTTPServer.Configuration()
        config.port = 0
        let upstream = HTTPServer(configuration: config, handler: FixedSource(nested(501)))
        try upstream.start()
        defer { upstream.stop() }
        let s = try LiveServer()
        let put = try await s.callAsync(
            "PUT", "/v1/pipelines/p",
            #"{"source": {"kind": "http", "url": "http://127.0.0.1:\#(upstream.port)/next"}}"#)
        #expect(put.status == 201)
        var source: [String: Any] = [:]
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            source = try await s.callAsync("GET", "/v1/pipelines/p").json["source"] as? [String: Any] ?? [:]
            if (source["errors_total"] as? Int ?? 0) > 0 { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect((source["last_error"] as? String)?.contains("max_json_depth") == true)
        #expect(source["pulled_total"] as? Int == 0)
        #expect(try await s.callAsync("GET", "/healthz").status == 200)
    }

    @Test func limitsAreConfigurable() throws {
        let s = try AppTester(#"{"max_json_depth": 8, "pipelines": {"p": {}}}"#)
        #expect(try s.call("POST", "/v1/pipelines/p/items", #"{"payload":\#(nested(7))}"#).status == 201)
        let deep = try s.call("POST", "/v1/pipelines/p/items", #"{"payload":\#(nested(8))}"#)
        #expect(deep.status == 400)
        #expect(deep.detail.contains("8 levels"))
        let set = try s.call(
            "PUT", "/v1/pipelines/p/filters/f", #"{"action":"set","field":"/a/b","value":\#(nested(7))}"#)
        #expect(set.status == 400)
        #expect(set.problemField == "value")
        #expect(
            try s.call("PUT", "/v1/pipelines/p/filters/f", #"{"action":"set","field":"/a/b","value":\#(nested(6))}"#)
                .status == 201)

        func error(_ json: String) -> FieldError? {
            do {
                _ = try UsherConfig.parse(try JSONValue.parse(json))
                return nil
            } catch { return error as? FieldError }
        }
        #expect(error(#"{"max_json_depth": 0}"#)?.field == "max_json_depth")
        #expect(error(#"{"max_json_depth": 501}"#)?.field == "max_json_depth")
        #expect(error(#"{"max_pointer_segments": 0}"#)?.field == "max_pointer_segments")
        #expect(error(#"{"max_pointer_segments": 129}"#)?.field == "max_pointer_segments")
        #expect(error(#"{"max_json_depth": 500, "max_pointer_segments": 128}"#) == nil)
        // A declared pipeline's filter is checked against the configured limits.
        let declared =
            #"{"max_pointer_segments": 2, "pipelines": {"p": {"filters": {"f": {"action": "remove", "field": "/a/b/c"}}}}}"#
        var startupError = ""
        do {
            _ = try UsherApp(
                config: try UsherConfig.parse(try JSONValue.parse(declared)), logger: Logger(level: .error))
        } catch {
            startupError = "\(error)"
        }
        #expect(startupError.contains("pipelines.p.filters.f.field"), "\(startupError)")
    }

}
