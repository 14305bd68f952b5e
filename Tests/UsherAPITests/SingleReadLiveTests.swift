import Foundation
import HTTPTestClient
import Testing

@testable import UsherAPI

/// `GET /v1/windows/{w}/items/{id}`, `GET /v1/pools/{p}/leases/{id}` (each
/// with `?wait=` like a visitor) and pool elements' `lease_transitions` and
/// `last_holder` (issue 16), over real sockets.
@Suite struct SingleReadLiveTests {
    private static let config = #"""
        {"windows": {"alerts": {}},
         "pools": {"gpus": {"elements": ["gpu-0"], "lease_seconds": 60}},
         "pipelines": {"jobs": {"ack_seconds": 60}}}
        """#

    // MARK: - Window items

    @Test func anItemIsReadLiveOrFinished() throws {
        let s = try AppTester(Self.config)
        _ = try s.call("POST", "/v1/windows/alerts/show", #"{"id": "a", "title": "first"}"#)
        _ = try s.call("POST", "/v1/windows/alerts/show", #"{"id": "b"}"#)
        let b = try s.call("GET", "/v1/windows/alerts/items/b")
        #expect(b.status == 200 && b.json["status"] as? String == "queued" && b.json["position"] as? Int == 1)
        let a = try s.call("GET", "/v1/windows/alerts/items/a")
        #expect(a.json["status"] as? String == "showing" && a.json["title"] as? String == "first")
        _ = try s.call("POST", "/v1/windows/alerts/dismiss")
        // Finished: within its history, answered at once even with wait.
        let started = Date()
        let done = try s.call("GET", "/v1/windows/alerts/items/a?wait=5")
        #expect(done.json["status"] as? String == "dismissed" && done.json["finished_at"] as? String != nil)
        #expect(Date().timeIntervalSince(started) < 2)
        let unknown = try s.call("GET", "/v1/windows/alerts/items/zz")
        #expect(unknown.status == 404 && unknown.code == "not_found")
        #expect(try s.call("GET", "/v1/windows/alerts/items/a?wiat=1").code == "bad_request")
        #expect(try s.call("GET", "/v1/windows/nope/items/a").status == 404)
    }

    @Test func anItemLongPollAnswersWhenItsStatusChanges() throws {
        let s = try AppTester(Self.config)
        _ = try s.call("POST", "/v1/windows/alerts/show", #"{"id": "a"}"#)
        _ = try s.call("POST", "/v1/windows/alerts/show", #"{"id": "b"}"#)
        let response = s.inBackground { try s.call("GET", "/v1/windows/alerts/items/b?wait=10") }
        s.untilParked(1)
        _ = try s.call("POST", "/v1/windows/alerts/dismiss")
        let r = try #require(response())
        #expect(r.status == 200 && r.json["status"] as? String == "showing")
        // No change within the wait: answered as it is.
        let same = try s.call("GET", "/v1/windows/alerts/items/b?wait=0.2")
        #expect(same.json["status"] as? String == "showing")
    }

    // MARK: - Pipeline items

    @Test func aPipelineItemLongPollAnswersWhenItMoves() throws {
        let s = try AppTester(Self.config)
        _ = try s.call("POST", "/v1/pipelines/jobs/items", #"{"id": "j1", "payload": {"n": 1}}"#)
        let watch = s.inBackground { try s.call("GET", "/v1/pipelines/jobs/items/j1?wait=10") }
        s.untilParked(1)
        let taken = try s.call("POST", "/v1/pipelines/jobs/take")
        let fence = try #require(((taken.json["items"] as? [[String: Any]])?.first)?["fence"] as? Int)
        let seen = try #require(watch())
        #expect(
            seen.status == 200 && seen.json["status"] as? String == "in_flight" && seen.json["fence"] as? Int == fence)
        // No move within the wait: answered as it is.
        let same = try s.call("GET", "/v1/pipelines/jobs/items/j1?wait=0.2")
        #expect(same.status == 200 && same.json["status"] as? String == "in_flight")
        _ = try s.call("POST", "/v1/pipelines/jobs/items/j1/consume")
        // Finished: answered at once even with wait.
        let started = Date()
        let done = try s.call("GET", "/v1/pipelines/jobs/items/j1?wait=5")
        #expect(done.json["status"] as? String == "consumed" && Date().timeIntervalSince(started) < 2)
        #expect(try s.call("GET", "/v1/pipelines/jobs/items/zz?wait=1").status == 404)
        #expect(try s.call("GET", "/v1/pipelines/jobs/items/j1?wiat=1").code == "bad_request")
    }

    // MARK: - Leases

    @Test func aLeaseIsReadLiveOrFinished() throws {
        let s = try AppTester(Self.config)
        _ = try s.call("POST", "/v1/pools/gpus/fetch", #"{"id": "l1", "holder": "alice"}"#)
        let active = try s.call("GET", "/v1/pools/gpus/leases/l1")
        let lease = active.json
        #expect(active.status == 200 && lease["status"] as? String == "active" && lease["holder"] as? String == "alice")
        #expect((lease["element"] as? [String: Any])?["id"] as? String == "gpu-0")
        _ = try s.call("POST", "/v1/pools/gpus/recycle", #"{"lease": "l1"}"#)
        let done = try s.call("GET", "/v1/pools/gpus/leases/l1?wait=5")
        #expect(done.json["status"] as? String == "recycled")
        let unknown = try s.call("GET", "/v1/pools/gpus/leases/zz")
        #expect(unknown.status == 404 && unknown.code == "not_found")
    }

    @Test func aLeaseLongPollAnswersWhenTheFetchIsGrantedOrGivesUp() throws {
        let s = try AppTester(Self.config)
        _ = try s.call("POST", "/v1/pools/gpus/fetch", #"{"id": "l1", "holder": "alice"}"#)
        let fetch = s.inBackground {
            try s.call("POST", "/v1/pools/gpus/fetch?wait=10", #"{"id": "l2", "holder": "bob"}"#)
        }
        PoolLiveTests.untilWaiting(s, "gpus", 1)
        let waiting = try s.call("GET", "/v1/pools/gpus/leases/l2")
        #expect(waiting.json["status"] as? String == "waiting")
        let watch = s.inBackground { try s.call("GET", "/v1/pools/gpus/leases/l2?wait=10") }
        s.untilParked(2)
        _ = try s.call("POST", "/v1/pools/gpus/recycle", #"{"lease": "l1"}"#)
        let seen = try #require(watch())
        #expect(seen.json["status"] as? String == "active")
        #expect(try #require(fetch()).status == 201)

        // A waiting fetch that gives up leaves no trace: its watcher gets 404 at once.
        let giveUp = s.inBackground {
            try s.call("POST", "/v1/pools/gpus/fetch?wait=0.5", #"{"id": "l3", "holder": "carol"}"#)
        }
        PoolLiveTests.untilWaiting(s, "gpus", 1)
        let started = Date()
        let gone = try s.call("GET", "/v1/pools/gpus/leases/l3?wait=10")
        #expect(gone.status == 404)
        #expect(Date().timeIntervalSince(started) < 3)
        #expect(try #require(giveUp()).code == "pool_exhausted")
    }

    // MARK: - Lease history of elements

    private func element(_ s: any UsherUnderTest) throws -> [String: Any] {
        try #require((try s.call("GET", "/v1/pools/gpus").json["elements"] as? [[String: Any]])?.first)
    }

    @Test func elementsShowHolderChanges() throws {
        let s = try AppTester(Self.config)
        var e = try element(s)
        #expect(e["lease_transitions"] as? Int == 0 && e["last_holder"] is NSNull)
        for (id, holder) in [("l1", "alice"), ("l2", "alice"), ("l3", "bob")] {
            _ = try s.call("POST", "/v1/pools/gpus/fetch", #"{"id": "\#(id)", "holder": "\#(holder)"}"#)
            _ = try s.call("POST", "/v1/pools/gpus/recycle", #"{"lease": "\#(id)"}"#)
        }
        e = try element(s)
        #expect(e["lease_transitions"] as? Int == 1 && e["last_holder"] as? String == "bob")
        #expect(e["status"] as? String == "free")
        // The element routes show them too.
        let put = try s.call("PUT", "/v1/pools/gpus/elements/gpu-0", #"{"data": {"mem": 80}}"#)
        let putElement = put.json
        #expect(putElement["lease_transitions"] as? Int == 1 && putElement["last_holder"] as? String == "bob")
        _ = try s.call("POST", "/v1/pools/gpus/fetch", #"{"id": "l4", "holder": "carol"}"#)
        let removed = try s.call("DELETE", "/v1/pools/gpus/elements/gpu-0?force=true")
        let removedElement = removed.json
        #expect(removedElement["lease_transitions"] as? Int == 2 && removedElement["last_holder"] as? String == "carol")
    }
}
