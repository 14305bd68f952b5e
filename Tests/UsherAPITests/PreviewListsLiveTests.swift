import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import UsherAPI

/// The lists a state shows beside its paged one: a queue's first delayed
/// visitors (`delayed`) and a pool's first waiting fetches (`waiting_leases`),
/// bounded by `limit` and by `max_response_bytes`, on the first page only.
@Suite struct PreviewListsLiveTests {

    @Test func aQueueListsItsDelayedVisitorsInTheOrderTheyEnterTheLine() throws {
        let s = try AppTester(#"{"queues": {"q": {"capacity": 1}}}"#)
        #expect(try s.call("POST", "/v1/queues/q/visitors", #"{"id": "holder"}"#).status == 201)
        for (id, delay) in [("late", 300), ("soon", 100), ("middle", 200)] {
            let r = try s.call("POST", "/v1/queues/q/visitors", #"{"id": "\#(id)", "delay_seconds": \#(delay)}"#)
            #expect(r.json["status"] as? String == "delayed")
        }
        for id in ["waits", "waits-too"] {
            #expect(try s.call("POST", "/v1/queues/q/visitors", #"{"id": "\#(id)"}"#).status == 201)
        }

        let state = try s.call("GET", "/v1/queues/q").json
        #expect(ids(state["delayed"]) == ["soon", "middle", "late"])
        #expect(ids(state["waiting"]) == ["waits", "waits-too"])
        let first = try #require((state["delayed"] as? [[String: Any]])?.first)
        #expect(first["status"] as? String == "delayed" && first["position"] == nil && first["queue"] as? String == "q")
        #expect((state["counts"] as? [String: Any])?["delayed"] as? Int == 3)

        // A cancelled delayed visitor leaves its place (its timer entry stays, stale).
        #expect(try s.call("DELETE", "/v1/queues/q/visitors/soon").status == 200)
        #expect(ids(try s.call("GET", "/v1/queues/q").json["delayed"]) == ["middle", "late"])

        // Bounded by `limit`, and on the first page only.
        let page = try s.call("GET", "/v1/queues/q?limit=1").json
        #expect(ids(page["delayed"]) == ["middle"])
        let cursor = try #require(page["next_cursor"] as? String)
        let next = try s.call("GET", "/v1/queues/q?limit=1&cursor=\(cursor)").json
        #expect(ids(next["waiting"]) == ["waits"])
        #expect(ids(next["delayed"]) == [] && next["delayed"] is [Any])
        #expect(ids(try s.call("GET", "/v1/queues/q?limit=0").json["delayed"]) == [])
    }

    @Test func delayedVisitorsGetTheRoomTheHoldersAndTheLineLeave() throws {
        let s = try AppTester(#"{"max_response_bytes": 65536, "queues": {"q": {"capacity": 0}}}"#)
        let big = String(repeating: "x", count: 20_000)
        for i in 1...5 {
            let body = #"{"id": "d\#(i)", "delay_seconds": \#(100 + i), "payload": "\#(big)"}"#
            #expect(try s.call("POST", "/v1/queues/q/visitors", body).status == 201)
        }
        let r = try s.call("GET", "/v1/queues/q")
        #expect(r.status == 200 && r.body.count <= 65536)
        #expect(ids(r.json["delayed"]) == ["d1", "d2", "d3"])
        #expect((r.json["counts"] as? [String: Any])?["delayed"] as? Int == 5)
    }

    @Test func aPoolListsItsWaitingFetchesFirstInLineFirst() throws {
        let s = try AppTester(#"{"pools": {"p": {"elements": ["a"]}}}"#)
        #expect(try s.call("GET", "/v1/pools/p").json["waiting_leases"] as? [Any] != nil)
        _ = try s.call("POST", "/v1/pools/p/fetch", #"{"id": "held", "holder": "first"}"#)
        // A parked fetch enters the line in its own task, after the connection parks:
        // the second starts once the first is in line.
        func untilWaiting(_ n: Int) {
            _ = pollBlocking(2.5) { (try? s.call("GET", "/v1/pools/p").counts["waiting"] as? Int) == n }
        }
        let one = s.inBackground { try s.call("POST", "/v1/pools/p/fetch?wait=10", #"{"id": "w1", "holder": "ci-7"}"#) }
        untilWaiting(1)
        let two = s.inBackground { try s.call("POST", "/v1/pools/p/fetch?wait=10", #"{"id": "w2"}"#) }
        untilWaiting(2)

        let state = try s.call("GET", "/v1/pools/p").json
        #expect((state["counts"] as? [String: Any])?["waiting"] as? Int == 2)
        #expect(ids(state["waiting_leases"]) == ["w1", "w2"])
        let first = try #require((state["waiting_leases"] as? [[String: Any]])?.first)
        #expect(first["status"] as? String == "waiting" && first["holder"] as? String == "ci-7")
        #expect(first["element"] is NSNull && first["granted_at"] is NSNull)
        #expect(ids(try s.call("GET", "/v1/pools/p?limit=1").json["waiting_leases"]) == ["w1"])
        #expect(ids(try s.call("GET", "/v1/pools/p?limit=0").json["waiting_leases"]) == [])

        _ = try s.call("POST", "/v1/pools/p/recycle", #"{"lease": "held"}"#)
        #expect(try #require(one()).status == 201)
        #expect(ids(try s.call("GET", "/v1/pools/p").json["waiting_leases"]) == ["w2"])
        _ = try s.call("POST", "/v1/pools/p/recycle", #"{"lease": "w1"}"#)
        #expect(try #require(two()).status == 201)
        #expect(ids(try s.call("GET", "/v1/pools/p").json["waiting_leases"]) == [])
    }
}
