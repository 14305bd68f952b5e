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

    @Test func theCheckFollowsMembersAndIndexes() {
        let text = #"{"a": [1.5, {"b\"c": 1e400}], "d": 2}"#
        let found = Data(text.utf8).withUnsafeBytes { ExactNumbers.firstInexact($0) }
        #expect(found?.field == #"a.1.b"c"# && found?.text == "1e400")
    }
}
