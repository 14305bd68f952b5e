import Foundation
import HTTPTestClient
import Testing

@testable import UsherAPI

/// Which duplicate stays, and which ids are known again, over HTTP on a live
/// server, on both backends (docs/api.md, "Order, dedup and opposites").
@Suite(.serialized) struct DedupLiveTests {
    static let both = TestBackend.both

    /// Seed 000's `schedule()` keeps the later of two duplicates: with
    /// `dedup_keep: "latest"` Paris takes Berlin's place and is shown.
    @Test(arguments: both) func theLatestAlertTakesTheQueuedOnesPlace(_ backend: TestBackend) async throws {
        let s = try await BackendLiveServer(
            backend, #"{"windows": {"alerts": {"dedup": "key", "dedup_keep": "latest"}}}"#)
        let c = s.keepAlive()
        #expect(try await c.request("POST", "/v1/windows/alerts/show", body: #"{"id": "login"}"#).status == 201)
        let berlin = #"{"id": "city-1", "key": "city", "message": "Berlin"}"#
        #expect(try await c.request("POST", "/v1/windows/alerts/show", body: berlin).status == 201)
        let paris = try await c.request(
            "POST", "/v1/windows/alerts/show", body: #"{"id": "city-2", "key": "city", "message": "Paris"}"#)
        #expect(paris.status == 201 && paris.json["status"] as? String == "queued", "\(paris.text)")
        #expect(paris.json["position"] as? Int == 1)
        let replaced = try await c.request("GET", "/v1/windows/alerts/items/city-1")
        #expect(replaced.json["status"] as? String == "merged", "\(replaced.text)")
        #expect(replaced.json["merged_into"] as? String == "city-2" && replaced.json["reason"] as? String == "replaced")
        let next = try await c.request("POST", "/v1/windows/alerts/dismiss", body: #"{"id": "login"}"#)
        #expect((next.json["showing"] as? [String: Any])?["message"] as? String == "Paris", "\(next.text)")
        let config = try await c.request("GET", "/v1/windows/alerts").json["config"] as? [String: Any]
        #expect(config?["dedup_keep"] as? String == "latest")
    }

    /// The same on a queue: the newer print job goes on in the older one's
    /// place; `PATCH` switches back to keeping the first.
    @Test(arguments: both) func theLatestVisitorTakesTheWaitingOnesPlace(_ backend: TestBackend) async throws {
        let s = try await BackendLiveServer(backend)
        let made = try await s.call("PUT", "/v1/queues/print", s.put(#"{"dedup": "key", "dedup_keep": "latest"}"#))
        #expect(made.status == 201, "\(made.text)")
        #expect((made.json["config"] as? [String: Any])?["dedup_keep"] as? String == "latest")
        for id in ["h", "v1", "other"] {
            let key = id == "v1" ? "doc" : id
            let r = try await s.call("POST", "/v1/queues/print/visitors", #"{"id": "\#(id)", "key": "\#(key)"}"#)
            #expect(r.status == 201, "\(r.text)")
        }
        let v2 = try await s.call("POST", "/v1/queues/print/visitors", #"{"id": "v2", "key": "doc", "payload": 2}"#)
        #expect(v2.status == 201 && v2.json["status"] as? String == "waiting" && v2.json["position"] as? Int == 1)
        let v1 = try await s.call("GET", "/v1/queues/print/visitors/v1")
        #expect(v1.json["merged_into"] as? String == "v2" && v1.json["reason"] as? String == "replaced", "\(v1.text)")
        #expect(ids(try await s.call("GET", "/v1/queues/print").json["waiting"]) == ["v2", "other"])

        #expect(try await s.call("PATCH", "/v1/queues/print", #"{"dedup_keep": "first"}"#).status == 200)
        let v3 = try await s.call("POST", "/v1/queues/print/visitors", #"{"id": "v3", "key": "doc"}"#)
        #expect(v3.status == 200 && v3.json["merged_into"] as? String == "v2", "\(v3.text)")
        let bad = try await s.call("PATCH", "/v1/queues/print", #"{"dedup_keep": "last"}"#)
        #expect(bad.status == 400 && bad.json["field"] as? String == "dedup_keep", "\(bad.text)")
        #expect(bad.text.contains(#"must be \"first\" or \"latest\""#))
    }

    /// Seed 003, run once: with `history: 2`, posting `h1` again after two
    /// others finished was granted a second time; `dedup_seconds` answers the
    /// first `h1` (200) for that long after it finished.
    @Test(arguments: both) func dedupSecondsRecognisesAnIdBeyondHistory(_ backend: TestBackend) async throws {
        let s = try await BackendLiveServer(backend)
        let made = try await s.call(
            "PUT", "/v1/queues/once", s.put(#"{"history": 2, "hold_seconds": 0, "dedup_seconds": 300}"#))
        #expect((made.json["config"] as? [String: Any])?["dedup_seconds"] as? Double == 300, "\(made.text)")
        for id in ["h1", "h2", "h3", "h4"] {
            #expect(try await s.call("POST", "/v1/queues/once/visitors", #"{"id": "\#(id)"}"#).status == 201)
            #expect(try await s.call("POST", "/v1/queues/once/visitors/\(id)/complete").status == 200)
        }
        let again = try await s.call("POST", "/v1/queues/once/visitors", #"{"id": "h1"}"#)
        #expect(again.status == 200 && again.json["status"] as? String == "completed", "\(again.text)")
        let patched = try await s.call("PATCH", "/v1/queues/once", #"{"dedup_seconds": 0}"#)
        #expect((patched.json["config"] as? [String: Any])?["dedup_seconds"] as? Double == 0, "\(patched.text)")
        let fresh = try await s.call("POST", "/v1/queues/once/visitors", #"{"id": "h1"}"#)
        #expect(fresh.status == 201 && fresh.json["status"] as? String == "granted", "\(fresh.text)")
        let bad = try await s.call("PATCH", "/v1/queues/once", #"{"dedup_seconds": -1}"#)
        #expect(bad.status == 400 && bad.json["field"] as? String == "dedup_seconds", "\(bad.text)")
    }
}
