import Foundation
import Testing

@testable import Locking
@testable import UsherAPI
@testable import UsherCore

/// The one encoder configuration: member order, nulls, times, numbers.
@Suite struct WireTests {
    static func text(_ value: some Encodable) -> String { String(decoding: Wire.bytes(value), as: UTF8.self) }

    @Test func aWaitingVisitorHasItsMembersSortedAndItsEmptyOnesNull() {
        let view = VisitorView(
            id: "a/b", queue: "q", payload: .object([("z", .int(1)), ("a", .double(1.5))]), status: .waiting,
            position: 2, estimatedWaitSeconds: 30, enqueuedAt: Timestamp(micros: 1_796_000_000_123_456))
        #expect(
            Self.text(VisitorBody(view)) == #"{"action":null,"created_at":"2026-11-30T00:53:20.123Z","#
                + #""estimated_wait_seconds":30,"expires_at":null,"fence":null,"finished_at":null,"granted_at":null,"#
                + #""id":"a/b","key":null,"payload":{"a":1.5,"z":1},"position":2,"priority":0,"queue":"q","status":"waiting"}"#
        )
    }

    @Test func aFinishedVisitorLeavesOutWhatOnlyAWaitingOneHas() {
        let view = VisitorView(
            id: "m", queue: "q", status: .merged, position: 1, enqueuedAt: Timestamp(micros: 0),
            finishedAt: Timestamp(micros: 1_000), fence: 7, mergedInto: "n")
        let text = Self.text(VisitorBody(view))
        #expect(!text.contains("position") && !text.contains("estimated_wait_seconds") && !text.contains("reason"))
        #expect(text.contains(#""fence":7,"finished_at":"1970-01-01T00:00:00.001Z""#))
        #expect(text.contains(#""merged_into":"n""#))
    }

    @Test func aProblemListsItsExtrasAmongTheStandardMembers() {
        let error = APIError.tooMany(
            "queue_full", "Queue is full", "the waiting line is at max_waiting", retryAfter: 30)
        #expect(
            Self.text(ProblemBody(error)) == #"{"code":"queue_full","detail":"the waiting line is at max_waiting","#
                + #""retry_after_seconds":30,"status":429,"title":"Queue is full","type":"urn:usher:error:queue_full"}"#
        )
    }

    @Test func aPayloadMemberKeepsEveryKindOfValueInItsNestedContainers() {
        let payload = JSONValue.object([
            ("z", .array([.int(1), .double(2.5), .double(.nan), .string("a\"b/"), .null, .bool(true)])),
            ("a", .object([("y", .object([])), ("x", .array([])), ("w", .array([.object([("v", .bool(false))])]))])),
            ("m", .double(-.infinity)),
        ])
        let view = VisitorView(
            id: "p", queue: "q", payload: payload, status: .granted, enqueuedAt: Timestamp(micros: 0))
        #expect(
            Self.text(VisitorBody(view)).contains(
                #""payload":{"a":{"w":[{"v":false}],"x":[],"y":{}},"m":null,"z":[1,2.5,null,"a\"b/",null,true]}"#))
    }

    @Test func aNonFiniteNumberIsNull() {
        #expect(Self.text(JSONValue.array([.double(.infinity), .double(.nan), .int(-3)])) == "[null,null,-3]")
    }

    @Test func aTransitionCarriesItsVersionAsFence() throws {
        let definition = try MachineDefinition(initial: "a", transitions: [.init(event: "go", from: "a", to: "b")])
        var engine = MachineEngine(definition: definition, createdAt: Timestamp(micros: 10))
        let result = TransitionResult(try engine.fire("go", expectedVersion: nil, data: nil, at: Timestamp(micros: 20)))
        #expect(
            Self.text(TransitionResultBody(result: result))
                == #"{"at":"1970-01-01T00:00:00.000Z","cause":"event","event":"go","fence":11,"from":"a","to":"b","version":11}"#
        )
    }

    @Test func pipelineFiltersPrintBackSorted() throws {
        let cases = [
            #"{"action":"drop","priority":10,"when":{"equals":"heartbeat","field":"/type"}}"#,
            #"{"action":"set","field":"/seen_by","priority":5,"value":"usher"}"#,
            #"{"action":"remove","field":"/debug","priority":1,"when":{"exists":true,"field":"/debug"}}"#,
            #"{"action":"drop","priority":0,"when":{"field":"/n","in":[1,2]}}"#,
            #"{"action":"drop","priority":0,"when":{"field":"/n","not_equals":1}}"#,
        ]
        for text in cases {
            var reader = try FieldReader(try JSONValue.parse(text), path: "")
            let filter = try PipelineFilter.parse(&reader)
            #expect(Self.text(PipelineFilterBody(name: nil, filter: filter)) == text)
        }
    }

    @Test func aPipelineStateHasItsMembersSortedAndItsConfigParsesBack() throws {
        var reader = try FieldReader(
            try JSONValue.parse(
                #"""
                {"capacity": 10, "max_in_flight": 2, "ack_seconds": 1.5, "max_deliveries": 3,
                 "filters": {"hb": {"priority": 10, "when": {"field": "/type", "equals": "heartbeat"}, "action": "drop"}},
                 "source": {"kind": "file", "path": "gifts.ndjson", "low_water": 4}}
                """#), path: "")
        let config = try PipelineConfig.parse(&reader)
        let state = PipelineSnapshot(
            name: "p", config: config, capacity: 10, ready: 0, inFlight: 0, delayed: 0, dead: 0, fence: 0,
            waitingConsumers: 0, waitingProducers: 0, filters: PipelineFilters(config.filters), items: [],
            counts: PipelineCounts(), source: PipelineSourceStatus(config: config.source!))
        let text = Self.text(PipelineStateBody(state))
        #expect(
            text == #"{"capacity":10,"config":{"ack_seconds":1.5,"capacity":10,"dedup_seconds":300,"#
                + #""filters":{"hb":{"action":"drop","#
                + #""priority":10,"when":{"equals":"heartbeat","field":"/type"}}},"history":1000,"max_deliveries":3,"#
                + #""max_in_flight":2,"source":{"kind":"file","low_water":4,"path":"gifts.ndjson"}},"counts":{"#
                + #""cancelled_total":0,"consumed_total":0,"dead":0,"dead_dropped_total":0,"dead_total":0,"#
                + #""deduplicated_total":0,"delayed":0,"delivered_total":0,"extended_total":0,"#
                + #""filtered_total":0,"in_flight":0,"pushed_total":0,"ready":0,"redelivered_total":0,"#
                + #""waiting_consumers":0,"waiting_producers":0},"fence":0,"#
                + #""filters":[{"action":"drop","name":"hb","priority":10,"when":{"equals":"heartbeat","field":"/type"}}],"#
                + #""items":[],"name":"p","next_cursor":null,"paused":false,"#
                + #""source":{"errors_total":0,"#
                + #""exhausted":false,"kind":"file","last_error":null,"low_water":4,"next_retry_at":null,"#
                + #""path":"gifts.ndjson","pulled_total":0}}"#)
        var back = try FieldReader(try JSONValue.parse(text)["config"], path: "")
        #expect(try PipelineConfig.parse(&back) == config)
    }

    @Test func aReadyPipelineItemHasItsEmptyMembersNull() throws {
        let t0 = Timestamp(micros: 1_767_225_600_000_000)
        var engine = PipelineEngine(config: PipelineConfig(), createdAt: t0, seed: 42)
        let pushed = try engine.push(
            PipelinePushRequest(id: "x", payload: .object([("b", .int(1)), ("a", .null)])), now: t0)
        #expect(
            Self.text(PipelineItemBody(pushed.item))
                == #"{"ack_deadline":null,"available_at":"2026-01-01T00:00:00.000Z","#
                + #""created_at":"2026-01-01T00:00:00.000Z","dead_at":null,"deliveries":0,"fence":null,"id":"x","#
                + #""payload":{"a":null,"b":1},"priority":0,"status":"ready","taken_at":null}"#)
        let delivery = PipelineDelivery(
            id: "x", payload: .int(1), priority: 0, deliveries: 1, takenAt: t0, ackDeadline: nil, fence: 3)
        #expect(
            Self.text(PipelineDeliveriesBody(items: [delivery])) == #"{"items":[{"ack_deadline":null,"deliveries":1,"#
                + #""fence":3,"id":"x","payload":1,"taken_at":"2026-01-01T00:00:00.000Z"}]}"#)
    }

    @Test func aQueueConfigShowsEveryDefault() {
        #expect(
            Self.text(QueueConfigBody(config: QueueConfig()))
                == #"{"capacity":1,"claim_seconds":10,"dedup":"off","dedup_keep":"first","dedup_seconds":0,"history":1000,"hold_seconds":30,"idle_seconds":30,"max_waiting":10000,"opposites":[]}"#
        )
    }

    @Test func aDefinitionIsNormalizedAndParsesBack() throws {
        #expect(
            Self.text(MachineDefinitionBody(definition: .player))
                == #"{"initial":"NotReady","states":["NotReady","Ready","Running"],"timeouts":[],"#
                + #""transitions":[{"event":"prepare","from":["NotReady"],"to":"Ready"},"#
                + #"{"event":"start","from":["Ready"],"to":"Running"},"#
                + #"{"event":"teardown","from":["Running"],"to":"NotReady"}]}"#)
        let definition = try MachineDefinition.parse(
            try JSONValue.parse(
                #"{"initial": "Idle", "transitions": [{"event": "claim", "from": "Idle", "to": "Held"},"#
                    + #"{"event": "drop", "from": ["Held", "Idle"], "to": "Idle"}],"#
                    + #""timeouts": [{"state": "Held", "after_seconds": 2.5, "event": "drop"}]}"#), path: "")
        let back = Wire.value(MachineDefinitionBody(definition: definition))
        #expect(
            back["timeouts"]
                == .array([
                    .object([("after_seconds", .double(2.5)), ("event", .string("drop")), ("state", .string("Held"))])
                ]))
        #expect(try MachineDefinition.parse(back, path: "") == definition)
    }

    @Test func stringsAreEscapedAsRFC8259Asks() {
        #expect(Self.text(JSONValue.string("q\"b\\\n\u{01}/é")) == #""q\"b\\\n\u0001/é""#)
    }

    /// The payload-size bound the pipeline's take uses is never below what
    /// the encoder writes, and exact for text with nothing to escape.
    @Test func theEncodedSizeBoundHoldsForEveryKindOfValue() {
        let values: [JSONValue] = [
            .null, .bool(true), .bool(false), .int(0), .int(Int.min), .double(-2e-9), .double(.infinity),
            .string(""), .string("q\"b\\n\n\r\t\u{1}\u{1f}/é😀"), .array([]), .object([]),
            .object([("a", .array([.int(1), .string("x"), .null, .object([("k\"", .bool(false))])]))]),
        ]
        for value in values {
            #expect(value.encodedSizeBound >= Wire.bytes(value).count, "\(value)")
        }
        let plain = JSONValue.object([("name", .string("plain text")), ("list", .array([.string("a"), .null]))])
        #expect(plain.encodedSizeBound == Wire.bytes(plain).count)
    }

    /// The deepest payload the server accepts, inside a visitor, encodes on
    /// a 2 MiB stack (a quarter of a thread's default), even in a debug build:
    /// Foundation's encoder recurses once per level.
    @Test func theDeepestPayloadEncodesOnASmallStack() throws {
        let text =
            String(repeating: #"{"a":"#, count: 12) + String(repeating: "[", count: 488)
            + String(repeating: "]", count: 488) + String(repeating: "}", count: 12)
        let payload = try JSONValue.parse(text, maxDepth: 500)
        let encoded = Locked(0)
        let thread = Thread {
            let view = VisitorView(
                id: "v", queue: "q", payload: payload, status: .waiting, enqueuedAt: Timestamp(micros: 0))
            encoded.withLock { $0 = Wire.bytes(VisitorBody(view)).count }
        }
        thread.stackSize = 2 << 20
        thread.start()
        for _ in 0..<3000 where encoded.withLock({ $0 }) == 0 { usleep(10_000) }
        #expect(encoded.withLock { $0 } > text.count)
    }

    /// The same on the threads that answer deferred requests and emit from
    /// timers: Swift's cooperative pool and Dispatch's workers.
    @Test func theDeepestPayloadEncodesOnTheConcurrencyThreads() async throws {
        let text =
            String(repeating: #"{"a":"#, count: 12) + String(repeating: "[", count: 488)
            + String(repeating: "]", count: 488) + String(repeating: "}", count: 12)
        let payload = try JSONValue.parse(text, maxDepth: 500)
        let view = VisitorView(
            id: "v", queue: "q", payload: payload, status: .waiting, enqueuedAt: Timestamp(micros: 0))
        let onTask = await Task.detached { Wire.bytes(VisitorBody(view)).count }.value
        let onDispatch = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: Wire.bytes(VisitorBody(view)).count) }
        }
        #expect(onTask > text.count && onDispatch == onTask)
    }
}
