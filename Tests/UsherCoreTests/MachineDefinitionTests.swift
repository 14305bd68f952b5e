import Testing

@testable import UsherCore

/// Parsing, normalization and validation of machine definitions.
@Suite struct MachineDefinitionTests {
    static let playerJSON = """
        {"initial": "NotReady",
         "transitions": [
           {"event": "prepare",  "from": "NotReady", "to": "Ready"},
           {"event": "start",    "from": "Ready",    "to": "Running"},
           {"event": "teardown", "from": "Running",  "to": "NotReady"}],
         "timeouts": []}
        """

    static func parse(_ text: String, path: String = "") throws -> MachineDefinition {
        try MachineDefinition.parse(JSONValue.parse(text), path: path)
    }

    @Test func theSpecsPlayerParsesToTheBuiltIn() throws {
        let parsed = try Self.parse(Self.playerJSON)
        #expect(parsed == .player)
        #expect(parsed.states == ["NotReady", "Ready", "Running"])
        #expect(parsed.events == ["prepare", "start", "teardown"])
        #expect(parsed.allowedEvents(in: "Ready") == ["start"])
        #expect(parsed.allowedEvents(in: "Nowhere") == [])
        #expect(parsed.knows(event: "teardown"))
        #expect(!parsed.knows(event: "rewind"))
        #expect(parsed.target(of: "start", from: "Ready") == "Running")
        #expect(parsed.target(of: "start", from: "Running") == nil)
    }

    @Test func statesDefaultToFirstMentionOrder() throws {
        let d = try Self.parse(
            """
            {"initial": "C",
             "transitions": [{"event": "x", "from": ["B", "C"], "to": "A"},
                             {"event": "y", "from": "A", "to": "D"}]}
            """)
        #expect(d.states == ["C", "B", "A", "D"])
        #expect(d.timeouts == [])
    }

    @Test func declaredStatesKeepTheirOrderAndMayIncludeUnusedOnes() throws {
        let d = try Self.parse(
            """
            {"initial": "A", "states": ["Z", "A", "B"],
             "transitions": [{"event": "go", "from": "A", "to": "B"}]}
            """)
        #expect(d.states == ["Z", "A", "B"])
        #expect(d.allowedEvents(in: "Z") == [])
    }

