import Foundation
import HTTPTestClient
import Testing

@testable import HTTPServer
@testable import UsherAPI
@testable import UsherCore

/// `POST …/items/{id}/extend`, pushed ids remembered for `dedup_seconds`,
/// and `PATCH {"paused"}`, over real sockets (docs/pipelines.md).
@Suite struct PipelineExtendDedupPauseLiveTests {
    private func date(_ value: Any?) throws -> Date {
        let text = try #require(value as? String)
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return try #require(f.date(from: text))
    }

    private func metric(_ s: any UsherUnderTest, _ line: String) throws -> Bool {
        String(decoding: try s.call("GET", "/metrics").body, as: UTF8.self).contains(line)
    }

    // MARK: - Extend

    @Test func extendMovesTheAckDeadlineAndNeverShortensIt() throws {
        let s = try AppTester(#"{"pipelines": {"p": {"ack_seconds": 60, "max_in_flight": 2}}}"#)
        _ = try s.call("POST", "/v1/pipelines/p/items", #"{"id": "a", "payload": 1}"#)
        _ = try s.call("POST", "/v1/pipelines/p/items", #"{"id": "b", "payload": 2}"#)
        let taken = try #require(try s.call("POST", "/v1/pipelines/p/take").json["items"] as? [[String: Any]])
        let first = try #require(taken.first)
        let fence = try #require(first["fence"] as? Int)
        let deadline = try date(first["ack_deadline"])

        // Shorter than what is left: 200, the deadline stays.
        let short = try s.call("POST", "/v1/pipelines/p/items/a/extend", #"{"ack_seconds": 5, "fence": \#(fence)}"#)
        #expect(short.status == 200)
        #expect(try date(short.json["ack_deadline"]) == deadline)
        // Longer than the pipeline's 60 s: capped at it (later than the take's by the time elapsed).
        let long = try s.call("POST", "/v1/pipelines/p/items/a/extend", #"{"ack_seconds": 3600}"#)
        #expect(long.status == 200)
        let moved = try date(long.json["ack_deadline"])
        #expect(moved >= deadline && moved <= Date().addingTimeInterval(60.5))
        // The answer is the item, as GET shows it.
        #expect(long.json["status"] as? String == "in_flight" && long.json["fence"] as? Int == fence)
        #expect(long.body == (try s.call("GET", "/v1/pipelines/p/items/a")).body)

        // Not in flight: 409 with current_status, like consume; a stale fence the same.
        let ready = try s.call("POST", "/v1/pipelines/p/items/b/extend", "{}")
        #expect(ready.status == 409 && ready.code == "not_in_flight")
        #expect(ready.json["current_status"] as? String == "ready")
        let stale = try s.call("POST", "/v1/pipelines/p/items/a/extend", #"{"fence": \#(fence - 1)}"#)
        #expect(stale.status == 409 && stale.code == "not_in_flight")
        #expect(stale.json["current_status"] as? String == "in_flight")
        #expect(try s.call("POST", "/v1/pipelines/p/items/zz/extend").status == 404)
        for (body, field) in [
            (#"{"ack_seconds": -1}"#, "ack_seconds"), (#"{"ack_seconds": 0}"#, "ack_seconds"),
            (#"{"ack_secs": 1}"#, "ack_secs"), (#"{"fence": "x"}"#, "fence"),
        ] {
            let bad = try s.call("POST", "/v1/pipelines/p/items/a/extend", body)
            #expect(bad.status == 400 && bad.json["field"] as? String == field, "\(body)")
        }
        _ = try s.call("POST", "/v1/pipelines/p/items/a/consume")
        let done = try s.call("POST", "/v1/pipelines/p/items/a/extend")
        #expect(done.status == 409 && done.json["current_status"] as? String == "consumed")

        let counts = try #require(try s.call("GET", "/v1/pipelines/p").json["counts"] as? [String: Any])
        #expect(counts["extended_total"] as? Int == 2)
        #expect(try metric(s, #"event="extended"} 2"#))
    }

    @Test func anExtendedItemOutlivesItsFirstDeadline() throws {
        let s = try AppTester(#"{"pipelines": {"p": {"ack_seconds": 3}}}"#)
        _ = try s.call("POST", "/v1/pipelines/p/items", #"{"id": "a", "payload": 1}"#)
        #expect(try s.call("POST", "/v1/pipelines/p/take").status == 200)
        usleep(1_500_000)
        #expect(try s.call("POST", "/v1/pipelines/p/items/a/extend", #"{"ack_seconds": 3}"#).status == 200)
        // Past the first deadline (3 s), before the new one (4.5 s): still in flight.
        usleep(2_000_000)
        let state = try s.call("GET", "/v1/pipelines/p").json
        #expect(
            (state["counts"] as? [String: Any])?["in_flight"] as? Int == 1
                && (state["counts"] as? [String: Any])?["ready"] as? Int == 0)
        #expect((state["counts"] as? [String: Any])?["redelivered_total"] as? Int == 0)
    }

    // MARK: - Dedup

    @Test func aRetriedPushAnswersWhatBecameOfTheFirstOne() throws {
        let s = try AppTester(#"{"pipelines": {"p": {"dedup_seconds": 1}}}"#)
        let config = try #require(try s.call("GET", "/v1/pipelines/p").json["config"] as? [String: Any])
        #expect(config["dedup_seconds"] as? Int == 1)
        #expect(try s.call("POST", "/v1/pipelines/p/items", #"{"id": "job-1", "payload": {"n": 1}}"#).status == 201)
        _ = try s.call("POST", "/v1/pipelines/p/take")
        _ = try s.call("POST", "/v1/pipelines/p/items/job-1/consume")

        // Within dedup_seconds: 200 with the consumed item; nothing enqueued.
        let retried = try s.call("POST", "/v1/pipelines/p/items", #"{"id": "job-1", "payload": {"n": 1}}"#)
        #expect(retried.status == 200)
        #expect(retried.json["status"] as? String == "consumed" && retried.json["deliveries"] as? Int == 1)
        #expect(retried.json["payload"] is NSNull)
        var state = try s.call("GET", "/v1/pipelines/p").json
        #expect((state["counts"] as? [String: Any])?["ready"] as? Int == 0)
        #expect((state["counts"] as? [String: Any])?["deduplicated_total"] as? Int == 1)
        #expect((state["counts"] as? [String: Any])?["pushed_total"] as? Int == 1)

        // After it: a new item with that id.
        usleep(1_100_000)
        let again = try s.call("POST", "/v1/pipelines/p/items", #"{"id": "job-1", "payload": {"n": 2}}"#)
        #expect(again.status == 201 && again.json["status"] as? String == "ready")
        state = try s.call("GET", "/v1/pipelines/p").json
        #expect((state["counts"] as? [String: Any])?["ready"] as? Int == 1)

        // 0 disables: a finished id is free at once.
        #expect(try s.call("PATCH", "/v1/pipelines/p", #"{"dedup_seconds": 0}"#).status == 200)
        _ = try s.call("DELETE", "/v1/pipelines/p/items/job-1")
        #expect(try s.call("POST", "/v1/pipelines/p/items", #"{"id": "job-1", "payload": 3}"#).status == 201)
        let bad = try s.call("PATCH", "/v1/pipelines/p", #"{"dedup_seconds": -5}"#)
        #expect(bad.status == 400 && bad.json["field"] as? String == "dedup_seconds")
    }

    // MARK: - Pause

    @Test func aPausedPipelineTakesPushesAndHandsOutNothingUntilResumed() throws {
        let s = try LiveServer(#"{"pipelines": {"p": {}}}"#)
        let events = try SSEReader(port: s.port, "/v1/events?kind=pipelines")
        let paused = try s.call("PATCH", "/v1/pipelines/p", #"{"paused": true}"#)
        #expect(paused.status == 200 && paused.json["paused"] as? Bool == true)
        #expect(try s.call("POST", "/v1/pipelines/p/items", #"{"id": "a", "payload": 1}"#).status == 201)
        #expect(try s.call("POST", "/v1/pipelines/p/take").status == 204)
        #expect(try s.call("POST", "/v1/pipelines/p/take?wait=0.2").status == 204)
        #expect(try s.call("GET", "/v1/pipelines/p").json["paused"] as? Bool == true)
        #expect(try metric(s, #"usher_pipeline_paused{kind="pipelines",name="p"} 1"#))

        // A consumer waits; resuming wakes it.
        let consumer = s.inBackground { try s.call("POST", "/v1/pipelines/p/take?wait=10") }
        s.untilParked(1)
        let resumed = try s.call("PATCH", "/v1/pipelines/p", #"{"paused": false}"#)
        #expect(resumed.status == 200 && resumed.json["paused"] as? Bool == false)
        let got = try #require(consumer())
        #expect(got.status == 200)
        #expect((got.json["items"] as? [[String: Any]])?.first?["id"] as? String == "a")

        // `updated` carries what changed; the push and the hand-out have their own events.
        let seen = try (0..<4).map { _ in try #require(try events.next()) }
        #expect(seen.map(\.type) == ["updated", "pushed", "updated", "delivered"])
        let updates = seen.filter { $0.type == "updated" }.map { $0.data["data"] as? [String: Any] }
        #expect(updates.first??["paused"] as? Bool == true && updates.last??["paused"] as? Bool == false)

        for body in [#"{"paused": "yes"}"#, #"{"pasued": true}"#] {
            #expect(try s.call("PATCH", "/v1/pipelines/p", body).status == 400, "\(body)")
        }
        // `paused` is state, not config: PUT does not take it.
        let put = try s.call("PUT", "/v1/pipelines/q", #"{"paused": true}"#)
        #expect(put.status == 400 && put.json["field"] as? String == "paused")
    }
}
