import Foundation
import HTTPTestClient
import Testing

@testable import UsherAPI
@testable import UsherCore

/// A payload's numbers come back as they were sent, or are refused.
@Suite struct ExactNumbersLiveTests {
    @Test func aNumberParsingWouldChangeIs400NamingItsMember() throws {
        let s = try LiveServer(#"{"queues": {"q": {"capacity": 10}}}"#)
        for big in ["18446744073709551617", "123456789012345678901234567890", "0.30000000000000001"] {
            let r = try s.call("POST", "/v1/queues/q/visitors", #"{"payload": {"list": [1, {"n": \#(big)}]}}"#)
            #expect(r.status == 400, "\(big)")
            #expect(r.code == "bad_request")
            #expect(r.json["field"] as? String == "payload.list.1.n", "\(big)")
        }
        let counts = try s.call("GET", "/v1/queues/q").json["counts"] as? [String: Any]
        #expect(counts?["enqueued_total"] as? Int == 0)
    }

    @Test func numbersThatFitComeBackAsSent() throws {
        let s = try LiveServer(#"{"queues": {"q": {"capacity": 10}}}"#)
        let sent = #"{"a":-9223372036854775808,"b":9223372036854775807,"c":1.5,"d":0.1,"f":[0,-1]}"#
        let r = try s.call("POST", "/v1/queues/q/visitors", #"{"payload": \#(sent)}"#)
        #expect(r.status == 201)
        #expect(String(decoding: r.body, as: UTF8.self).contains(#""payload":\#(sent)"#))
    }

    /// The parser reads negative integers of 19 digits as doubles: each must
    /// come back as sent, not as the nearest double (-9223372036854775806 was
    /// answered as -9223372036854775808, -1000000000000000001 as -1e+18).
    @Test func wideNegativeIntegersComeBackAsSentWherever() throws {
        let s = try LiveServer(#"{"queues": {"q": {"capacity": 10}}}"#)
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
        let found = Data(text.utf8).withUnsafeBytes { ExactNumbers.firstInexact($0) }
        #expect(found?.field == #"a.1.b"c"# && found?.text == "1e400")
    }
}
