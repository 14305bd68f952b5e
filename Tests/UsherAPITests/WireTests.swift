import Foundation
import Testing

@testable import UsherAPI
@testable import UsherCore

/// The one encoder configuration: member order, nulls, times, numbers.
@Suite struct WireTests {
    static func text(_ value: some Encodable) -> String { String(decoding: Wire.bytes(value), as: UTF8.self) }

    @Test func aWaitingVisitorHasItsMembersSortedAndItsEmptyOnesNull() {
        let view = VisitorView(
            id: "a/b", queue: "q", payload: .object([("z", .int(1)), ("a", .double(1.5))]), status: .waiting,
            position: 2, estimatedWaitSeconds: 30, enqueuedAt: Timestamp(micros: 1_796_000_000_123_456))
        #expect(Self.text(VisitorBody(view)) == #"{"action":null,"enqueued_at":"2026-11-30T00:53:20.123Z","#
            + #""estimated_wait_seconds":30,"expires_at":null,"fence":null,"finished_at":null,"granted_at":null,"#
            + #""id":"a/b","key":null,"payload":{"a":1.5,"z":1},"position":2,"priority":0,"queue":"q","status":"waiting"}"#)
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
        let error = APIError.tooMany("queue_full", "Queue is full", "the waiting line is at max_waiting", retryAfter: 30)
        #expect(Self.text(ProblemBody(error)) == #"{"code":"queue_full","detail":"the waiting line is at max_waiting","#
            + #""retry_after_seconds":30,"status":429,"title":"Queue is full","type":"urn:usher:error:queue_full"}"#)
    }

    @Test func aNonFiniteNumberIsNull() {
        #expect(Self.text(JSONValue.array([.double(.infinity), .double(.nan), .int(-3)])) == "[null,null,-3]")
    }

    @Test func aTransitionCarriesItsVersionAsFence() throws {
        let definition = try MachineDefinition(initial: "a", transitions: [.init(event: "go", from: "a", to: "b")])
        var engine = MachineEngine(definition: definition, createdAt: Timestamp(micros: 10))
        let result = TransitionResult(try engine.fire("go", expectedVersion: nil, data: nil, at: Timestamp(micros: 20)))
        #expect(Self.text(TransitionResultBody(result: result))
            == #"{"event":"go","fence":11,"previous_state":"a","state":"b","version":11}"#)
    }
}
