import Foundation
import Testing

@testable import UsherCore

/// The bounds every recursion over client-shaped JSON relies on: parse depth,
/// pointer segments, the depth a filter's `set` can build, source items.
@Suite struct JSONDepthTests {
    /// `depth` nested arrays around `1`.
    func nested(_ depth: Int) -> String {
        String(repeating: "[", count: depth) + "1" + String(repeating: "]", count: depth)
    }

    func filter(_ text: String, limits: JSONLimits = JSONLimits()) throws -> PipelineFilter {
        var r = try FieldReader(try JSONValue.parse(text))
        let f = try PipelineFilter.parse(&r, limits: limits)
        try r.finish()
        return f
    }

    func filterError(_ text: String, limits: JSONLimits = JSONLimits()) throws -> FieldError? {
        do {
            _ = try filter(text, limits: limits)
            return nil
        } catch let e as FieldError {
            return e
        }
    }

    // MARK: - Depth

    @Test func depthCountsContainers() throws {
        #expect(JSONValue.int(1).depth == 0)
        #expect(JSONValue.array([]).depth == 1)
        #expect(JSONValue.object([]).depth == 1)
        #expect(try JSONValue.parse(#"{"a": [1, {"b": {}}], "c": 2}"#).depth == 4)
        #expect(try JSONValue.parse(nested(500)).depth == 500)
    }

    @Test func parseRefusesDeeperThanMaxDepth() throws {
        #expect(try JSONValue.parse(nested(500)).depth == 500)
        #expect(JSONLimits().maxDepth == 500)
        #expect(JSONLimits.maxDepthRange.upperBound == 500)
        do {
            _ = try JSONValue.parse(nested(501))
            Issue.record("501 levels parsed")
        } catch {
            #expect(error.message.contains("deeper than 500 levels"))
            #expect(error.message.contains("max_json_depth"))
        }
        // Objects count the same; a smaller limit applies to both.
        #expect(throws: JSONSyntaxError.self) { try JSONValue.parse(#"{"a": {"b": [1]}}"#, maxDepth: 2) }
        #expect(try JSONValue.parse(#"{"a": {"b": 1}}"#, maxDepth: 2).depth == 2)
        #expect(try JSONValue.parse("1", maxDepth: 0) == .int(1))
        #expect(throws: JSONSyntaxError.self) { try JSONValue.parse("[]", maxDepth: 0) }
        // Foundation's own limit (512) and far beyond: an error, not a crash.
        #expect(throws: JSONSyntaxError.self) { try JSONValue.parse(nested(513), maxDepth: 10_000) }
        #expect(throws: JSONSyntaxError.self) { try JSONValue.parse(nested(1_000_000)) }
    }

