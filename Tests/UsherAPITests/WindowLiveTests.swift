import Foundation
import HTTPTestClient
import Testing

@testable import UsherAPI

/// Windows over HTTP: every route and error code (docs/api.md, Windows), each test once
/// with memory windows and once with windows kept in a redis-server of the
/// test's own (`BackendLiveServer`).
@Suite(.serialized) struct WindowLiveTests {
    static let both = TestBackend.both

    @Test(arguments: both) func lifecycle(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend)
        let created = try await s.call("PUT", "/v1/windows/alerts", s.put(#"{"display_seconds": 5}"#))
        #expect(created.status == 201)
        #expect((created.json["config"] as? [String: Any])?["max_waiting"] as? Int == 1000)
        #expect(created.json["showing"] is NSNull && (created.json["queued"] as? [Any])?.isEmpty == true)
        #expect(
            try await s.call("PUT", "/v1/windows/alerts", s.put(#"{"display_seconds": 5, "dedup": "off"}"#)).status
                == 200)
        #expect(
            try await s.call("PUT", "/v1/windows/alerts", s.put(#"{"display_seconds": 6}"#)).code == "already_exists")
        let list = try await s.call("GET", "/v1/windows")
        #expect((list.json["windows"] as? [[String: Any]])?.first?["name"] as? String == "alerts")
        if backend == .redis {
            #expect((list.json["windows"] as? [[String: Any]])?.first?["backend"] as? String == "redis")
        }
        let patched = try await s.call("PATCH", "/v1/windows/alerts", #"{"display_seconds": 0, "max_waiting": 2}"#)
        #expect((patched.json["config"] as? [String: Any])?["max_waiting"] as? Int == 2)
        #expect(try await s.call("PATCH", "/v1/windows/alerts", #"{"capacity": 2}"#).code == "bad_request")
        #expect(try await s.call("GET", "/v1/windows/alerts").status == 200)
        #expect(try await s.call("DELETE", "/v1/windows/alerts").status == 204)
        #expect(try await s.call("GET", "/v1/windows/alerts").status == 404)
        #expect(try await s.call("DELETE", "/v1/windows/alerts").status == 404)
        #expect(try await s.call("POST", "/v1/windows/alerts/show", "{}").status == 404)
    }

    @Test(arguments: both) func showDismissAndState(_ backend: TestBackend) async throws {
        let s = try await BackendLiveServer(backend, #"{"windows": {"alerts": {"dedup": "key"}}}"#)
        let c = s.keepAlive()
        let a = try await c.request(
            "POST", "/v1/windows/alerts/show",
            body: #"{"id": "a", "title": "Hi", "message": "there", "payload": {"n": 1}}"#)
        #expect(a.status == 201)
        #expect(a.json["status"] as? String == "showing" && a.json["title"] as? String == "Hi")
        #expect(a.json["fence"] is Int && a.json["position"] == nil)
        let b = try await c.request("POST", "/v1/windows/alerts/show", body: #"{"id": "b", "key": "city"}"#)
        #expect(b.status == 201 && b.json["status"] as? String == "queued" && b.json["position"] as? Int == 1)
        let merged = try await c.request("POST", "/v1/windows/alerts/show", body: #"{"id": "m", "key": "city"}"#)
        #expect(
            merged.status == 200 && merged.json["status"] as? String == "merged"
                && merged.json["merged_into"] as? String == "b")
        let again = try await c.request("POST", "/v1/windows/alerts/show", body: #"{"id": "a"}"#)
        #expect(again.status == 200 && again.json["status"] as? String == "showing")
        let state = try await c.request("GET", "/v1/windows/alerts")
        #expect((state.json["showing"] as? [String: Any])?["id"] as? String == "a")
        #expect((state.json["queued"] as? [[String: Any]])?.map { $0["id"] as? String } == ["b"])
        let counts = try #require(state.json["counts"] as? [String: Any])
        #expect(
            counts["received_total"] as? Int == 3 && counts["merged_total"] as? Int == 1
                && counts["showing"] as? Int == 1)
        #expect(try await c.request("GET", "/v1/windows/alerts?limit=0").json["queued"] as? [Any] != nil)

        let dismissed = try await c.request("POST", "/v1/windows/alerts/dismiss")
        #expect(dismissed.status == 200)
        #expect(dismissed.json["id"] as? String == "a" && dismissed.json["status"] as? String == "dismissed")
        #expect((dismissed.json["showing"] as? [String: Any])?["id"] as? String == "b")
        let byID = try await c.request("POST", "/v1/windows/alerts/dismiss", body: #"{"id": "b"}"#)
        #expect(byID.json["id"] as? String == "b" && byID.json["showing"] is NSNull)
        let nothing = try await c.request("POST", "/v1/windows/alerts/dismiss", body: "{}")
        #expect(nothing.status == 409 && nothing.code == "nothing_showing")
        let unknown = try await c.request("POST", "/v1/windows/alerts/dismiss", body: #"{"id": "nope"}"#)
        #expect(unknown.status == 404 && unknown.code == "not_found")
        let showing = try await c.request("GET", "/v1/windows/alerts/showing")
        #expect(showing.status == 204 && showing.text.isEmpty)
    }

    @Test(arguments: both) func badInputIs400(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, #"{"windows": {"w": {}}}"#)
        let cases: [(String, String, String?, String)] = [
            ("POST", "/v1/windows/w/show", #"{"titel": "x"}"#, "titel"),
            ("POST", "/v1/windows/w/show", #"{"display_seconds": -1}"#, "display_seconds"),
            ("POST", "/v1/windows/w/show", #"{"id": "bad id"}"#, "id"),
            ("POST", "/v1/windows/w/show?wait=1", "{}", "wait"),
            ("POST", "/v1/windows/w/dismiss", #"{"id": 7}"#, "id"),
            ("GET", "/v1/windows/w/showing?wiat=1", nil, "wiat"),
            ("GET", "/v1/windows/w/showing?after=bad%20id", nil, "after"),
            ("PUT", "/v1/windows/new", #"{"dedup": "sometimes"}"#, "dedup"),
        ]
        for (method, path, body, mention) in cases {
            let r = try await s.call(method, path, body)
            #expect(r.status == 400 && r.code == "bad_request", "\(method) \(path)")
            #expect((r.json["detail"] as? String)?.contains(mention) == true, "\(r.text) should mention \(mention)")
        }
    }

    @Test(arguments: both) func queueFullIs429(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, #"{"windows": {"w": {"max_waiting": 1}}}"#)
        #expect(try await s.call("POST", "/v1/windows/w/show", "{}").status == 201)
        #expect(try await s.call("POST", "/v1/windows/w/show", "{}").status == 201)
        let full = try await s.call("POST", "/v1/windows/w/show", "{}")
        #expect(full.status == 429 && full.code == "queue_full" && full.headers["retry-after"] != nil)
    }

    @Test(arguments: both) func showingLongPollIsWokenByTheDismissWithTheNextItem(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, #"{"windows": {"w": {}}}"#)
        _ = try await s.call("POST", "/v1/windows/w/show", #"{"id": "login", "display_seconds": 0}"#)
        _ = try await s.call("POST", "/v1/windows/w/show", #"{"id": "alert"}"#)
        let started = Date()
        let response = s.start("GET", "/v1/windows/w/showing?after=login&wait=10")
        await s.untilParked(1)
        #expect(s.suspendedRequests == 1)
        #expect(try await s.call("POST", "/v1/windows/w/dismiss", #"{"id": "login"}"#).status == 200)
        let r = try await response.value
        #expect(r.status == 200 && r.json["id"] as? String == "alert")
        #expect(Date().timeIntervalSince(started) < 5)
    }

    @Test(arguments: both) func showingWithoutAfterWaitsForSomething(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, #"{"windows": {"w": {}}}"#)
        let response = s.start("GET", "/v1/windows/w/showing?wait=10")
        await s.untilParked(1)
        _ = try await s.call("POST", "/v1/windows/w/show", #"{"id": "first"}"#)
        let r = try await response.value
        #expect(r.json["id"] as? String == "first")
        // Something shows: it answers at once.
        let now = try await s.call("GET", "/v1/windows/w/showing?wait=10")
        #expect(now.json["id"] as? String == "first")
    }

    @Test(arguments: both) func autoDismissShowsTheNextAndAWaitTimesOut(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, #"{"windows": {"w": {"display_seconds": 0.2}}}"#)
        _ = try await s.call("POST", "/v1/windows/w/show", #"{"id": "a"}"#)
        _ = try await s.call("POST", "/v1/windows/w/show", #"{"id": "b", "display_seconds": 0}"#)
        let r = try await s.call("GET", "/v1/windows/w/showing?after=a&wait=5")
        #expect(r.json["id"] as? String == "b")
        let a = try await s.call("POST", "/v1/windows/w/dismiss", #"{"id": "a"}"#)
        #expect(a.json["status"] as? String == "expired")
        let started = Date()
        let timedOut = try await s.call("GET", "/v1/windows/w/showing?after=b&wait=0.3")
        #expect(timedOut.json["id"] as? String == "b")
        #expect(Date().timeIntervalSince(started) >= 0.25)
    }

    @Test(arguments: both) func waitersOfADeletedWindowGet410AndShutdown503(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, #"{"windows": {"w": {}, "v": {}}}"#)
        let deleted = s.start("GET", "/v1/windows/w/showing?wait=10")
        let stopping = s.start("GET", "/v1/windows/v/showing?wait=10")
        await s.untilParked(2)
        #expect(try await s.call("DELETE", "/v1/windows/w").status == 204)
        let gone = try await deleted.value
        #expect(gone.status == 410 && gone.code == "gone")
        #expect(s.shutdown())
        let r = try await stopping.value
        #expect(r.status == 503 && r.code == "shutting_down")
    }

    @Test func declaredWindowsAreCheckedAtStartUp() throws {
        #expect(throws: (any Error).self) { try AppTester(#"{"windows": {"w": {"display_secs": 1}}}"#) }
    }
}
