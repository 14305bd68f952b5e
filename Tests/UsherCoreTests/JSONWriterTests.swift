import Testing

@testable import UsherCore

/// The byte writer and the tree builder must say the same thing: every
/// `JSONEncodable` has one field list, written both ways.
@Suite struct JSONWriterTests {
    private let t0 = Timestamp(micros: 1_764_470_642_123_456)

    private func views() -> [VisitorView] {
        [
            VisitorView(id: "v1", queue: "q", status: .waiting, position: 3, estimatedWaitSeconds: 1.5, enqueuedAt: t0),
            VisitorView(id: "v2", queue: "q", status: .waiting, position: 1, enqueuedAt: t0),
            VisitorView(
                id: "a\"b\\c\n\u{1}", queue: "q", key: "k\te", action: "é✓",
                payload: .object([("n", .int(-42)), ("x", .array([.null, .bool(true), .double(0.25)]))]),
                priority: -7, status: .granted, enqueuedAt: Timestamp(micros: -1), grantedAt: t0,
                expiresAt: t0.adding(seconds: 30), fence: Int64.max),
            VisitorView(
                id: "v3", queue: "q", status: .merged, enqueuedAt: t0, finishedAt: t0, fence: 0, mergedInto: "v1"),
            VisitorView(
                id: "v4", queue: "q", status: .cancelled, enqueuedAt: t0, finishedAt: t0, cancelledWith: "v5",
                reason: "opposite"),
            // Times in the same second with other milliseconds, then the next second and back.
            VisitorView(
                id: "v5", queue: "q", status: .completed, enqueuedAt: t0, grantedAt: t0.adding(seconds: 0.5),
                expiresAt: t0.adding(seconds: 1.2), finishedAt: t0.adding(seconds: 0.876), fence: 1),
            VisitorView(
                id: "v6", queue: "q", status: .granted, enqueuedAt: Timestamp(micros: -1_500_000),
                grantedAt: Timestamp(micros: -1_000_001), fence: 2),
        ]
    }

    @Test func bytesEqualTheTreeWritten() throws {
        for view in views() {
            #expect(view.encodedJSON == view.json().jsonBytes, "\(view.id)")
        }
    }

    @Test func bytesParseBackToTheTree() throws {
        for view in views() {
            #expect(try JSONValue.parse(String(decoding: view.encodedJSON, as: UTF8.self)) == view.json())
        }
    }

    @Test func treeKeepsFieldOrderAndNesting() {
        let state = QueueState(
            name: "q", config: QueueConfig(holdSeconds: 2.5, opposites: [["like", "unlike"], ["up", "down"]]),
            holding: [views()[2]], waiting: [views()[0], views()[1]], counts: QueueCounts())
        let tree = state.json()
        guard case .object(let members) = tree else {
            Issue.record("not an object")
            return
        }
        #expect(members.map(\.0) == ["name", "config", "holding", "waiting", "counts", "next_cursor"])
        #expect(tree["waiting"] == .array([views()[0].json(), views()[1].json()]))
        #expect(tree["holding"] == .array([views()[2].json()]))
        #expect(state.encodedJSON == tree.jsonBytes)
        #expect(
            tree["config"]?["opposites"]
                == .array([.array([.string("like"), .string("unlike")]), .array([.string("up"), .string("down")])]))
        #expect(tree["config"]?["hold_seconds"] == .double(2.5))
    }

    @Test func integersAtTheEdges() {
        for n in [0, 7, 10, -1, -10, 1_000_000, Int.max, Int.min] {
            #expect(JSONValue.int(n).encodedJSON == Array(String(n).utf8))
        }
    }

    @Test func timestampsMatchTheirString() {
        for micros: Int64 in [0, -1, 999, 1_764_470_642_123_456, 253_402_300_799_999_999] {
            let t = Timestamp(micros: micros)
            var out: [UInt8] = []
            t.writeRFC3339(to: &out)
            #expect(String(decoding: out, as: UTF8.self) == t.rfc3339)
        }
        #expect(Timestamp(micros: 0).rfc3339 == "1970-01-01T00:00:00.000Z")
        #expect(Timestamp(micros: -1).rfc3339 == "1969-12-31T23:59:59.999Z")
    }
}
