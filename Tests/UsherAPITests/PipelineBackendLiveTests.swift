import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import UsherAPI

/// The pipeline routes live, each test once with memory pipelines and once
/// with pipelines kept in a redis-server of the test's own (`BackendLiveServer`).
@Suite(.serialized, .timeLimit(.minutes(2))) struct PipelineBackendLiveTests {
    static let both = TestBackend.both

    @Test(arguments: both) func lifecycle(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend)
        let created = try await s.call("PUT", "/v1/pipelines/p", s.put(#"{"capacity": 10, "max_in_flight": 2}"#))
        #expect(created.status == 201)
        #expect(created.json["capacity"] as? Int == 10)
        let config = try #require(created.json["config"] as? [String: Any])
        #expect(config["ack_seconds"] as? Int == 30)
        let same = #"{"capacity": 10, "max_in_flight": 2, "ack_seconds": 30}"#
        #expect(try await s.call("PUT", "/v1/pipelines/p", s.put(same)).status == 200)
        #expect(try await s.call("PUT", "/v1/pipelines/p", s.put(#"{"capacity": 11}"#)).code == "already_exists")
        // Filters added later do not count when comparing.
        #expect(try await s.call("PUT", "/v1/pipelines/p/filters/f", #"{"action": "drop"}"#).status == 201)
        #expect(try await s.call("GET", "/v1/pipelines/p/filters/f").json["action"] as? String == "drop")
        #expect(try await s.call("PUT", "/v1/pipelines/p", s.put(same)).status == 200)
        #expect(try await s.call("DELETE", "/v1/pipelines/p/filters/f").status == 204)
        #expect(try await s.call("DELETE", "/v1/pipelines/p/filters/f").status == 404)

        let list = try await s.call("GET", "/v1/pipelines")
        let summary = try #require((list.json["pipelines"] as? [[String: Any]])?.first)
        #expect(summary["name"] as? String == "p" && summary["capacity"] as? Int == 10)
        #expect(summary["backend"] as? String == (backend == .redis ? "redis" : nil))

        for i in 0..<3 {
            #expect(try await s.call("POST", "/v1/pipelines/p/items", #"{"payload": \#(i)}"#).status == 201)
        }
        let first = try await s.call("GET", "/v1/pipelines/p?limit=2")
        #expect((first.json["items"] as? [[String: Any]])?.count == 2 && first.counts["ready"] as? Int == 3)
        let cursor = try #require(first.json["next_cursor"] as? String)
        let rest = try await s.call("GET", "/v1/pipelines/p?limit=2&cursor=\(cursor)")
        #expect((rest.json["items"] as? [[String: Any]])?.map { $0["payload"] as? Int } == [2])

        let patched = try await s.call("PATCH", "/v1/pipelines/p", #"{"capacity": 20, "ack_seconds": 0.5}"#)
        #expect(patched.status == 200)
        #expect((patched.json["config"] as? [String: Any])?["ack_seconds"] as? Double == 0.5)
        #expect(try await s.call("DELETE", "/v1/pipelines/p").status == 204)
        #expect(try await s.call("GET", "/v1/pipelines/p").status == 404)
        #expect(try await s.call("DELETE", "/v1/pipelines/p").status == 404)
    }

    @Test(arguments: both) func pushTakeConsumeRelease(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, #"{"pipelines": {"p": {"capacity": 10, "max_in_flight": 2}}}"#)
        let a = try await s.call("POST", "/v1/pipelines/p/items", #"{"id": "a", "payload": {"n": 12345678901234567}}"#)
        #expect(a.status == 201 && a.json["status"] as? String == "ready")
        #expect(a.body == (try await s.call("GET", "/v1/pipelines/p/items/a")).body)
        let again = try await s.call("POST", "/v1/pipelines/p/items", #"{"id": "a", "payload": 99}"#)
        #expect(again.status == 200 && again.text.contains("12345678901234567"))
        _ = try await s.call("POST", "/v1/pipelines/p/items", #"{"id": "b", "payload": "urgent", "priority": 5}"#)
        let d = try await s.call("POST", "/v1/pipelines/p/items", #"{"id": "d", "payload": null, "delay_seconds": 60}"#)
        #expect(d.json["status"] as? String == "delayed")
        #expect(
            try await s.call("POST", "/v1/pipelines/p/items/a/consume").json["current_status"] as? String == "ready")

        let taken = try await s.call("POST", "/v1/pipelines/p/take?max=5")
        let items = taken.json["items"] as? [[String: Any]] ?? []
        #expect(items.map { $0["id"] as? String } == ["b", "a"])
        let fenceB = try #require(items.first?["fence"] as? Int)
        #expect((items.last?["fence"] as? Int ?? 0) > fenceB)
        #expect(try await s.call("POST", "/v1/pipelines/p/take").status == 204)
        #expect(try await s.call("DELETE", "/v1/pipelines/p/items/a").code == "in_flight")
        let stale = try await s.call("POST", "/v1/pipelines/p/items/b/consume", #"{"fence": \#(fenceB - 1)}"#)
        #expect(stale.code == "not_in_flight")
        let consumed = try await s.call("POST", "/v1/pipelines/p/items/b/consume", #"{"fence": \#(fenceB)}"#)
        #expect(consumed.json["status"] as? String == "consumed")
        #expect(
            try await s.call("POST", "/v1/pipelines/p/items/b/release").json["current_status"] as? String == "consumed")
        #expect(try await s.call("POST", "/v1/pipelines/p/items/a/release").json["status"] as? String == "ready")
        let next = try await s.call("POST", "/v1/pipelines/p/take")
        #expect((next.json["items"] as? [[String: Any]])?.first?["deliveries"] as? Int == 2)
        #expect(try await s.call("DELETE", "/v1/pipelines/p/items/d").json["status"] as? String == "cancelled")
        let state = try await s.call("GET", "/v1/pipelines/p")
        let counts = state.json["counts"] as? [String: Any] ?? [:]
        #expect(counts["pushed_total"] as? Int == 3 && counts["delivered_total"] as? Int == 3)
        #expect(counts["consumed_total"] as? Int == 1 && counts["cancelled_total"] as? Int == 1)
        #expect(counts["deduplicated_total"] as? Int == 1)
    }

    @Test(arguments: both) func fullIs429AndAHeldProducerGetsIn(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, #"{"pipelines": {"p": {"capacity": 2}}}"#)
        let batch = #"{"items": [{"id": "a", "payload": 1}, {"id": "b", "payload": 2}]}"#
        #expect(try await s.call("POST", "/v1/pipelines/p/items/batch", batch).status == 201)
        #expect(try await s.call("POST", "/v1/pipelines/p/items/batch", batch).status == 200)
        let full = try await s.call("POST", "/v1/pipelines/p/items", #"{"payload": 3}"#)
        #expect(full.status == 429 && full.code == "pipeline_full" && full.headers["retry-after"] == "1")
        let tooMany = #"{"items": [{"payload": 1}, {"payload": 2}, {"payload": 3}]}"#
        #expect(try await s.call("POST", "/v1/pipelines/p/items/batch", tooMany).status == 400)
        let held = s.start("POST", "/v1/pipelines/p/items?wait=5", #"{"id": "c", "payload": 3}"#)
        try await Task.sleep(for: .milliseconds(100))
        let taken = try await s.call("POST", "/v1/pipelines/p/take")
        let id = try #require((taken.json["items"] as? [[String: Any]])?.first?["id"] as? String)
        #expect(try await s.call("POST", "/v1/pipelines/p/items/\(id)/consume").status == 200)
        let pushed = try await held.value
        #expect(pushed.status == 201 && pushed.json["id"] as? String == "c")
        // A held producer whose wait passes gets 429.
        let late = try await s.call("POST", "/v1/pipelines/p/items?wait=0.2", #"{"payload": 4}"#)
        #expect(late.status == 429)
    }

    @Test(arguments: both) func aPushWakesAWaitingConsumerAndAnEmptyWaitIs204(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, #"{"pipelines": {"p": {}}}"#)
        let started = Date()
        #expect(try await s.call("POST", "/v1/pipelines/p/take?wait=0.3").status == 204)
        #expect(Date().timeIntervalSince(started) >= 0.25)
        let waiting = s.start("POST", "/v1/pipelines/p/take?wait=5")
        try await Task.sleep(for: .milliseconds(100))
        _ = try await s.call("POST", "/v1/pipelines/p/items", #"{"id": "x", "payload": 1}"#)
        let answer = try await waiting.value
        #expect(answer.status == 200)
        #expect((answer.json["items"] as? [[String: Any]])?.first?["id"] as? String == "x")
    }

    @Test(arguments: both) func unackedItemsComeBackThenDieAndAreRedriven(_ backend: TestBackend) async throws {
        let s = try await BackendApp(
            backend, #"{"pipelines": {"p": {"ack_seconds": 0.2, "max_deliveries": 2}}}"#)
        _ = try await s.call("POST", "/v1/pipelines/p/items", #"{"id": "a", "payload": 1}"#)
        #expect(try await s.call("POST", "/v1/pipelines/p/take").status == 200)
        // Redelivered by the timer, with no request in between.
        let again = try await s.call("POST", "/v1/pipelines/p/take?wait=2")
        #expect((again.json["items"] as? [[String: Any]])?.first?["deliveries"] as? Int == 2)
        #expect(await poll(3) { (try? await s.call("GET", "/v1/pipelines/p").counts["dead"] as? Int) == 1 })
        let dead = try await s.call("GET", "/v1/pipelines/p/dead")
        #expect((dead.json["items"] as? [[String: Any]])?.first?["status"] as? String == "dead")
        let redriven = try await s.call("POST", "/v1/pipelines/p/dead/redrive")
        #expect(redriven.json["moved"] as? Int == 1 && redriven.json["dead"] as? Int == 0)
        let counts = try await s.call("GET", "/v1/pipelines/p").json["counts"] as? [String: Any]
        #expect(counts?["redelivered_total"] as? Int == 1 && counts?["dead_total"] as? Int == 1)
    }

    @Test(arguments: both) func filtersDropAndChangeWhatIsDelivered(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, #"{"pipelines": {"p": {"max_in_flight": 10}}}"#)
        let drop = #"{"priority": 2, "when": {"field": "/type", "equals": "hb"}, "action": "drop"}"#
        #expect(try await s.call("PUT", "/v1/pipelines/p/filters/hb", drop).status == 201)
        let tag = #"{"action": "set", "field": "/by", "value": "usher"}"#
        #expect(try await s.call("PUT", "/v1/pipelines/p/filters/tag", tag).status == 201)
        for (i, type) in ["hb", "job", "hb", "job"].enumerated() {
            _ = try await s.call("POST", "/v1/pipelines/p/items", #"{"id": "i\#(i)", "payload": {"type": "\#(type)"}}"#)
        }
        let taken = try await s.call("POST", "/v1/pipelines/p/take?max=10")
        let items = taken.json["items"] as? [[String: Any]] ?? []
        #expect(items.map { $0["id"] as? String } == ["i1", "i3"])
        #expect((items.first?["payload"] as? [String: Any])?["by"] as? String == "usher")
        let counts = try await s.call("GET", "/v1/pipelines/p").json["counts"] as? [String: Any]
        #expect(counts?["filtered_total"] as? Int == 2)
    }

    @Test(arguments: both) func extendDedupAndPause(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, #"{"pipelines": {"p": {"ack_seconds": 10, "dedup_seconds": 60}}}"#)
        _ = try await s.call("POST", "/v1/pipelines/p/items", #"{"id": "a", "payload": 1}"#)
        let taken = try await s.call("POST", "/v1/pipelines/p/take", #"{"ack_seconds": 2}"#)
        let item = try #require((taken.json["items"] as? [[String: Any]])?.first)
        let extended = try await s.call("POST", "/v1/pipelines/p/items/a/extend", #"{"ack_seconds": 8}"#)
        #expect(extended.status == 200)
        #expect((extended.json["ack_deadline"] as? String ?? "") > (item["ack_deadline"] as? String ?? "~"))
        #expect(try await s.call("POST", "/v1/pipelines/p/items/a/consume").status == 200)
        // A retried push answers the consumed item within dedup_seconds.
        let retried = try await s.call("POST", "/v1/pipelines/p/items", #"{"id": "a", "payload": 1}"#)
        #expect(retried.status == 200 && retried.json["status"] as? String == "consumed")
        #expect(try await s.call("PATCH", "/v1/pipelines/p", #"{"paused": true}"#).json["paused"] as? Bool == true)
        _ = try await s.call("POST", "/v1/pipelines/p/items", #"{"id": "b", "payload": 2}"#)
        #expect(try await s.call("POST", "/v1/pipelines/p/take").status == 204)
        let waiting = s.start("POST", "/v1/pipelines/p/take?wait=5")
        try await Task.sleep(for: .milliseconds(100))
        _ = try await s.call("PATCH", "/v1/pipelines/p", #"{"paused": false}"#)
        #expect((try await waiting.value.json["items"] as? [[String: Any]])?.first?["id"] as? String == "b")
    }

    @Test(arguments: both) func badInputIsRejectedAndLosesNothing(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, #"{"pipelines": {"p": {"capacity": 3}}}"#)
        let cases: [(String, String, String?, String)] = [
            ("POST", "/v1/pipelines/p/items", "{not json", "malformed"),
            ("POST", "/v1/pipelines/p/items", #"{"paylod": 1}"#, "payload"),
            ("POST", "/v1/pipelines/p/items", #"{"payload": 1, "prio": 1}"#, "prio"),
            ("POST", "/v1/pipelines/p/items", #"{"payload": 1, "priority": 9999999}"#, "priority"),
            ("POST", "/v1/pipelines/p/items", #"{"payload": 1, "id": "bad id"}"#, "id"),
            ("POST", "/v1/pipelines/p/items", #"{"payload": 1, "delay_seconds": -1}"#, "delay_seconds"),
            ("POST", "/v1/pipelines/p/items/batch", #"{"items": [{"payload": 1}, {"id": "x y", "payload": 2}]}"#, "id"),
            ("POST", "/v1/pipelines/p/take?max=0", nil, "max"),
            ("POST", "/v1/pipelines/p/take", #"{"ack_seconds": -2}"#, "ack_seconds"),
            ("PUT", "/v1/pipelines/p/filters/f", #"{"action": "explode"}"#, "action"),
            ("PATCH", "/v1/pipelines/p", #"{"capacity": 0}"#, "capacity"),
            ("PUT", "/v1/pipelines/new", #"{"capacty": 3}"#, "capacty"),
        ]
        for (method, path, body, mention) in cases {
            let r = try await s.call(
                method, path, method == "PUT" && !path.contains("filters") ? body.map(s.put) : body)
            #expect(r.status == 400, "\(method) \(path) \(body ?? "")")
            #expect((r.json["detail"] as? String)?.contains(mention) == true, "\(r.text) should mention \(mention)")
        }
        let state = try await s.call("GET", "/v1/pipelines/p")
        #expect((state.json["counts"] as? [String: Any])?["pushed_total"] as? Int == 0)
        #expect(state.json["filters"] as? [Any] == nil || (state.json["filters"] as? [Any])?.isEmpty == true)
        #expect(try await s.call("GET", "/v1/pipelines/new").status == 404)
    }
}
