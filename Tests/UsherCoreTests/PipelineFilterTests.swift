import Testing

@testable import UsherCore

/// JSON Pointer and filters: parsing, running order, actions, stored payload unchanged.
@Suite struct PipelineFilterTests {
    let t0 = Timestamp(micros: 1_767_225_600_000_000)

    func json(_ text: String) throws -> JSONValue { try JSONValue.parse(text) }

    func filter(_ text: String) throws -> PipelineFilter {
        var r = try FieldReader(try json(text))
        let f = try PipelineFilter.parse(&r)
        try r.finish()
        return f
    }

    func filterError(_ text: String) throws -> FieldError? {
        do {
            _ = try filter(text)
            return nil
        } catch let e as FieldError {
            return e
        }
    }

    // MARK: - JSON Pointer

    @Test func pointerEscapesTildeAndSlash() throws {
        let doc = try json(#"{"a/b": {"m~n": 1}, "": {"x": [10, 20]}}"#)
        let p = try JSONPointer(parsing: "/a~1b/m~0n")
        #expect(p.tokens == ["a/b", "m~n"])
        #expect(p.description == "/a~1b/m~0n")
        #expect(p.value(in: doc) == .int(1))
        #expect(try JSONPointer(parsing: "//x/1").value(in: doc) == .int(20))
        #expect(try JSONPointer(parsing: "").value(in: doc) == doc)
        // "~01" is "~1" literally, not "/".
        #expect(try JSONPointer(parsing: "/~01").tokens == ["~1"])
    }

    @Test func badPointersAreRefused() {
        #expect(throws: JSONPointerSyntaxError.self) { try JSONPointer(parsing: "type") }
        #expect(throws: JSONPointerSyntaxError.self) { try JSONPointer(parsing: "/a~2") }
        #expect(throws: JSONPointerSyntaxError.self) { try JSONPointer(parsing: "/a~") }
    }

    @Test func pointerGetOnArrays() throws {
        let doc = try json(#"{"a": [1, 2, 3]}"#)
        #expect(try JSONPointer(parsing: "/a/2").value(in: doc) == .int(3))
        #expect(try JSONPointer(parsing: "/a/3").value(in: doc) == nil)
        #expect(try JSONPointer(parsing: "/a/01").value(in: doc) == nil)
        #expect(try JSONPointer(parsing: "/a/-").value(in: doc) == nil)
        #expect(try JSONPointer(parsing: "/a/0/x").value(in: doc) == nil)
    }

    @Test func pointerSetCreatesParentsAndAppends() throws {
        var doc = try json(#"{"a": [1, 2]}"#)
        #expect(try JSONPointer(parsing: "/x/y/z").set(.bool(true), in: &doc))
        #expect(try JSONPointer(parsing: "/a/-").set(.int(3), in: &doc))
        #expect(try JSONPointer(parsing: "/a/0").set(.int(0), in: &doc))
        #expect(try JSONPointer(parsing: "/a/3").set(.int(4), in: &doc))
        #expect(doc == (try json(#"{"a": [0, 2, 3, 4], "x": {"y": {"z": true}}}"#)))
        // Through a scalar, or past the end of an array: unchanged.
        let before = doc
        #expect(try !JSONPointer(parsing: "/x/y/z/w").set(.int(1), in: &doc))
        #expect(try !JSONPointer(parsing: "/a/9").set(.int(1), in: &doc))
        #expect(doc == before)
    }

    @Test func pointerRemove() throws {
        var doc = try json(#"{"a": [1, 2, 3], "b": {"c": 1, "d": 2}}"#)
        #expect(try JSONPointer(parsing: "/a/1").remove(from: &doc))
        #expect(try JSONPointer(parsing: "/b/c").remove(from: &doc))
        #expect(try !JSONPointer(parsing: "/b/zz").remove(from: &doc))
        #expect(doc == (try json(#"{"a": [1, 3], "b": {"d": 2}}"#)))
    }

    // MARK: - Parsing

    @Test func everyConditionAndActionParses() throws {
        let texts = [
            #"{"priority": 10, "when": {"field": "/type", "equals": "heartbeat"}, "action": "drop"}"#,
            #"{"priority": 5, "action": "set", "field": "/seen_by", "value": "usher"}"#,
            #"{"priority": 1, "when": {"field": "/debug", "exists": true}, "action": "remove", "field": "/debug"}"#,
            #"{"priority": 0, "when": {"field": "/n", "in": [1, 2]}, "action": "drop"}"#,
            #"{"priority": 0, "when": {"field": "/n", "not_equals": 1}, "action": "drop"}"#,
        ]
        for text in texts {
            #expect(throws: Never.self) { try filter(text) }
        }
        #expect(try filter(#"{"action": "drop"}"#) == PipelineFilter(priority: 0, action: .drop))
    }

    @Test func filterParseErrorsNameTheProblem() throws {
        let bad: [(String, String)] = [
            (#"{"action": "set", "field": "seen", "value": 1}"#, "field"),
            (#"{"action": "set", "field": "/a~x", "value": 1}"#, "field"),
            (#"{"action": "set", "field": "/a"}"#, "value"),
            (#"{"action": "set", "field": "/a", "value": null}"#, "value"),
            (#"{"action": "remove"}"#, "field"),
            (#"{"action": "remove", "field": ""}"#, "field"),
            (#"{"action": "drop", "field": "/a"}"#, "field"),
            (#"{"action": "explode"}"#, "action"),
            (#"{"priority": 1}"#, "action"),
            (#"{"priority": 1.5, "action": "drop"}"#, "priority"),
            (#"{"when": {"field": "/a", "equals": 1, "exists": true}, "action": "drop"}"#, "when"),
            (#"{"when": {"field": "/a"}, "action": "drop"}"#, "when"),
            (#"{"when": {"equals": 1}, "action": "drop"}"#, "when.field"),
            (#"{"when": {"field": "a", "equals": 1}, "action": "drop"}"#, "when.field"),
            (#"{"when": {"field": "/a", "exists": "yes"}, "action": "drop"}"#, "when.exists"),
            (#"{"when": {"field": "/a", "in": 3}, "action": "drop"}"#, "when.in"),
            (#"{"when": {"field": "/a", "equal": 3}, "action": "drop"}"#, "when"),
        ]
        for (text, field) in bad {
            let error = try #require(try filterError(text), "accepted: \(text)")
            #expect(error.field == field, "\(text): \(error.description)")
        }
        // A typo in the filter itself is caught by the caller's finish().
        #expect(try filterError(#"{"action": "drop", "prority": 3}"#)?.field == "prority")
    }

    // MARK: - Running

    @Test func filtersRunInDescendingPriorityThenName() throws {
        var set = PipelineFilters()
        set.put(name: "b-second", try filter(#"{"priority": 5, "action": "set", "field": "/trace/-", "value": "b"}"#))
        set.put(name: "a-first", try filter(#"{"priority": 5, "action": "set", "field": "/trace/-", "value": "a"}"#))
        set.put(name: "top", try filter(#"{"priority": 9, "action": "set", "field": "/trace", "value": []}"#))
        set.put(name: "low", try filter(#"{"priority": -1, "action": "set", "field": "/trace/-", "value": "low"}"#))
        #expect(set.ordered.map(\.name) == ["top", "a-first", "b-second", "low"])
        #expect(set.apply(to: .object([])) == (try json(#"{"trace": ["a", "b", "low"]}"#)))
    }

    @Test func conditions() throws {
        let payload = try json(#"{"type": "gift", "n": 2, "nil": null}"#)
        func holds(_ when: String) throws -> Bool {
            let f = try filter(#"{"when": "# + when + #", "action": "drop"}"#)
            return f.when!.holds(for: payload)
        }
        #expect(try holds(#"{"field": "/type", "equals": "gift"}"#))
        #expect(try !holds(#"{"field": "/type", "equals": "heartbeat"}"#))
        #expect(try holds(#"{"field": "/n", "equals": 2.0}"#))
        #expect(try holds(#"{"field": "/missing", "not_equals": "x"}"#))
        #expect(try !holds(#"{"field": "/type", "not_equals": "gift"}"#))
        #expect(try holds(#"{"field": "/n", "in": [1, 2, 3]}"#))
        #expect(try !holds(#"{"field": "/missing", "in": [1]}"#))
        #expect(try holds(#"{"field": "/nil", "in": [null]}"#))
        #expect(try holds(#"{"field": "/nil", "exists": true}"#))
        #expect(try holds(#"{"field": "/missing", "exists": false}"#))
        #expect(try !holds(#"{"field": "/type", "exists": false}"#))
    }

    @Test func theEngineAppliesFiltersAtHandOutAndKeepsTheStoredPayload() throws {
        var config = PipelineConfig(maxInFlight: 10)
        config.filters = [
            "drop-heartbeats": try filter(
                #"{"priority": 10, "when": {"field": "/type", "equals": "heartbeat"}, "action": "drop"}"#),
            "stamp": try filter(#"{"priority": 5, "action": "set", "field": "/meta/seen_by", "value": "usher"}"#),
            "strip": try filter(
                #"{"priority": 1, "when": {"field": "/debug", "exists": true}, "action": "remove", "field": "/debug"}"#),
        ]
        var e = PipelineEngine(config: config, createdAt: t0, seed: 1)
        let gift = try json(#"{"type": "gift", "debug": true}"#)
        _ = try e.push(PipelinePushRequest(id: "g", payload: gift), now: t0)
        _ = try e.push(PipelinePushRequest(id: "h", payload: try json(#"{"type": "heartbeat"}"#)), now: t0)
        let out = try e.take(max: 10, now: t0)
        #expect(out.map(\.id) == ["g"])
        #expect(out[0].payload == (try json(#"{"type": "gift", "meta": {"seen_by": "usher"}}"#)))
        #expect(e.item("g")?.payload == gift)
        #expect(e.item("h") == nil)
        #expect(e.counts.filteredTotal == 1 && e.counts.deliveredTotal == 1)
        // A filter added later applies at the next hand-out, on the stored payload.
        try e.release("g", now: t0)
        #expect(
            try e.putFilter(
                name: "drop-gifts", try filter(#"{"when": {"field": "/type", "equals": "gift"}, "action": "drop"}"#)))
        #expect(try e.take(max: 10, now: t0).isEmpty)
        #expect(e.counts.filteredTotal == 2 && e.count == 0)
    }

    @Test func filterNamesAndCountAreBounded() throws {
        var e = PipelineEngine(config: PipelineConfig(), createdAt: t0)
        let f = PipelineFilter(action: .drop)
        #expect(throws: PipelineError.self) { try e.putFilter(name: "-bad", f) }
        for i in 0..<PipelineFilter.Limits.count { _ = try e.putFilter(name: "f\(i)", f) }
        #expect(throws: PipelineError.self) { try e.putFilter(name: "one-more", f) }
        #expect(try !e.putFilter(name: "f0", f))
        try e.removeFilter(name: "f0")
        #expect(throws: PipelineError.notFound("f0")) { try e.removeFilter(name: "f0") }
    }
}