    @Test func singleFromAndListFromAreTheSameDefinition() throws {
        let single = try Self.parse(#"{"initial":"A","transitions":[{"event":"go","from":"A","to":"B"}]}"#)
        let list = try Self.parse(
            #"{"initial":"A","states":["A","B"],"transitions":[{"event":"go","from":["A"],"to":"B"}]}"#)
        #expect(single == list)
    }

    @Test func allowedEventsFollowDefinitionOrder() throws {
        let d = try Self.parse(
            """
            {"initial": "A",
             "transitions": [{"event": "zulu", "from": "A", "to": "B"},
                             {"event": "alpha", "from": ["B", "A"], "to": "A"},
                             {"event": "mike", "from": "A", "to": "A"}]}
            """)
        #expect(d.allowedEvents(in: "A") == ["zulu", "alpha", "mike"])
        #expect(d.allowedEvents(in: "B") == ["alpha"])
    }

    @Test func aMachineWithNoTransitionsHasOneState() throws {
        let d = try Self.parse(#"{"initial":"Only"}"#)
        #expect(d.states == ["Only"])
        #expect(d.transitions.isEmpty)
    }

    @Test func limitsAreAcceptedAtTheirEdges() throws {
        let d = try Self.parse(
            """
            {"initial": "A", "transitions": [{"event": "e", "from": "A", "to": "A"}],
             "timeouts": [{"state": "A", "after_seconds": 31536000, "event": "e"},
                          {"state": "A", "after_seconds": 0.01, "event": "e"}]}
            """)
        #expect(d.timeouts.map(\.afterSeconds) == [31_536_000, 0.01])
    }

    @Test func theSwiftInitialiserValidatesToo() {
        #expect(throws: FieldError(field: "transitions[0].from", message: "must name at least one state")) {
            try MachineDefinition(initial: "A", transitions: [.init(event: "e", from: [], to: "A")])
        }
        #expect(
            throws: FieldError(
                field: "transitions[0].from[1]", message: "must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
        ) {
            try MachineDefinition(initial: "A", transitions: [.init(event: "e", from: ["A", "b c"], to: "A")])
        }
    }

    @Test func errorsCarryThePathPrefix() {
        let text = """
            {"initial": "NotReady",
             "transitions": [{"event": "prepare", "from": "NotReady", "to": "Ready"},
                             {"event": "start", "from": 7, "to": "Running"}]}
            """
        #expect(
            throws: FieldError(
                field: "definitions.player.transitions[1].from",
                message: "must be a state name or a list of state names")
        ) {
            try Self.parse(text, path: "definitions.player")
        }
    }

    // MARK: - Every validation error

    struct Case: Sendable, CustomTestStringConvertible {
        let json: String
        let field: String
        let message: String
        init(_ json: String, _ field: String, _ message: String) {
            self.json = json
            self.field = field
            self.message = message
        }
        var testDescription: String { "\(field): \(message)" }
    }

    static let nameRule = "must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
    static let go = #"{"event":"go","from":"A","to":"B"}"#

    static let cases: [Case] = [
        Case(#"{}"#, "initial", "is required"),
        Case(#"[]"#, "", "the body must be a JSON object"),
        Case(#"{"initial":"A","bogus":1}"#, "bogus", "unknown field"),
        Case(#"{"initial":"-A"}"#, "initial", nameRule),
        Case(#"{"initial":5}"#, "initial", "must be a string"),
        Case(#"{"initial":"A","states":[]}"#, "states", "must list at least one state"),
        Case(#"{"initial":"A","states":"A"}"#, "states", "must be an array"),
        Case(#"{"initial":"X","states":["A"]}"#, "initial", "names state 'X', which is not in states"),
        Case(#"{"initial":"A","states":["A","A"]}"#, "states[1]", "lists state 'A' twice"),
        Case(#"{"initial":"A","states":["A",3]}"#, "states[1]", "must be a string"),
        Case(#"{"initial":"A","states":["A","no spaces"]}"#, "states[1]", nameRule),
        Case(#"{"initial":"A","transitions":{}}"#, "transitions", "must be an array"),
        Case(#"{"initial":"A","transitions":["go"]}"#, "transitions[0]", "must be an object"),
        Case(
            #"{"initial":"A","transitions":[{"event":"go","form":"A","to":"B"}]}"#, "transitions[0].form",
            "unknown field"),
        Case(#"{"initial":"A","transitions":[{"from":"A","to":"B"}]}"#, "transitions[0].event", "is required"),
        Case(#"{"initial":"A","transitions":[{"event":"go","to":"B"}]}"#, "transitions[0].from", "is required"),
        Case(#"{"initial":"A","transitions":[{"event":"go","from":"A"}]}"#, "transitions[0].to", "is required"),
        Case(
            #"{"initial":"A","transitions":[{"event":"go now","from":"A","to":"B"}]}"#, "transitions[0].event", nameRule
        ),
        Case(#"{"initial":"A","transitions":[{"event":"go","from":"A","to":"/B"}]}"#, "transitions[0].to", nameRule),
        Case(
            #"{"initial":"A","transitions":[{"event":"go","from":["A",""],"to":"B"}]}"#, "transitions[0].from[1]",
            nameRule),
        Case(
            #"{"initial":"A","transitions":[{"event":"go","from":true,"to":"B"}]}"#, "transitions[0].from",
            "must be a state name or a list of state names"),
        Case(
            #"{"initial":"A","transitions":[{"event":"go","from":[],"to":"B"}]}"#, "transitions[0].from",
            "must name at least one state"),
        Case(
            #"{"initial":"A","states":["A","B"],"transitions":[{"event":"go","from":"C","to":"B"}]}"#,
            "transitions[0].from", "names state 'C', which is not in states"),
        Case(
            #"{"initial":"A","states":["A","B"],"transitions":[{"event":"go","from":["A","C"],"to":"B"}]}"#,
            "transitions[0].from[1]", "names state 'C', which is not in states"),
        Case(
            #"{"initial":"A","states":["A","B"],"transitions":[{"event":"go","from":"A","to":"C"}]}"#,
            "transitions[0].to", "names state 'C', which is not in states"),
        Case(
            #"{"initial":"A","transitions":[\#(go),{"event":"go","from":["B","A"],"to":"C"}]}"#,
            "transitions[1].from[1]", "duplicates transitions[0]: event 'go' from state 'A' is already defined"),
        Case(
            #"{"initial":"A","transitions":[\#(go),\#(go)]}"#, "transitions[1].from",
            "duplicates transitions[0]: event 'go' from state 'A' is already defined"),
        Case(
            #"{"initial":"A","transitions":[{"event":"go","from":["A","A"],"to":"B"}]}"#, "transitions[0].from[1]",
            "lists state 'A' twice"),
        Case(
            #"{"initial":"A","transitions":[\#(go)],"timeouts":[{"state":"C","after_seconds":1,"event":"go"}]}"#,
            "timeouts[0].state", "names unknown state 'C'"),
        Case(
            #"{"initial":"A","transitions":[\#(go)],"timeouts":[{"state":"A","after_seconds":1,"event":"stop"}]}"#,
            "timeouts[0].event", "names unknown event 'stop'"),
        Case(
            #"{"initial":"A","transitions":[\#(go)],"timeouts":[{"state":"B","after_seconds":1,"event":"go"}]}"#,
            "timeouts[0].event", "event 'go' is not allowed from state 'B', so the timeout could never fire"),
        Case(
            #"{"initial":"A","transitions":[\#(go)],"timeouts":[{"state":"A","after_seconds":0,"event":"go"}]}"#,
            "timeouts[0].after_seconds", "must be between 0.01 and 31536000"),
        Case(
            #"{"initial":"A","transitions":[\#(go)],"timeouts":[{"state":"A","after_seconds":-3,"event":"go"}]}"#,
            "timeouts[0].after_seconds", "must be between 0.01 and 31536000"),
        Case(
            #"{"initial":"A","transitions":[\#(go)],"timeouts":[{"state":"A","after_seconds":1e-9,"event":"go"}]}"#,
            "timeouts[0].after_seconds", "must be between 0.01 and 31536000"),
        Case(
            #"{"initial":"A","transitions":[\#(go)],"timeouts":[{"state":"A","after_seconds":31536000.5,"event":"go"}]}"#,
            "timeouts[0].after_seconds", "must be between 0.01 and 31536000"),
        Case(
            #"{"initial":"A","transitions":[\#(go)],"timeouts":[{"state":"A","after_seconds":"5","event":"go"}]}"#,
            "timeouts[0].after_seconds", "must be a number"),
        Case(
            #"{"initial":"A","transitions":[\#(go)],"timeouts":[{"state":"A","event":"go"}]}"#,
            "timeouts[0].after_seconds", "is required"),
        Case(
            #"{"initial":"A","transitions":[\#(go)],"timeouts":[{"after_seconds":1,"event":"go"}]}"#,
            "timeouts[0].state", "is required"),
        Case(
            #"{"initial":"A","transitions":[\#(go)],"timeouts":[{"state":"A","after_seconds":1}]}"#,
            "timeouts[0].event", "is required"),
        Case(
            #"{"initial":"A","transitions":[\#(go)],"timeouts":[{"state":"A","after_seconds":1,"event":"go","repeat":true}]}"#,
            "timeouts[0].repeat", "unknown field"),
        // Caps.
        Case(
            #"{"initial":"A","transitions":[\#(Array(repeating: go, count: 1001).joined(separator: ","))]}"#,
            "transitions", "must have at most 1000 entries"),
        Case(
            #"{"initial":"A","transitions":[\#(go)],"timeouts":[\#(Array(repeating: #"{"state":"A","after_seconds":1,"event":"go"}"#, count: 1001).joined(separator: ","))]}"#,
            "timeouts", "must have at most 1000 entries"),
        Case(
            #"{"initial":"A","states":[\#((0...1000).map { #""s\#($0)""# }.joined(separator: ","))]}"#, "states",
            "must have at most 1000 entries"),
        Case(
            #"{"initial":"S","transitions":[\#((0..<500).map { #"{"event":"e","from":"a\#($0)","to":"b\#($0)"}"# }.joined(separator: ","))]}"#,
            "transitions[499].to", "names more than 1000 states"),
        Case(
            #"{"initial":"s0","states":[\#(thousandStates.joined(separator: ","))],"transitions":[\#((0...10).map { #"{"event":"e\#($0)","from":[\#(thousandStates.joined(separator: ","))],"to":"s0"}"# }.joined(separator: ","))]}"#,
            "transitions[10].from[0]", "makes more than 10000 (event, from) pairs in all"),
    ]

    /// 1000 quoted state names, for the pair cap.
    static let thousandStates = (0..<1000).map { #""s\#($0)""# }

    @Test(arguments: cases)
    func rejects(_ c: Case) {
        #expect(throws: FieldError(field: c.field, message: c.message)) {
            try Self.parse(c.json)
        }
    }
}
