import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import UsherAPI
@testable import UsherCore

/// A payload's numbers come back as they were sent, or are refused.
@Suite struct ExactNumbersLiveTests {
    @Test func aNumberParsingWouldChangeIs400NamingItsMember() throws {
        let s = try AppTester(#"{"queues": {"q": {"capacity": 10}}}"#)
        for big in ["18446744073709551617", "123456789012345678901234567890", "0.30000000000000001"] {
            let r = try s.call("POST", "/v1/queues/q/visitors", #"{"payload": {"list": [1, {"n": \#(big)}]}}"#)
            #expect(r.status == 400, "\(big)")
            #expect(r.code == "bad_request")
            #expect(r.json["field"] as? String == "payload.list[1].n", "\(big)")
        }
        let counts = try s.call("GET", "/v1/queues/q").json["counts"] as? [String: Any]
        #expect(counts?["enqueued_total"] as? Int == 0)
    }

    @Test func numbersThatFitComeBackAsSent() throws {
        let s = try AppTester(#"{"queues": {"q": {"capacity": 10}}}"#)
        let sent = #"{"a":-9223372036854775808,"b":9223372036854775807,"c":1.5,"d":0.1,"f":[0,-1]}"#
        let r = try s.call("POST", "/v1/queues/q/visitors", #"{"payload": \#(sent)}"#)
        #expect(r.status == 201)
        #expect(String(decoding: r.body, as: UTF8.self).contains(#""payload":\#(sent)"#))
    }

    /// The parser reads negative integers of 19 digits as doubles: each must
    /// come back as sent, not as the nearest double (-9223372036854775806 was
    /// answered as -9223372036854775808, -1000000000000000001 as -1e+18).
    @Test func wideNegativeIntegersComeBackAsSentWherever() throws {
        let s = try AppTester(#"{"queues": {"q": {"capacity": 10}}}"#)
        let sent =
            #"{"a":-9223372036854775807,"b":[-1000000000000000001,{"c":-9223372036854775806}],"d":-9223372036854775808,"e":0.5}"#
        let r = try s.call("POST", "/v1/queues/q/visitors", #"{"payload": \#(sent)}"#)
        #expect(r.status == 201)
        #expect(String(decoding: r.body, as: UTF8.self).contains(#""payload":\#(sent)"#), "\(r.text)")
        for integer in [Int.min, Int.min + 1, -1_000_000_000_000_000_001, Int.max, -(1 << 53) - 1] {
            #expect(try JSONValue.parse("[\(integer), 0.5]") == .array([.int(integer), .double(0.5)]))
        }
    }

    /// Exponents beyond `Decimal`'s range (10^127) are compared exactly too:
    /// 1e300 is what a double holds, 1e400 and 1.00000000000000000001e300 are not.
    @Test func largeExponentsAreKeptWhenADoubleHoldsThem() throws {
        for kept in ["1e300", "-1e+300", "1E300", "2.5e-300", "5e-324", "1.7976931348623157e308", "0.0", "-0"] {
            #expect(ExactNumbers.isKept(kept), "\(kept)")
        }
        for changed in ["1e400", "1.00000000000000000001e300", "0.30000000000000001", "1e-400"] {
            #expect(!ExactNumbers.isKept(changed), "\(changed)")
        }
        #expect(try JSONValue.parse("-1e300") == .double(-1e300))
        #expect(DecimalText("0.0100") == DecimalText("1e-2"))
        #expect(DecimalText("-0.0") == DecimalText("0"))
        #expect(DecimalText("1e") == nil && DecimalText("1..2") == nil && DecimalText("-") == nil)
    }

    @Test func theCheckFollowsMembersAndIndexes() {
        let text = #"{"a": [1.5, {"b\"c": 1e400}], "d": 2}"#
        let found = Data(text.utf8).withUnsafeBytes { ExactNumbers.readings($0) }
        guard case .failure(let inexact) = found else {
            Issue.record("1e400 was kept")
            return
        }
        #expect(inexact.field == #"a[1].b"c"# && inexact.text == "1e400")
    }
}

/// Doubles from random bit patterns come back as the same doubles through
/// the server, every kind, on both backends: payloads, `data`, element data,
/// and config seconds. Answers are read with `JSONDecoder`, which reads
/// doubles exactly (`JSONSerialization` does not).
@Suite(.serialized, .timeLimit(.minutes(2))) struct ExactDoublesLiveTests {
    /// Finite doubles of every sign and exponent, subnormals and edges among them.
    static func doubles(_ count: Int, _ generator: inout SplitMix64) -> [Double] {
        var found: [Double] = [-0.0, 0.30000000000000004, 1.0000000000000002, .leastNonzeroMagnitude, -1e300]
        for _ in 0..<count / 10 { found.append(Double(bitPattern: generator.next() & 0x800F_FFFF_FFFF_FFFF)) }
        while found.count < count {
            let double = Double(bitPattern: generator.next())
            if double.isFinite { found.append(double) }
        }
        return found
    }

    /// A duration a config accepts (0.01 to 31,536,000 s), from random bits.
    static func seconds(_ generator: inout SplitMix64) -> Double {
        while true {
            let double = Double(bitPattern: generator.next() >> 1)
            if double >= 0.01 && double <= 31_536_000 && double != double.rounded() { return double }
        }
    }

    static func text(_ doubles: [Double]) -> String { "[" + doubles.map { "\($0)" }.joined(separator: ",") + "]" }

    /// The doubles that came back otherwise, as `sent → answered`.
    static func changed(_ sent: [Double], _ answered: [Double]?) -> [String] {
        guard let answered, answered.count == sent.count else { return ["\(answered?.count ?? -1) of \(sent.count)"] }
        return zip(sent, answered).filter { $0.bitPattern != $1.bitPattern }.map { "\($0) → \($1)" }
    }

    static func decode<T: Decodable>(_ type: T.Type, _ response: TestHTTPClient.Response) -> T? {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return try? decoder.decode(type, from: response.body)
    }

    struct Payload: Decodable { var payload: [Double] }
    struct WithData: Decodable { var data: [Double]? }
    struct Fetched: Decodable { var element: WithData }
    struct Config: Decodable {
        struct Seconds: Decodable {
            var holdSeconds: Double?
            var displaySeconds: Double?
            var leaseSeconds: Double?
            var ackSeconds: Double?
        }
        var config: Seconds
    }
    struct Machine: Decodable {
        struct Detail: Decodable {
            struct Timeout: Decodable { var afterSeconds: Double }
            var timeouts: [Timeout]
        }
        var history: [WithData]
        var definitionDetail: Detail
    }

    /// What came back otherwise, by where it was sent.
    final class Changes {
        var lost: [String: [String]] = [:]

        func check(_ what: String, _ sent: [Double], _ answered: [Double]?) {
            let changed = ExactDoublesLiveTests.changed(sent, answered)
            if !changed.isEmpty { lost[what] = changed }
        }

        func check(_ what: String, _ sent: Double, _ answered: Double?) {
            if answered?.bitPattern != sent.bitPattern { lost[what] = ["\(sent) → \(String(describing: answered))"] }
        }

        var summary: String {
            lost.map { "\($0.key): \($0.value.count) changed, e.g. \($0.value.prefix(2))" }.sorted()
                .joined(separator: "\n")
        }
    }

    @Test(arguments: [TestBackend.memory, .redis]) func randomDoublesComeBackAsSent(_ backend: TestBackend)
        async throws
    {
        let s = try await BackendApp(backend)
        var generator = SplitMix64(seed: 25)
        let changes = Changes()
        func get<T: Decodable>(_ type: T.Type, _ path: String) async throws -> T? {
            Self.decode(type, try await s.call("GET", path))
        }

        let hold = Self.seconds(&generator)
        let queue = #"{"capacity": 10, "hold_seconds": \#(hold)}"#
        #expect(try await s.call("PUT", "/v1/queues/q", s.put(queue)).status == 201)
        changes.check("hold_seconds", hold, try await get(Config.self, "/v1/queues/q")?.config.holdSeconds)
        let visitor = Self.doubles(400, &generator)
        let posted = try await s.call(
            "POST", "/v1/queues/q/visitors", #"{"id": "v", "payload": \#(Self.text(visitor))}"#)
        #expect(posted.status == 201, "\(posted.text.prefix(300))")
        changes.check("visitor payload (POST)", visitor, Self.decode(Payload.self, posted)?.payload)
        changes.check("visitor payload", visitor, try await get(Payload.self, "/v1/queues/q/visitors/v")?.payload)

        let display = Self.seconds(&generator)
        #expect(try await s.call("PUT", "/v1/windows/w", s.put(#"{"display_seconds": \#(display)}"#)).status == 201)
        changes.check("display_seconds", display, try await get(Config.self, "/v1/windows/w")?.config.displaySeconds)
        let shown = Self.doubles(400, &generator)
        let show = #"{"id": "a", "payload": \#(Self.text(shown))}"#
        #expect(try await s.call("POST", "/v1/windows/w/show", show).status == 201)
        changes.check("window payload", shown, try await get(Payload.self, "/v1/windows/w/items/a")?.payload)

        let lease = Self.seconds(&generator)
        let declared = Self.doubles(300, &generator)
        let pool = #"{"elements": [{"id": "e", "data": \#(Self.text(declared))}], "lease_seconds": \#(lease)}"#
        let created = try await s.call("PUT", "/v1/pools/p", s.put(pool))
        #expect(created.status == 201, "\(created.text.prefix(300))")
        changes.check("lease_seconds", lease, try await get(Config.self, "/v1/pools/p")?.config.leaseSeconds)
        let first = Self.decode(Fetched.self, try await s.call("POST", "/v1/pools/p/fetch", "{}"))
        changes.check("declared element data", declared, first?.element.data)
        let added = Self.doubles(300, &generator)
        #expect(try await s.call("PUT", "/v1/pools/p/elements/f", #"{"data": \#(Self.text(added))}"#).status == 201)
        let second = Self.decode(Fetched.self, try await s.call("POST", "/v1/pools/p/fetch", "{}"))
        changes.check("added element data", added, second?.element.data)

        let ack = Self.seconds(&generator)
        let pipeline = #"{"capacity": 10, "ack_seconds": \#(ack)}"#
        #expect(try await s.call("PUT", "/v1/pipelines/l", s.put(pipeline)).status == 201)
        changes.check("ack_seconds", ack, try await get(Config.self, "/v1/pipelines/l")?.config.ackSeconds)
        let item = Self.doubles(400, &generator)
        let push = #"{"id": "i", "payload": \#(Self.text(item))}"#
        #expect(try await s.call("POST", "/v1/pipelines/l/items", push).status == 201)
        changes.check("pipeline payload", item, try await get(Payload.self, "/v1/pipelines/l/items/i")?.payload)

        let after = Self.seconds(&generator)
        let definition = #"""
            {"definition": {"initial": "a", "transitions": [{"event": "go", "from": "a", "to": "b"},
               {"event": "back", "from": "b", "to": "a"}],
             "timeouts": [{"state": "b", "after_seconds": \#(after), "event": "back"}]}}
            """#
        #expect(try await s.call("PUT", "/v1/machines/m", s.put(definition)).status == 201)
        let data = Self.doubles(400, &generator)
        #expect(try await s.call("POST", "/v1/machines/m/events/go", #"{"data": \#(Self.text(data))}"#).status == 200)
        let machine = try await get(Machine.self, "/v1/machines/m?include=definition")
        changes.check("machine data", data, machine?.history.first { $0.data != nil }?.data)
        changes.check("after_seconds", after, machine?.definitionDetail.timeouts.first?.afterSeconds)

        #expect(changes.lost.isEmpty, "\(changes.summary)")
    }
}
