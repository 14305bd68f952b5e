import Testing

@testable import UsherCore

/// Config, patch, source config and push request parsing.
@Suite struct PipelineConfigTests {
    func parse(_ text: String, allowRemote: Bool = false) throws -> PipelineConfig {
        var r = try FieldReader(try JSONValue.parse(text))
        let c = try PipelineConfig.parse(&r, allowRemoteSources: allowRemote)
        try r.finish()
        return c
    }

    func error(_ text: String, allowRemote: Bool = false) -> FieldError? {
        do {
            _ = try parse(text, allowRemote: allowRemote)
            return nil
        } catch let e as FieldError {
            return e
        } catch {
            return FieldError(field: "?", message: "\(error)")
        }
    }

    @Test func anEmptyConfigTakesTheDefaults() throws {
        let c = try parse("{}")
        #expect(c == PipelineConfig())
        #expect(c.capacity == 1000 && c.maxInFlight == 1 && c.ackSeconds == 30 && c.maxDeliveries == 5)
    }

    @Test func aFullConfigRoundTrips() throws {
        let text = #"""
            {"capacity": 10, "max_in_flight": 2, "ack_seconds": 1.5, "max_deliveries": 3,
             "filters": {"hb": {"priority": 10, "when": {"field": "/type", "equals": "heartbeat"}, "action": "drop"}},
             "source": {"kind": "file", "path": "gifts.ndjson", "low_water": 4}}
            """#
        let c = try parse(text)
        #expect(c.capacity == 10 && c.maxInFlight == 2 && c.ackSeconds == 1.5 && c.maxDeliveries == 3)
        #expect(c.filters["hb"]?.action == .drop)
        #expect(c.source == PipelineSourceConfig(kind: .file(path: "gifts.ndjson"), lowWater: 4))
    }

    @Test func badConfigsNameTheField() {
        let cases: [(String, String)] = [
            (#"{"capactiy": 5}"#, "capactiy"),
            (#"{"capacity": 0}"#, "capacity"),
            (#"{"max_in_flight": "2"}"#, "max_in_flight"),
            (#"{"ack_seconds": -1}"#, "ack_seconds"),
            (#"{"max_deliveries": 0}"#, "max_deliveries"),
            (#"{"filters": {"bad name": {"action": "drop"}}}"#, "filters.bad name"),
            (#"{"filters": {"f": {"action": "drop", "typo": 1}}}"#, "filters.f.typo"),
            (#"{"filters": {"f": {"action": "set", "field": "x", "value": 1}}}"#, "filters.f.field"),
            (#"{"source": {"kind": "ftp"}}"#, "source.kind"),
            (#"{"source": {"kind": "file"}}"#, "source.path"),
            (#"{"source": {"kind": "file", "path": "a", "lowwater": 1}}"#, "source.lowwater"),
        ]
        for (text, field) in cases {
            #expect(error(text)?.field == field, "\(text)")
        }
    }

    @Test func filePathsMayNotLeaveTheDataDir() {
        for path in ["../x", "/etc/passwd", "a/../../b", "..", "", "dir/"] {
            let e = error(#"{"source": {"kind": "file", "path": "\#(path)"}}"#)
            #expect(e?.field == "source.path", "\(path)")
        }
        #expect(error(#"{"source": {"kind": "file", "path": "sub/./gifts..ndjson"}}"#) == nil)
    }

    @Test func httpSourcesAreLoopbackOnlyUnlessAllowed() {
        for url in ["http://127.0.0.1:9000/next", "http://127.9.8.7/x", "http://localhost/next", "http://[::1]:80/n"] {
            #expect(error(#"{"source": {"kind": "http", "url": "\#(url)"}}"#) == nil, "\(url)")
        }
        for url in [
            "http://10.0.0.1/x", "http://example.com/next", "https://127.0.0.1/x", "ftp://127.0.0.1/",
            "http://127.0.0.1@evil.example/", "127.0.0.1:9000", "http://127.1/x", "http://1270.0.0.1/x",
        ] {
            #expect(error(#"{"source": {"kind": "http", "url": "\#(url)"}}"#)?.field == "source.url", "\(url)")
        }
        #expect(error(#"{"source": {"kind": "http", "url": "http://example.com/next"}}"#, allowRemote: true) == nil)
        #expect(
            error(#"{"source": {"kind": "http", "url": "http://127.0.0.1/", "path": "x"}}"#)?.field == "source.path")
    }

    @Test func aPatchReadsOnlyTheMutableFields() throws {
        var r = try FieldReader(try JSONValue.parse(#"{"capacity": 5, "ack_seconds": 0}"#))
        let p = try PipelinePatch.parse(&r)
        try r.finish()
        #expect(p == PipelinePatch(capacity: 5, ackSeconds: 0))
        let c = p.applied(to: PipelineConfig())
        #expect(c.capacity == 5 && c.ackSeconds == 0 && c.maxInFlight == 1)

        var bad = try FieldReader(try JSONValue.parse(#"{"filters": {}}"#))
        _ = try PipelinePatch.parse(&bad)
        #expect(throws: FieldError(field: "filters", message: "unknown field")) { try bad.finish() }
    }

    @Test func pushRequestsAndBatches() throws {
        var r = try FieldReader(
            try JSONValue.parse(#"{"id": "a1", "payload": null, "priority": 3, "delay_seconds": 0.5}"#))
        #expect(
            try PipelinePushRequest.parse(&r)
                == PipelinePushRequest(id: "a1", payload: .null, priority: 3, delaySeconds: 0.5))

        var missing = try FieldReader(try JSONValue.parse(#"{"id": "a1"}"#))
        #expect(throws: FieldError.self) { try PipelinePushRequest.parse(&missing) }

        var batch = try FieldReader(try JSONValue.parse(#"{"items": [{"payload": 1}, {"payload": 2, "prio": 1}]}"#))
        #expect(throws: FieldError(field: "items[1].prio", message: "unknown field")) {
            try PipelinePushRequest.parseBatch(&batch)
        }
    }
}
