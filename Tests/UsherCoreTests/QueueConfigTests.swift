import Testing

@testable import UsherCore

/// Parsing of queue configs, patches and visitor requests; the JSON shapes.
@Suite struct QueueConfigTests {
    typealias F = QueueFixtures

    func reader(_ text: String) throws -> FieldReader {
        try FieldReader(JSONValue.parse(text))
    }

    func config(_ text: String) throws -> QueueConfig {
        var r = try reader(text)
        let c = try QueueConfig.parse(&r)
        try r.finish()
        return c
    }

    func fieldError(_ text: String, _ parse: (inout FieldReader) throws(FieldError) -> Void) throws -> FieldError? {
        var r = try reader(text)
        do {
            try parse(&r)
            try r.finish()
            return nil
        } catch {
            return error
        }
    }

    @Test func anEmptyConfigTakesEveryDefault() throws {
        #expect(try config("{}") == QueueConfig())
        #expect(
            QueueConfig() == QueueConfig(capacity: 1, maxWaiting: 10000, holdSeconds: 30, dedup: .off, history: 1000))
    }

    @Test func everyFieldIsRead() throws {
        let c = try config(
            #"{"capacity":3,"max_waiting":5,"hold_seconds":1.5,"dedup":"adjacent","opposites":[["like","unlike"]],"history":0}"#
        )
        #expect(
            c
                == QueueConfig(
                    capacity: 3, maxWaiting: 5, holdSeconds: 1.5, dedup: .adjacent, opposites: [["like", "unlike"]],
                    history: 0))
        #expect(try config(#"{"capacity":null}"#).capacity == 1)
    }

    @Test func badFieldsAreNamed() throws {
        let parse: (inout FieldReader) throws(FieldError) -> Void = { r throws(FieldError) in
            _ = try QueueConfig.parse(&r)
        }
        #expect(try fieldError(#"{"capactiy":2}"#, parse)?.field == "capactiy")
        #expect(try fieldError(#"{"capacity":-1}"#, parse)?.field == "capacity")
        #expect(try fieldError(#"{"capacity":1.5}"#, parse)?.field == "capacity")
        #expect(try fieldError(#"{"max_waiting":10000001}"#, parse)?.field == "max_waiting")
        #expect(try fieldError(#"{"hold_seconds":31536001}"#, parse)?.field == "hold_seconds")
        #expect(try fieldError(#"{"dedup":"keys"}"#, parse)?.field == "dedup")
        #expect(try fieldError(#"{"history":100001}"#, parse)?.field == "history")
        #expect(try fieldError(#"{"opposites":[["a"]]}"#, parse)?.field == "opposites[0]")
        #expect(try fieldError(#"{"opposites":[["a","b"],["a","a"]]}"#, parse)?.field == "opposites[1]")
        #expect(try fieldError(#"{"opposites":[["a",""]]}"#, parse)?.field == "opposites[0]")
        #expect(try fieldError(#"{"opposites":"a"}"#, parse)?.field == "opposites")
    }

    @Test func aPatchChangesOnlyWhatItNames() throws {
        var r = try reader(#"{"capacity":4,"dedup":"off"}"#)
        let p = try QueuePatch.parse(&r)
        try r.finish()
        #expect(p == QueuePatch(capacity: 4, dedup: .off))
        let c = p.applied(to: QueueConfig(maxWaiting: 7))
        #expect(c == QueueConfig(capacity: 4, maxWaiting: 7, dedup: .off))
    }

    @Test func visitorRequestsAreParsedAndChecked() throws {
        var r = try reader(
            #"{"id":"job-7","key":"k","action":"like","payload":{"a":[1,null]},"priority":-3,"hold_seconds":2.5,"delay_seconds":0}"#
        )
        let v = try VisitorRequest.parse(&r)
        try r.finish()
        #expect(v.id == "job-7" && v.key == "k" && v.action == "like" && v.priority == -3)
        #expect(v.payload == .object([("a", .array([.int(1), .null]))]))
        #expect(v.holdSeconds == 2.5 && v.delaySeconds == 0)
        var empty = try FieldReader(nil)
        #expect(try VisitorRequest.parse(&empty) == VisitorRequest())
        let parse: (inout FieldReader) throws(FieldError) -> Void = { r throws(FieldError) in
            _ = try VisitorRequest.parse(&r)
        }
        #expect(try fieldError(#"{"id":"-x"}"#, parse)?.field == "id")
        #expect(try fieldError(#"{"key":""}"#, parse)?.field == "key")
        #expect(try fieldError(#"{"priority":1000001}"#, parse)?.field == "priority")
        #expect(try fieldError(#"{"delay_seconds":-1}"#, parse)?.field == "delay_seconds")
        #expect(try fieldError(#"{"hold_second":1}"#, parse)?.field == "hold_second")
        #expect(try fieldError(#"{"payload":null,"action":null}"#, parse) == nil)
    }

    @Test func viewsCarryWhatTheirStatusHas() throws {
        var e = F.engine(QueueConfig(holdSeconds: 10, dedup: .key))
        let a = try e.enqueue(VisitorRequest(id: "a", payload: .object([("n", .int(1))])), now: F.at(0)).view
        #expect(a.status == .granted && a.grantedAt == F.at(0) && a.expiresAt == F.at(10))
        #expect(a.fence == 1_767_225_600_000_000 && a.position == nil && a.finishedAt == nil)
        let b = try e.add("b", key: "k", action: "go", priority: 2, at: 0.25)
        #expect(b.status == .waiting && b.position == 1 && b.estimatedWaitSeconds == 9.75)
        #expect(b.grantedAt == nil && b.fence == nil)
        let m = try e.add("m", key: "k", action: "go", at: 0.5)
        #expect(m.mergedInto == "b" && m.reason == nil)
        let c = try e.remove(id: "b", now: F.at(1))
        #expect(c.reason != nil && c.cancelledWith == nil)
    }

    @Test func stateCounts() throws {
        var e = F.engine()
        try e.add("a")
        try e.add("b")
        let s = e.state(limit: 100, now: F.at(0))
        #expect(s.holding.map(\.id) == ["a"] && s.waiting.map(\.id) == ["b"])
        var counts = QueueCounts()
        counts.waiting = 1
        counts.holding = 1
        counts.enqueuedTotal = 2
        counts.grantedTotal = 1
        #expect(s.counts == counts)
    }
}

extension JSONValue {
    /// The member names of an object, in order.
    var objectKeys: [String] {
        guard case .object(let m) = self else { return [] }
        return m.map(\.0)
    }
}
