import Foundation
import HTTPTestClient
import Testing

@testable import Locking
@testable import UsherAPI

@Suite struct QueueLiveTests {
    @Test func healthAndReadiness() throws {
        let s = try LiveServer()
        #expect(try s.call("GET", "/healthz").status == 200)
        #expect(try s.call("GET", "/readyz").status == 200)
        let root = try s.call("GET", "/v1")
        #expect(root.status == 200)
        #expect(
            (root.json["kinds"] as? [[String: Any]])?.map { $0["kind"] as? String } == [
                "queues", "windows", "pools", "pipelines", "machines",
            ])
    }

    @Test func lifecycle() throws {
        let s = try LiveServer()
        let created = try s.call("PUT", "/v1/queues/jobs", #"{"capacity": 2}"#)
        #expect(created.status == 201)
        #expect(created.headers["content-type"] == "application/json; charset=utf-8")
        #expect((created.json["config"] as? [String: Any])?["capacity"] as? Int == 2)
        // Same config again (defaults filled in): 200.
        #expect(try s.call("PUT", "/v1/queues/jobs", #"{"capacity": 2, "hold_seconds": 30}"#).status == 200)
        // A different config: 409 already_exists.
        let clash = try s.call("PUT", "/v1/queues/jobs", #"{"capacity": 3}"#)
        #expect(clash.status == 409)
        #expect(clash.code == "already_exists")
        #expect(clash.headers["content-type"] == "application/problem+json")
        #expect(clash.json["type"] as? String == "urn:usher:error:already_exists")
        let list = try s.call("GET", "/v1/queues")
        #expect((list.json["queues"] as? [[String: Any]])?.first?["name"] as? String == "jobs")
        let patched = try s.call("PATCH", "/v1/queues/jobs", #"{"capacity": 5}"#)
        #expect(patched.status == 200)
        #expect((patched.json["config"] as? [String: Any])?["capacity"] as? Int == 5)
        #expect(try s.call("DELETE", "/v1/queues/jobs").status == 204)
        #expect(try s.call("GET", "/v1/queues/jobs").status == 404)
        #expect(try s.call("DELETE", "/v1/queues/jobs").status == 404)
    }

    @Test func badInputIsRejectedAndLosesNothing() throws {
        let s = try LiveServer(#"{"queues": {"q": {}}}"#)
        let cases: [(String, String, String?, String)] = [
            ("POST", "/v1/queues/q/visitors", "{not json", "malformed"),
            ("POST", "/v1/queues/q/visitors", #"{"kee": "a"}"#, "kee"),
            ("POST", "/v1/queues/q/visitors", #"{"priority": "high"}"#, "priority"),
            ("POST", "/v1/queues/q/visitors", #"{"id": "bad name!"}"#, "id"),
            ("POST", "/v1/queues/q/visitors", #"{"key": ""}"#, "key"),
            ("POST", "/v1/queues/q/visitors", #"[1, 2]"#, "object"),
            ("POST", "/v1/queues/q/visitors?wiat=5", "{}", "wiat"),
            ("POST", "/v1/queues/q/visitors?wait=soon", "{}", "wait"),
            ("PUT", "/v1/queues/new", #"{"capactiy": 3}"#, "capactiy"),
            ("PUT", "/v1/queues/new", #"{"capacity": -1}"#, "capacity"),
            ("PUT", "/v1/queues/new", #"{"dedup": "sometimes"}"#, "dedup"),
            ("PUT", "/v1/queues/bad%20name", "{}", "name"),
            ("PATCH", "/v1/queues/q", #"{"capacity": 1.5}"#, "capacity"),
            ("GET", "/v1/queues/q?limit=abc", nil, "limit"),
        ]
        for (method, path, body, mention) in cases {
            let r = try s.call(method, path, body)
            #expect(r.status == 400, "\(method) \(path) \(body ?? "")")
            #expect(r.code == "bad_request")
            #expect((r.json["detail"] as? String)?.contains(mention) == true, "\(r.text) should mention \(mention)")
        }
        // Nothing was created or enqueued by the bad requests.
        let state = try s.call("GET", "/v1/queues/q")
        #expect((state.json["counts"] as? [String: Any])?["enqueued_total"] as? Int == 0)
        #expect(try s.call("GET", "/v1/queues/new").status == 404)
    }

    @Test func notFoundAndMethodNotAllowed() throws {
        let s = try LiveServer(#"{"queues": {"q": {}}}"#)
        #expect(try s.call("GET", "/v1/nothing").status == 404)
        #expect(try s.call("GET", "/v1/queues/none").code == "not_found")
        #expect(try s.call("GET", "/v1/queues/q/visitors/nobody").status == 404)
        #expect(try s.call("POST", "/v1/queues/q/visitors/nobody/complete").status == 404)
        let r = try s.call("POST", "/v1/queues/q")
        #expect(r.status == 405)
        #expect(r.code == "method_not_allowed")
        #expect(r.headers["allow"] == "DELETE, GET, HEAD, PATCH, PUT")
    }

    @Test func bodyOverLimitIs413() throws {
        let s = try LiveServer(#"{"max_body_bytes": 1000, "queues": {"q": {}}}"#)
        let big = #"{"payload": ""# + String(repeating: "x", count: 2000) + #""}"#
        let r = try s.call("POST", "/v1/queues/q/visitors", big)
        #expect(r.status == 413)
        #expect(r.code == "payload_too_large")
        #expect(try s.call("POST", "/v1/queues/q/visitors", #"{"payload": "small"}"#).status == 201)
    }

    @Test func visitorRoundTrip() throws {
        let s = try LiveServer(#"{"queues": {"q": {"capacity": 1}}}"#)
        let c = s.client()
        let a = try c.request("POST", "/v1/queues/q/visitors", body: #"{"id": "a", "payload": {"n": 1}}"#)
        #expect(a.status == 201)
        #expect(a.json["status"] as? String == "granted")
        #expect(a.json["fence"] is Int)
        let b = try c.request("POST", "/v1/queues/q/visitors", body: #"{"id": "b"}"#)
        #expect(b.json["status"] as? String == "waiting")
        #expect(b.json["position"] as? Int == 1)
        // A retried POST with an existing id returns it with 200.
        let again = try c.request("POST", "/v1/queues/q/visitors", body: #"{"id": "b"}"#)
        #expect(again.status == 200)
        #expect(again.json["id"] as? String == "b")
        // b cannot complete: it does not hold a slot.
        let notGranted = try c.request("POST", "/v1/queues/q/visitors/b/complete")
        #expect(notGranted.status == 409)
        #expect(notGranted.code == "not_granted")
        #expect(notGranted.json["current_status"] as? String == "waiting")
        let done = try c.request("POST", "/v1/queues/q/visitors/a/complete")
        #expect(done.json["status"] as? String == "completed")
        let bNow = try c.request("GET", "/v1/queues/q/visitors/b")
        #expect(bNow.json["status"] as? String == "granted")
        #expect((bNow.json["fence"] as? Int ?? 0) > (a.json["fence"] as? Int ?? Int.max))
        let extended = try c.request("POST", "/v1/queues/q/visitors/b/extend", body: #"{"hold_seconds": 5}"#)
        #expect(extended.status == 200)
        let released = try c.request("DELETE", "/v1/queues/q/visitors/b")
        #expect(released.json["status"] as? String == "released")
        let state = try c.request("GET", "/v1/queues/q")
        let counts = try #require(state.json["counts"] as? [String: Any])
        #expect(counts["enqueued_total"] as? Int == 2)
        #expect(counts["completed_total"] as? Int == 1)
        #expect(counts["released_total"] as? Int == 1)
    }

    @Test func extendNeverShortensAHold() throws {
        let s = try LiveServer(#"{"queues": {"q": {"hold_seconds": 60}}}"#)
        let granted = try s.call("POST", "/v1/queues/q/visitors", #"{"id": "a"}"#)
        let expiresAt = try #require(granted.json["expires_at"] as? String)
        let shorter = try s.call("POST", "/v1/queues/q/visitors/a/extend", #"{"hold_seconds": 1}"#)
        #expect(shorter.status == 200)
        #expect(shorter.json["expires_at"] as? String == expiresAt)
        let longer = try s.call("POST", "/v1/queues/q/visitors/a/extend", #"{"hold_seconds": 60}"#)
        #expect(try #require(longer.json["expires_at"] as? String) >= expiresAt)
    }

    @Test func mergedAndCancelledVisitorsAnswer200() throws {
        let s = try LiveServer(#"{"queues": {"q": {"capacity": 0, "opposites": [["like", "unlike"]]}}}"#)
        let first = try s.call("POST", "/v1/queues/q/visitors", #"{"id": "a", "key": "k", "action": "like"}"#)
        #expect(first.status == 201)
        #expect(first.json["status"] as? String == "waiting")
        let merged = try s.call("POST", "/v1/queues/q/visitors", #"{"id": "b", "key": "k", "action": "like"}"#)
        #expect(merged.json["merged_into"] as? String == "a")
        #expect(merged.status == 200)
        let cancelled = try s.call("POST", "/v1/queues/q/visitors", #"{"id": "c", "key": "k", "action": "unlike"}"#)
        #expect(cancelled.json["cancelled_with"] as? String == "a")
        #expect(cancelled.status == 200)
        // With wait the answer comes at once, and the same way.
        _ = try s.call("POST", "/v1/queues/q/visitors", #"{"id": "d", "key": "k", "action": "like"}"#)
        let waited = try s.call("POST", "/v1/queues/q/visitors?wait=5", #"{"id": "e", "key": "k", "action": "like"}"#)
        #expect(waited.json["status"] as? String == "merged")
        #expect(waited.status == 200)
    }

    @Test func fullQueueIs429WithRetryAfter() throws {
        let s = try LiveServer(#"{"queues": {"q": {"capacity": 1, "max_waiting": 1}}}"#)
        #expect(try s.call("POST", "/v1/queues/q/visitors", "{}").status == 201)
        #expect(try s.call("POST", "/v1/queues/q/visitors", "{}").status == 201)
        let full = try s.call("POST", "/v1/queues/q/visitors", "{}")
        #expect(full.status == 429)
        #expect(full.code == "queue_full")
        #expect(Int(full.headers["retry-after"] ?? "") != nil)
    }

    @Test func tooManyResourcesIs429() throws {
        let s = try LiveServer(#"{"max_resources": 2, "queues": {"a": {}}}"#)
        #expect(try s.call("PUT", "/v1/queues/b", "{}").status == 201)
        let r = try s.call("PUT", "/v1/queues/c", "{}")
        #expect(r.status == 429)
        #expect(r.code == "too_many_resources")
    }

    @Test func longPollWakesOnComplete() throws {
        let s = try LiveServer(#"{"queues": {"q": {"capacity": 1}}}"#)
        let holder = try s.call("POST", "/v1/queues/q/visitors", #"{"id": "h"}"#)
        #expect(holder.json["status"] as? String == "granted")
        let started = Date()
        let response = s.inBackground { try s.call("POST", "/v1/queues/q/visitors?wait=10", #"{"id": "w"}"#) }
        // Wait until w is parked, then free the slot.
        s.untilParked(1)
        #expect(try s.call("GET", "/v1/queues/q/visitors/w").json["status"] as? String == "waiting")
        #expect(try s.call("POST", "/v1/queues/q/visitors/h/complete").status == 200)
        let r = try #require(response())
        #expect(r.status == 201)
        #expect(r.json["status"] as? String == "granted")
        #expect(Date().timeIntervalSince(started) < 5)
    }

    @Test func getWaitTimesOutWithUnchangedVisitor() throws {
        let s = try LiveServer(#"{"queues": {"q": {"capacity": 0}}}"#)
        _ = try s.call("POST", "/v1/queues/q/visitors", #"{"id": "w"}"#)
        let started = Date()
        let r = try s.call("GET", "/v1/queues/q/visitors/w?wait=0.3")
        #expect(r.status == 200)
        #expect(r.json["status"] as? String == "waiting")
        #expect(Date().timeIntervalSince(started) >= 0.25)
    }

    @Test func waitersOfADeletedQueueGet410() throws {
        let s = try LiveServer(#"{"queues": {"q": {"capacity": 0}}}"#)
        let response = s.inBackground { try s.call("POST", "/v1/queues/q/visitors?wait=10", #"{"id": "w"}"#) }
        s.untilParked(1)
        #expect(try s.call("GET", "/v1/queues/q/visitors/w").status == 200)
        #expect(try s.call("DELETE", "/v1/queues/q").status == 204)
        let r = try #require(response())
        #expect(r.status == 410)
        #expect(r.code == "gone")
    }

    @Test func concurrentClientsNeverExceedCapacity() throws {
        let capacity = 3
        let s = try LiveServer(#"{"queues": {"q": {"capacity": \#(capacity), "max_waiting": 10000}}}"#)
        let clients = 200
        let holding = Locked(0)
        let maxSeen = Locked(0)
        let failures = Locked<[String]>([])
        let group = DispatchGroup()
        for i in 0..<clients {
            group.enter()
            Thread {
                defer { group.leave() }
                let c = s.client()
                do {
                    let r = try c.request("POST", "/v1/queues/q/visitors?wait=30", body: #"{"id": "c\#(i)"}"#)
                    guard r.json["status"] as? String == "granted" else {
                        failures.withLock { $0.append("c\(i): \(r.status) \(r.text)") }
                        return
                    }
                    let now = holding.withLock { h -> Int in
                        h += 1
                        return h
                    }
                    maxSeen.withLock { $0 = max($0, now) }
                    usleep(1000)
                    holding.withLock { $0 -= 1 }
                    let done = try c.request("POST", "/v1/queues/q/visitors/c\(i)/complete")
                    if done.status != 200 { failures.withLock { $0.append("c\(i) complete: \(done.text)") } }
                } catch {
                    failures.withLock { $0.append("c\(i): \(error)") }
                }
            }.start()
        }
        #expect(group.wait(timeout: .now() + 60) == .success)
        #expect(failures.withLock { $0 } == [])
        #expect(maxSeen.withLock { $0 } <= capacity)
        let counts = try #require(try s.call("GET", "/v1/queues/q").json["counts"] as? [String: Any])
        #expect(counts["completed_total"] as? Int == clients)
        #expect(counts["granted_total"] as? Int == clients)
        #expect(counts["holding"] as? Int == 0)
    }

    @Test func shutdownAnswersParkedRequests503() throws {
        let s = try LiveServer(#"{"queues": {"q": {"capacity": 0}}}"#)
        let response = s.inBackground { try s.call("POST", "/v1/queues/q/visitors?wait=30", #"{"id": "w"}"#) }
        s.untilParked(1)
        #expect(s.server.suspendedRequests == 1)
        let started = Date()
        #expect(s.shutdown())
        #expect(Date().timeIntervalSince(started) < 5)
        let r = try #require(response())
        #expect(r.status == 503)
        #expect(r.code == "shutting_down")
    }

    @Test func bearerTokenGuardsV1Only() throws {
        let s = try LiveServer(#"{"auth_token": "s3cret", "queues": {"q": {}}}"#)
        #expect(try s.call("GET", "/v1/queues").status == 401)
        #expect(try s.call("GET", "/v1/queues", headers: ["Authorization": "Bearer wrong"]).code == "unauthorized")
        #expect(try s.call("GET", "/v1/queues", headers: ["Authorization": "Bearer s3cret"]).status == 200)
        #expect(try s.call("GET", "/healthz").status == 200)
        #expect(try s.call("GET", "/readyz").status == 200)
    }
}