    /// The deepest value the server holds, wrapped as a response wraps it,
    /// goes through every recursive operation (conversion, comparison,
    /// hashing, sizing, release, a filter) on a 1 MiB stack: an eighth of
    /// the 8 MiB glibc gives each thread by default, even in a debug build.
    @Test func theDeepestValueFitsASmallStack() throws {
        let text = String(repeating: #"{"a":"#, count: 12) + nested(500) + String(repeating: "}", count: 12)
        let done = DispatchSemaphore(value: 0)
        let finished = Flag()
        let thread = Thread {
            defer { done.signal() }
            guard let value = try? JSONValue.parse(text, maxDepth: 512) else { return }
            #expect(value.depth == 512)
            var copy = value
            _ = copy == value
            _ = copy.hashValue
            _ = value.encodedSizeBound
            copy = .null
            _ = value.depth
            let set = PipelineFilter(action: .set(field: JSONPointer(tokens: ["a"]), value: value))
            _ = set.apply(to: value)
            finished.set()
        }
        thread.stackSize = 1 << 20
        thread.start()
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(finished.isSet)
    }

    // MARK: - JSON Pointer segments

    @Test func pointersHaveAtMostMaxSegments() throws {
        #expect(JSONLimits().maxPointerSegments == 32)
        let at = String(repeating: "/a", count: 32)
        #expect(try JSONPointer(parsing: at).tokens.count == 32)
        do {
            _ = try JSONPointer(parsing: at + "/a")
            Issue.record("33 segments parsed")
        } catch {
            #expect(error.message.contains("33 segments"))
            #expect(error.message.contains("max_pointer_segments"))
        }
        // Empty segments count: the probe's 50,000 slashes are refused before any is split off.
        #expect(throws: JSONPointerSyntaxError.self) { try JSONPointer(parsing: String(repeating: "/", count: 50_000)) }
        #expect(try JSONPointer(parsing: "//", maxSegments: 2).tokens == ["", ""])
        #expect(throws: JSONPointerSyntaxError.self) { try JSONPointer(parsing: "/a/b/c", maxSegments: 2) }
        // `~1` is a `/` inside one segment, not a separator.
        #expect(try JSONPointer(parsing: "/a~1b~1c", maxSegments: 1).tokens == ["a/b/c"])
        #expect(try JSONPointer(parsing: "").tokens.isEmpty)
    }

    @Test func filtersRefuseLongPointersNamingTheField() throws {
        let long = String(repeating: "/x", count: 33)
        #expect(try filterError(#"{"action": "set", "field": "\#(long)", "value": 1}"#)?.field == "field")
        #expect(try filterError(#"{"action": "remove", "field": "\#(long)"}"#)?.field == "field")
        #expect(
            try filterError(#"{"when": {"field": "\#(long)", "exists": true}, "action": "drop"}"#)?.field
                == "when.field")
        let small = JSONLimits(maxPointerSegments: 2)
        #expect(try filterError(#"{"action": "remove", "field": "/a/b"}"#, limits: small) == nil)
        #expect(try filterError(#"{"action": "remove", "field": "/a/b/c"}"#, limits: small)?.field == "field")
    }

    // MARK: - What `set` builds

    @Test func setMayNotBuildDeeperThanMaxDepth() throws {
        let field = String(repeating: "/a", count: 32)
        let over = try filterError(#"{"action": "set", "field": "\#(field)", "value": \#(nested(469))}"#)
        #expect(over?.field == "value")
        #expect(over?.message.contains("501 levels") == true)
        let at = try filter(#"{"action": "set", "field": "\#(field)", "value": \#(nested(468))}"#)
        // The built payload is exactly as deep as promised, whatever the payload was.
        for payload in [
            JSONValue.object([]), try JSONValue.parse(#"{"a": {"a": 5}}"#), try JSONValue.parse(nested(500)),
        ] {
            let out = try #require(at.apply(to: payload))
            #expect(out.depth <= 500)
        }
        #expect(try #require(at.apply(to: .object([]))).depth == 500)
        // The whole payload replaced: the value alone counts.
        #expect(try filterError(#"{"action": "set", "field": "", "value": \#(nested(499))}"#) == nil)
        let tight = JSONLimits(maxDepth: 3)
        #expect(try filterError(#"{"action": "set", "field": "/a", "value": [[1]]}"#, limits: tight) == nil)
        #expect(
            try filterError(#"{"action": "set", "field": "/a/b", "value": [[1]]}"#, limits: tight)?.field == "value")
        // A pipeline config's filters are checked the same way, named by their path.
        var r = try FieldReader(
            try JSONValue.parse(#"{"filters": {"f": {"action": "set", "field": "/a/b", "value": [[1]]}}}"#))
        do {
            _ = try PipelineConfig.parse(&r, limits: tight)
            Issue.record("config parsed")
        } catch {
            #expect(error.field == "filters.f.value")
        }
    }

    // MARK: - Sources

    @Test func fileSourceSkipsLinesDeeperThanMaxDepth() async throws {
        let dir = try OneAtATime.PipelineSourceTests.makeDataDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        try OneAtATime.PipelineSourceTests.write(
            [nested(4), nested(3), nested(600), "7"].joined(separator: "\n"), to: "d.ndjson", in: dir)
        let source = FileSource(path: "d.ndjson", dataDir: dir.path, maxDepth: 3)
        var items: [JSONValue] = []
        var errors: [String] = []
        while true {
            do {
                switch try await source.next() {
                case .item(let v): items.append(v)
                case .nothing: continue
                case .exhausted:
                    #expect(items == [try JSONValue.parse(nested(3)), .int(7)])
                    #expect(errors.count == 2)
                    #expect(errors.first?.contains("line 1: JSON nested deeper than 3 levels") == true)
                    #expect(errors.last?.contains("line 3: malformed JSON") == true)
                    return
                }
            } catch let e as SourceRecordError {
                errors.append(e.message)
            }
        }
    }
}
