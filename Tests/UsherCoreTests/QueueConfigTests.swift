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
            QueueConfig().json().jsonString
                == #"{"capacity":1,"max_waiting":10000,"hold_seconds":30,"dedup":"key","opposites":[],"history":1000}"#)
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
        #expect(c.json()["hold_seconds"] == .double(1.5))
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

    @Test func visitorJSONHasTheSpecFieldsInOrder() throws {
        var e = F.engine(QueueConfig(holdSeconds: 10))
        let a = try e.enqueue(VisitorRequest(id: "a", payload: .object([("n", .int(1))])), now: F.at(0)).view
        #expect(
            a.json().jsonString
                == #"{"id":"a","queue":"q","key":null,"action":null,"payload":{"n":1},"priority":0,"status":"granted","#
                + #""enqueued_at":"2026-01-01T00:00:00.000Z","granted_at":"2026-01-01T00:00:00.000Z","#
                + #""expires_at":"2026-01-01T00:00:10.000Z","finished_at":null,"fence":1767225600000000}"#)
        let b = try e.add("b", key: "k", action: "go", priority: 2, at: 0.25)
        #expect(
            b.json().jsonString
                == #"{"id":"b","queue":"q","key":"k","action":"go","payload":null,"priority":2,"status":"waiting","#
                + #""position":1,"estimated_wait_seconds":10,"enqueued_at":"2026-01-01T00:00:00.250Z","#
                + #""granted_at":null,"expires_at":null,"finished_at":null,"fence":null}"#)
        let m = try e.add("m", key: "k", action: "go", at: 0.5)
        #expect(m.json()["merged_into"] == .string("b"))
        #expect(m.json()["position"] == nil && m.json()["reason"] == nil)
        let c = try e.remove(id: "b", now: F.at(1))
        let keys = c.json().objectKeys
        #expect(keys.suffix(2) == ["fence", "reason"])
        #expect(!keys.contains("position") && !keys.contains("cancelled_with"))
    }

    @Test func stateJSON() throws {
        var e = F.engine()
        try e.add("a")
        try e.add("b")
        let s = e.state(limit: 100, now: F.at(0)).json()
        #expect(s.objectKeys == ["name", "config", "holding", "waiting", "counts", "next_cursor"])
        #expect(
            s["counts"]?.jsonString
                == #"{"waiting":1,"holding":1,"delayed":0,"enqueued_total":2,"granted_total":1,"completed_total":0,"#
                + #""released_total":0,"expired_total":0,"cancelled_total":0,"merged_total":0,"timed_out_total":0}"#)
    }
}

extension JSONValue {
    /// The member names of an object, in order.
    var objectKeys: [String] {
        guard case .object(let m) = self else { return [] }
        return m.map(\.0)
    }
}
