import Foundation
import Testing

@testable import UsherCore

@Suite struct TimestampTests {
    @Test func formatsRFC3339WithMilliseconds() {
        #expect(Timestamp(micros: 0).rfc3339 == "1970-01-01T00:00:00.000Z")
        #expect(Timestamp(micros: 1_767_225_600_000_000).rfc3339 == "2026-01-01T00:00:00.000Z")
        // 2026-11-30T03:24:02.123456Z: microseconds are truncated to milliseconds.
        #expect(Timestamp(micros: 1_796_009_042_123_456).rfc3339 == "2026-11-30T03:24:02.123Z")
        // Leap day.
        #expect(Timestamp(micros: 1_709_208_000_999_000).rfc3339 == "2024-02-29T12:00:00.999Z")
    }

    @Test func agreesWithFoundationOnManyInstants() {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            let millis = Int64.random(in: 0...4_102_444_800_000, using: &generator)
            let t = Timestamp(micros: millis * 1000)
            #expect(t.rfc3339 == formatter.string(from: Date(timeIntervalSince1970: Double(millis) / 1000)))
        }
    }

    @Test func arithmetic() {
        let t = Timestamp(seconds: 10)
        #expect(t.adding(seconds: 1.5).micros == 11_500_000)
        #expect(t.seconds(until: Timestamp(seconds: 12)) == 2)
    }
}

@Suite struct JSONValueTests {
    @Test func parsesAndWritesEveryKind() throws {
        let v = try JSONValue.parse(#"{"b":[1,2.5,true,null,"x\"y\n"],"a":{"n":-3}}"#)
        #expect(v["a"] == .object([("n", .int(-3))]))
        #expect(v["b"] == .array([.int(1), .double(2.5), .bool(true), .null, .string("x\"y\n")]))
        // Members come back sorted (Foundation does not keep their order).
        #expect(v.objectKeys == ["a", "b"])
    }

    @Test func rejectsMalformedJSON() {
        #expect(throws: JSONSyntaxError.self) { try JSONValue.parse("{nope") }
    }
}

@Suite struct FieldReaderTests {
    @Test func readsTypedFieldsAndRejectsUnknownOnes() throws {
        var r = try FieldReader(try JSONValue.parse(#"{"n": 3, "s": "x", "extra": 1}"#), path: "q")
        #expect(try r.int("n", in: 0...5) == 3)
        #expect(try r.string("s") == "x")
        #expect(throws: FieldError(field: "q.extra", message: "unknown field")) { try r.finish() }
    }

    @Test func tracksEveryMemberOfALargeObject() throws {
        // Members past the 64th are tracked apart from the first 64.
        let members = (0..<70).map { (String(format: "k%02d", $0), JSONValue.int($0)) }
        for skipped in ["k03", "k67"] {
            var r = try FieldReader(.object(members))
            for (name, _) in members where name != skipped { #expect(try r.int(name, in: 0...100) != nil) }
            #expect(throws: FieldError(field: skipped, message: "unknown field")) { try r.finish() }
        }
        var all = try FieldReader(.object(members))
        for (name, _) in members { _ = all.value(name) }
        try all.finish()
    }

    @Test func namesTheFieldOnTypeAndRangeErrors() throws {
        var r = try FieldReader(try JSONValue.parse(#"{"n": 9, "s": 1, "f": 1.5}"#))
        #expect(throws: FieldError.self) { try r.int("n", in: 0...5) }
        #expect(throws: FieldError(field: "s", message: "must be a string")) { try r.string("s") }
        #expect(throws: FieldError(field: "f", message: "must be an integer")) { try r.int("f", in: 0...5) }
    }

    @Test func nullMeansAbsent() throws {
        var r = try FieldReader(try JSONValue.parse(#"{"n": null}"#))
        #expect(try r.int("n", in: 0...5) == nil)
        try r.finish()
    }

    @Test func names() {
        #expect(Names.isValid("a"))
        #expect(Names.isValid("job-1.x_y:z"))
        #expect(!Names.isValid(""))
        #expect(!Names.isValid("-a"))
        #expect(!Names.isValid("a b"))
        #expect(!Names.isValid(String(repeating: "a", count: 129)))
        #expect(Names.isValid(String(repeating: "a", count: 128)))
    }
}

actor Tally: LockIsolatedActor {
    nonisolated let executor = ResourceExecutor(label: "test.tally")
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    var count = 0
    func add() -> Int {
        count += 1
        return count
    }
}

@Suite struct ResourceExecutorTests {
    @Test func synchronousAndAsyncCallersNeverInterleave() async {
        let tally = Tally()
        let threads = 4
        let perThread = 2000
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<threads {
                group.addTask {
                    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                        Thread {
                            for _ in 0..<perThread { _ = tally.withIsolation { $0.add() } }
                            done.resume()
                        }.start()
                    }
                }
                group.addTask {
                    for _ in 0..<perThread { _ = await tally.add() }
                }
            }
        }
        #expect(await tally.count == threads * perThread * 2)
    }
}
