import Foundation
import HTTPTestClient
import Testing

@testable import UsherAPI

/// `estimated_wait_seconds` over HTTP: the holder's remaining time, not the
/// mean of earlier short holds.
@Suite struct WaitEstimateLiveTests {
    @Test func aWaitingVisitorSeesWhatTheHolderHasLeft() throws {
        let s = try AppTester(#"{"queues": {"q": {"capacity": 1, "hold_seconds": 60}}}"#)
        // A short hold first: the mean of finished holds is a few milliseconds.
        _ = try s.call("POST", "/v1/queues/q/visitors", #"{"id": "quick"}"#)
        _ = try s.call("POST", "/v1/queues/q/visitors/quick/complete")
        #expect(
            try s.call("POST", "/v1/queues/q/visitors", #"{"id": "holder"}"#).json["status"] as? String == "granted")
        let next = try s.call("POST", "/v1/queues/q/visitors", #"{"id": "next"}"#)
        let wait = try #require(next.json["estimated_wait_seconds"] as? Double)
        #expect(wait > 55 && wait <= 60)
        let after = try s.call("POST", "/v1/queues/q/visitors", #"{"id": "after"}"#)
        let later = try #require(after.json["estimated_wait_seconds"] as? Double)
        #expect(abs(later - wait) < 1)  // the same expiry plus one (short) mean hold
        let state = try s.call("GET", "/v1/queues/q")
        let listed = (state.json["waiting"] as? [[String: Any]])?.compactMap { $0["estimated_wait_seconds"] as? Double }
        #expect(listed?.count == 2 && listed!.allSatisfy { $0 > 55 && $0 < 61 })
    }
}
