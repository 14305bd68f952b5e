import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import Locking
@testable import UsherAPI

extension OneAtATime {
    /// The queue routes live, each test once with memory queues and once with
    /// queues kept in a redis-server of the test's own (`BackendLiveServer`).
    @Suite(.serialized) struct QueueLiveTests {
        static let both = TestBackend.both

        @Test func healthAndReadiness() throws {
            let s = try AppTester()
            #expect(try s.call("GET", "/healthz").status == 200)
            #expect(try s.call("GET", "/readyz").status == 200)
            let root = try s.call("GET", "/v1")
            #expect(root.status == 200)
            #expect(
                (root.json["kinds"] as? [[String: Any]])?.map { $0["kind"] as? String } == [
                    "queues", "windows", "pools", "pipelines", "machines",
                ])
        }

        @Test(arguments: both) func lifecycle(_ backend: TestBackend) async throws {
            let s = try await BackendLiveServer(backend)
            let created = try await s.call("PUT", "/v1/queues/jobs", s.put(#"{"capacity": 2}"#))
            #expect(created.status == 201)
            #expect(created.headers["content-type"] == "application/json; charset=utf-8")
            #expect((created.json["config"] as? [String: Any])?["capacity"] as? Int == 2)
            // Same config again (defaults filled in): 200.
            #expect(
                try await s.call("PUT", "/v1/queues/jobs", s.put(#"{"capacity": 2, "hold_seconds": 30}"#)).status == 200
            )
            // A different config: 409 already_exists.
            let clash = try await s.call("PUT", "/v1/queues/jobs", s.put(#"{"capacity": 3}"#))
            #expect(clash.status == 409)
            #expect(clash.code == "already_exists")
            #expect(clash.headers["content-type"] == "application/problem+json")
            #expect(clash.json["type"] as? String == "urn:usher:error:already_exists")
            let list = try await s.call("GET", "/v1/queues")
            #expect((list.json["queues"] as? [[String: Any]])?.first?["name"] as? String == "jobs")
            if backend == .redis {
                #expect((list.json["queues"] as? [[String: Any]])?.first?["backend"] as? String == "redis")
            }
            let patched = try await s.call("PATCH", "/v1/queues/jobs", #"{"capacity": 5}"#)
            #expect(patched.status == 200)
            #expect((patched.json["config"] as? [String: Any])?["capacity"] as? Int == 5)
            #expect(try await s.call("DELETE", "/v1/queues/jobs").status == 204)
            #expect(try await s.call("GET", "/v1/queues/jobs").status == 404)
            #expect(try await s.call("DELETE", "/v1/queues/jobs").status == 404)
        }

        @Test(arguments: both) func badInputIsRejectedAndLosesNothing(_ backend: TestBackend) async throws {
            let s = try await BackendApp(backend, #"{"queues": {"q": {}}}"#)
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
                let r = try await s.call(method, path, method == "PUT" ? body.map(s.put) : body)
                #expect(r.status == 400, "\(method) \(path) \(body ?? "")")
                #expect(r.code == "bad_request")
                #expect((r.json["detail"] as? String)?.contains(mention) == true, "\(r.text) should mention \(mention)")
            }
            // Nothing was created or enqueued by the bad requests.
            let state = try await s.call("GET", "/v1/queues/q")
            #expect((state.json["counts"] as? [String: Any])?["enqueued_total"] as? Int == 0)
            #expect(try await s.call("GET", "/v1/queues/new").status == 404)
        }

        @Test(arguments: both) func notFoundAndMethodNotAllowed(_ backend: TestBackend) async throws {
            let s = try await BackendApp(backend, #"{"queues": {"q": {}}}"#)
            #expect(try await s.call("GET", "/v1/nothing").status == 404)
            #expect(try await s.call("GET", "/v1/queues/none").code == "not_found")
            #expect(try await s.call("GET", "/v1/queues/q/visitors/nobody").status == 404)
            #expect(try await s.call("POST", "/v1/queues/q/visitors/nobody/complete").status == 404)
            let r = try await s.call("POST", "/v1/queues/q")
            #expect(r.status == 405)
            #expect(r.code == "method_not_allowed")
            #expect(r.headers["allow"] == "DELETE, GET, HEAD, PATCH, PUT")
        }

        @Test(arguments: both) func bodyOverLimitIs413(_ backend: TestBackend) async throws {
            let s = try await BackendApp(backend, #"{"max_body_bytes": 1000, "queues": {"q": {}}}"#)
            let big = #"{"payload": ""# + String(repeating: "x", count: 2000) + #""}"#
            let r = try await s.call("POST", "/v1/queues/q/visitors", big)
            #expect(r.status == 413)
            #expect(r.code == "payload_too_large")
            #expect(try await s.call("POST", "/v1/queues/q/visitors", #"{"payload": "small"}"#).status == 201)
        }

        @Test(arguments: both) func visitorRoundTrip(_ backend: TestBackend) async throws {
            let s = try await BackendLiveServer(backend, #"{"queues": {"q": {"capacity": 1}}}"#)
            let c = s.keepAlive()
            let a = try await c.request("POST", "/v1/queues/q/visitors", body: #"{"id": "a", "payload": {"n": 1}}"#)
            #expect(a.status == 201)
            #expect(a.json["status"] as? String == "granted")
            #expect(a.json["fence"] is Int)
            let b = try await c.request("POST", "/v1/queues/q/visitors", body: #"{"id": "b"}"#)
            #expect(b.json["status"] as? String == "waiting")
            #expect(b.json["position"] as? Int == 1)
            // A retried POST with an existing id returns it with 200.
            let again = try await c.request("POST", "/v1/queues/q/visitors", body: #"{"id": "b"}"#)
            #expect(again.status == 200)
            #expect(again.json["id"] as? String == "b")
            // b cannot complete: it does not hold a slot.
            let notGranted = try await c.request("POST", "/v1/queues/q/visitors/b/complete")
            #expect(notGranted.status == 409)
            #expect(notGranted.code == "not_granted")
            #expect(notGranted.json["current_status"] as? String == "waiting")
            let done = try await c.request("POST", "/v1/queues/q/visitors/a/complete")
            #expect(done.json["status"] as? String == "completed")
            let bNow = try await c.request("GET", "/v1/queues/q/visitors/b")
            #expect(bNow.json["status"] as? String == "granted")
            #expect((bNow.json["fence"] as? Int ?? 0) > (a.json["fence"] as? Int ?? Int.max))
            let extended = try await c.request("POST", "/v1/queues/q/visitors/b/extend", body: #"{"hold_seconds": 5}"#)
            #expect(extended.status == 200)
            let released = try await c.request("DELETE", "/v1/queues/q/visitors/b")
            #expect(released.json["status"] as? String == "released")
            let state = try await c.request("GET", "/v1/queues/q")
            let counts = try #require(state.json["counts"] as? [String: Any])
            #expect(counts["enqueued_total"] as? Int == 2)
            #expect(counts["completed_total"] as? Int == 1)
            #expect(counts["released_total"] as? Int == 1)
        }

        @Test(arguments: both) func extendNeverShortensAHold(_ backend: TestBackend) async throws {
            let s = try await BackendApp(backend, #"{"queues": {"q": {"hold_seconds": 60}}}"#)
            let granted = try await s.call("POST", "/v1/queues/q/visitors", #"{"id": "a"}"#)
            let expiresAt = try #require(granted.json["expires_at"] as? String)
            let shorter = try await s.call("POST", "/v1/queues/q/visitors/a/extend", #"{"hold_seconds": 1}"#)
            #expect(shorter.status == 200)
            #expect(shorter.json["expires_at"] as? String == expiresAt)
            let longer = try await s.call("POST", "/v1/queues/q/visitors/a/extend", #"{"hold_seconds": 60}"#)
            #expect(try #require(longer.json["expires_at"] as? String) >= expiresAt)
        }

        @Test(arguments: both) func mergedAndCancelledVisitorsAnswer200(_ backend: TestBackend) async throws {
            let s = try await BackendApp(
                backend, #"{"queues": {"q": {"capacity": 0, "opposites": [["like", "unlike"]]}}}"#)
            let first = try await s.call("POST", "/v1/queues/q/visitors", #"{"id": "a", "key": "k", "action": "like"}"#)
            #expect(first.status == 201)
            #expect(first.json["status"] as? String == "waiting")
            let merged = try await s.call(
                "POST", "/v1/queues/q/visitors", #"{"id": "b", "key": "k", "action": "like"}"#)
            #expect(merged.json["merged_into"] as? String == "a")
            #expect(merged.status == 200)
            let cancelled = try await s.call(
                "POST", "/v1/queues/q/visitors", #"{"id": "c", "key": "k", "action": "unlike"}"#)
            #expect(cancelled.json["cancelled_with"] as? String == "a")
            #expect(cancelled.status == 200)
            // With wait the answer comes at once, and the same way.
            _ = try await s.call("POST", "/v1/queues/q/visitors", #"{"id": "d", "key": "k", "action": "like"}"#)
            let waited = try await s.call(
                "POST", "/v1/queues/q/visitors?wait=5", #"{"id": "e", "key": "k", "action": "like"}"#)
            #expect(waited.json["status"] as? String == "merged")
            #expect(waited.status == 200)
        }

        @Test(arguments: both) func fullQueueIs429WithRetryAfter(_ backend: TestBackend) async throws {
            let s = try await BackendApp(backend, #"{"queues": {"q": {"capacity": 1, "max_waiting": 1}}}"#)
            #expect(try await s.call("POST", "/v1/queues/q/visitors", "{}").status == 201)
            #expect(try await s.call("POST", "/v1/queues/q/visitors", "{}").status == 201)
            let full = try await s.call("POST", "/v1/queues/q/visitors", "{}")
            #expect(full.status == 429)
            #expect(full.code == "queue_full")
            #expect(Int(full.headers["retry-after"] ?? "") != nil)
        }

        @Test(arguments: both) func tooManyResourcesIs429(_ backend: TestBackend) async throws {
            let s = try await BackendApp(backend, #"{"max_resources": 2, "queues": {"a": {}}}"#)
            #expect(try await s.call("PUT", "/v1/queues/b", s.put("{}")).status == 201)
            let r = try await s.call("PUT", "/v1/queues/c", s.put("{}"))
            #expect(r.status == 429)
            #expect(r.code == "too_many_resources")
        }

        @Test(arguments: both) func longPollWakesOnComplete(_ backend: TestBackend) async throws {
            let s = try await BackendApp(backend, #"{"queues": {"q": {"capacity": 1}}}"#)
            let holder = try await s.call("POST", "/v1/queues/q/visitors", #"{"id": "h"}"#)
            #expect(holder.json["status"] as? String == "granted")
            let started = Date()
            let response = s.start("POST", "/v1/queues/q/visitors?wait=10", #"{"id": "w"}"#)
            // Wait until w is parked, then free the slot.
            await s.untilParked(1)
            #expect(await s.untilVisitor("q", "w")?.json["status"] as? String == "waiting")
            #expect(try await s.call("POST", "/v1/queues/q/visitors/h/complete").status == 200)
            let r = try await response.value
            #expect(r.status == 201)
            #expect(r.json["status"] as? String == "granted")
            #expect(Date().timeIntervalSince(started) < 5)
        }

        @Test(arguments: both) func getWaitTimesOutWithUnchangedVisitor(_ backend: TestBackend) async throws {
            let s = try await BackendApp(backend, #"{"queues": {"q": {"capacity": 0}}}"#)
            _ = try await s.call("POST", "/v1/queues/q/visitors", #"{"id": "w"}"#)
            let started = Date()
            let r = try await s.call("GET", "/v1/queues/q/visitors/w?wait=0.3")
            #expect(r.status == 200)
            #expect(r.json["status"] as? String == "waiting")
            #expect(Date().timeIntervalSince(started) >= 0.25)
        }

        @Test(arguments: both) func waitersOfADeletedQueueGet410(_ backend: TestBackend) async throws {
            let s = try await BackendApp(backend, #"{"queues": {"q": {"capacity": 0}}}"#)
            let response = s.start("POST", "/v1/queues/q/visitors?wait=10", #"{"id": "w"}"#)
            await s.untilParked(1)
            #expect(await s.untilVisitor("q", "w")?.status == 200)
            #expect(try await s.call("DELETE", "/v1/queues/q").status == 204)
            let r = try await response.value
            #expect(r.status == 410)
            #expect(r.code == "gone")
        }

        @Test(arguments: both) func concurrentClientsNeverExceedCapacity(_ backend: TestBackend) async throws {
            let capacity = 3
            let s = try await BackendLiveServer(
                backend, #"{"queues": {"q": {"capacity": \#(capacity), "max_waiting": 10000}}}"#)
            let clients = 200
            let holding = Locked(0)
            let maxSeen = Locked(0)
            let failures = Locked<[String]>([])
            let group = DispatchGroup()
            for i in 0..<clients {
                group.enter()
                Thread {
                    defer { group.leave() }
                    let c = s.live.client()
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
            #expect(try await onThread { group.wait(timeout: .now() + 60) } == .success)
            #expect(failures.withLock { $0 } == [])
            #expect(maxSeen.withLock { $0 } <= capacity)
            let counts = try #require(try await s.call("GET", "/v1/queues/q").json["counts"] as? [String: Any])
            #expect(counts["completed_total"] as? Int == clients)
            #expect(counts["granted_total"] as? Int == clients)
            #expect(counts["holding"] as? Int == 0)
        }

        @Test(arguments: both) func shutdownAnswersParkedRequests503(_ backend: TestBackend) async throws {
            let s = try await BackendApp(backend, #"{"queues": {"q": {"capacity": 0}}}"#)
            let response = s.start("POST", "/v1/queues/q/visitors?wait=30", #"{"id": "w"}"#)
            await s.untilParked(1)
            _ = await s.untilVisitor("q", "w")
            #expect(await poll(5) { s.suspendedRequests == 1 })
            let started = Date()
            #expect(s.shutdown())
            #expect(Date().timeIntervalSince(started) < 5)
            let r = try await response.value
            #expect(r.status == 503)
            #expect(r.code == "shutting_down")
        }

        @Test func bearerTokenGuardsV1Only() throws {
            let s = try AppTester(#"{"auth_token": "s3cret", "queues": {"q": {}}}"#)
            #expect(try s.call("GET", "/v1/queues").status == 401)
            #expect(try s.call("GET", "/v1/queues", headers: ["Authorization": "Bearer wrong"]).code == "unauthorized")
            #expect(try s.call("GET", "/v1/queues", headers: ["Authorization": "Bearer s3cret"]).status == 200)
            #expect(try s.call("GET", "/healthz").status == 200)
            #expect(try s.call("GET", "/readyz").status == 200)
        }
    }
}
