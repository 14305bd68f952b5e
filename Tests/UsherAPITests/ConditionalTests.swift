import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import UsherAPI

/// Conditional GETs of states, objects and lists (docs/api.md, Conditional
/// GETs), on both backends: the `ETag` changes exactly when the body does,
/// `If-None-Match` naming it answers 304, and `?wait=` waits for a change.
struct ConditionalTests {
    /// Every read of the demo-like set: its tag, a 304 for it, a 200 for another.
    @Test(arguments: TestBackend.both) func everyReadHasATagAndAnswers304(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend)
        try await Self.makeOneOfEach(s)
        for path in [
            "/v1/queues", "/v1/queues/q", "/v1/queues/q/visitors/v1", "/v1/windows/w", "/v1/windows/w/showing",
            "/v1/windows/w/items/i1", "/v1/pools/p", "/v1/pools/p/leases/l1", "/v1/pipelines/jobs",
            "/v1/pipelines/jobs/items/j1", "/v1/pipelines/jobs/dead", "/v1/pipelines/jobs/filters/f", "/v1/machines",
        ] {
            let whole = try await s.call("GET", path)
            #expect(whole.status == 200, "\(path): \(whole.text)")
            let tag = try #require(whole.headers["etag"], "\(path)")
            #expect(whole.headers["cache-control"] == "no-cache", "\(path)")
            let same = try await s.call("GET", path, headers: ["If-None-Match": "\"x\", \(tag)"])
            #expect(same.status == 304 && same.body.isEmpty && same.headers["etag"] == tag, "\(path)")
            let other = try await s.call("GET", path, headers: ["If-None-Match": "\"0\""])
            #expect(other.status == 200 && other.body == whole.body, "\(path)")
        }
    }

    /// `If-None-Match` as RFC 9110 spells it: a list, weak tags, `*`, spaces
    /// and tabs around members; anything else names nothing.
    @Test func ifNoneMatchIsReadAsTheRFCSpellsIt() async throws {
        let s = try await BackendApp(.memory)
        let tag = try #require(try await s.call("GET", "/openapi.json").headers["etag"])
        let bare = String(tag.dropFirst().dropLast())
        for held in [tag, "W/\(tag)", "\"x\" ,\t\(tag) ", "*", "\"x\",\(tag)", ",\(tag),", " * "] {
            #expect(try await s.call("GET", "/openapi.json", headers: ["If-None-Match": held]).status == 304, "\(held)")
        }
        for other in [
            "\"x\"", bare, String(tag.dropLast()), "", ",", "W/", "\(tag)x", "W/W/\(tag)", "\"\(bare)x\"", "**",
        ] {
            #expect(
                try await s.call("GET", "/openapi.json", headers: ["If-None-Match": other]).status == 200, "\(other)")
        }
    }

    /// A change moves the tag; reading does not; PUT and PATCH answer the tag GET then answers.
    @Test(arguments: TestBackend.both) func theTagMovesWithTheStateOnly(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend)
        let put = try await s.call("PUT", "/v1/queues/q", s.put(#"{"capacity": 1}"#))
        let first = try await s.call("GET", "/v1/queues/q")
        #expect(put.headers["etag"] == first.headers["etag"] && put.body == first.body)
        #expect(try await s.call("GET", "/v1/queues/q").headers["etag"] == first.headers["etag"])
        _ = try await s.call("POST", "/v1/queues/q/visitors", #"{"id": "a"}"#)
        let granted = try await s.call("GET", "/v1/queues/q")
        #expect(granted.headers["etag"] != first.headers["etag"])
        let patched = try await s.call("PATCH", "/v1/queues/q", #"{"capacity": 2}"#)
        #expect(patched.headers["etag"] != granted.headers["etag"])
        #expect(try await s.call("GET", "/v1/queues/q").headers["etag"] == patched.headers["etag"])
        // A page of its own has a tag of its own.
        let page = try await s.call("GET", "/v1/queues/q?limit=0")
        #expect(page.headers["etag"] != nil && page.headers["etag"] != patched.headers["etag"])
    }

    /// Estimates move with the clock: their bodies get a weak tag that
    /// leaves them out, and a waiting visitor's as well.
    @Test(arguments: TestBackend.both) func estimatesMakeTheTagWeak(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend)
        _ = try await s.call("PUT", "/v1/queues/q", s.put(#"{"capacity": 1, "hold_seconds": 30}"#))
        _ = try await s.call("POST", "/v1/queues/q/visitors", #"{"id": "a"}"#)
        #expect(try await s.call("GET", "/v1/queues/q").headers["etag"]?.hasPrefix("\"") == true)
        _ = try await s.call("POST", "/v1/queues/q/visitors", #"{"id": "b"}"#)
        let state = try await s.call("GET", "/v1/queues/q")
        let tag = try #require(state.headers["etag"])
        #expect(tag.hasPrefix("W/\""))
        #expect(try await s.call("GET", "/v1/queues/q", headers: ["If-None-Match": tag]).status == 304)
        let waiting = try await s.call("GET", "/v1/queues/q/visitors/b")
        #expect(waiting.headers["etag"]?.hasPrefix("W/\"") == true)
        let holder = try await s.call("GET", "/v1/queues/q/visitors/a")
        #expect(holder.headers["etag"]?.hasPrefix("\"") == true)
    }

    /// `?wait=` with `If-None-Match` naming the current tag waits for a
    /// change (200 with the new state) or answers 304 when the wait ends.
    @Test(arguments: TestBackend.both) func aWaitAnswersTheNextChange(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend)
        _ = try await s.call("PUT", "/v1/pools/p", s.put(#"{"elements": [{"id": "e1"}]}"#))
        let tag = try #require(try await s.call("GET", "/v1/pools/p").headers["etag"])
        let started = Date()
        let ended = try await s.call("GET", "/v1/pools/p?wait=0.3", headers: ["If-None-Match": tag])
        #expect(ended.status == 304 && Date().timeIntervalSince(started) >= 0.25)
        // A stale tag answers at once.
        let stale = try await s.call("GET", "/v1/pools/p?wait=10", headers: ["If-None-Match": "\"0\""])
        #expect(stale.status == 200 && stale.headers["etag"] == tag)
        let parked = Task { try await s.call("GET", "/v1/pools/p?wait=10", headers: ["If-None-Match": tag]) }
        let plain = Task { try await s.call("GET", "/v1/pools/p?wait=10") }
        await s.untilParked(2)
        _ = try await s.call("POST", "/v1/pools/p/fetch", "{}")
        for waited in [try await parked.value, try await plain.value] {
            #expect(waited.status == 200 && waited.headers["etag"] != tag)
            #expect((waited.json["counts"] as? [String: Any])?["leased"] as? Int == 1)
        }
        #expect(s.app.changes.parkedCount == 0)
    }

    /// A client that hangs up mid-wait leaves nothing parked (a live server).
    @Test func aHangUpEndsTheWait() throws {
        let server = try LiveServer(#"{"windows": {"w": {}}}"#)
        let client = TestHTTPClient(port: server.port)
        try client.sendRaw(Data("GET /v1/windows/w?wait=30 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
        #expect(pollBlocking(5) { server.app.changes.parkedCount == 1 })
        client.disconnect()
        #expect(pollBlocking(5) { server.app.changes.parkedCount == 0 && server.server.suspendedRequests == 0 })
    }

    /// The first page's answer is encoded once per state and kept, charged
    /// to the storage budget, and given back when the resource goes.
    @Test func anUnchangedStateIsEncodedOnce() async throws {
        let s = try await BackendApp(.memory)
        _ = try await s.call("PUT", "/v1/pipelines/jobs", "{}")
        let before = s.app.storage.usedBytes
        let first = try await s.call("GET", "/v1/pipelines/jobs")
        let tag = EntityTagText(first.headers["etag"] ?? "")
        let kept = s.app.registry.answers(.pipelines, "jobs")?.answer(tagged: tag.parsed)
        #expect(kept.map { Data($0.body) } == first.body)
        #expect(s.app.storage.usedBytes == before + first.body.count)
        #expect(try await s.call("GET", "/v1/pipelines/jobs").body == first.body)
        _ = try await s.call("POST", "/v1/pipelines/jobs/items", #"{"payload": 1}"#)
        let changed = try await s.call("GET", "/v1/pipelines/jobs")
        #expect(s.app.registry.answers(.pipelines, "jobs")?.answer(tagged: tag.parsed) == nil)
        #expect(changed.body != first.body)
        _ = try await s.call("DELETE", "/v1/pipelines/jobs")
        #expect(await poll(5) { s.app.storage.usedBytes == before })
    }

    /// Past half of `max_stored_bytes` nothing is kept: what clients store comes first.
    @Test func aFullerBudgetKeepsNoAnswer() async throws {
        let s = try await BackendApp(.memory, #"{"max_stored_bytes": 1048576}"#)
        _ = try await s.call("PUT", "/v1/pipelines/jobs", "{}")
        _ = try await s.call("PUT", "/v1/pipelines/filler", #"{"capacity": 1000}"#)
        let payload = String(repeating: "x", count: 16_000)
        while s.app.storage.usedBytes <= 600_000 {
            let pushed = try await s.call("POST", "/v1/pipelines/filler/items", #"{"payload": "\#(payload)"}"#)
            try #require(pushed.status == 201, "\(pushed.text)")
        }
        let before = s.app.storage.usedBytes
        let state = try await s.call("GET", "/v1/pipelines/jobs")
        let tag = EntityTagText(state.headers["etag"] ?? "")
        #expect(state.status == 200 && state.body.count < 2_000)
        #expect(s.app.registry.answers(.pipelines, "jobs")?.answer(tagged: tag.parsed) == nil)
        #expect(s.app.storage.usedBytes == before)
        // Below half again, it is kept.
        _ = try await s.call("DELETE", "/v1/pipelines/filler")
        let again = try await s.call("GET", "/v1/pipelines/jobs")
        #expect(
            s.app.registry.answers(.pipelines, "jobs")?.answer(tagged: tag.parsed).map { Data($0.body) } == again.body)
    }

    /// A queue, window, pool, pipeline (with an item, a dead item and a
    /// filter) and machine, each with one object.
    static func makeOneOfEach(_ s: BackendApp) async throws {
        for (path, body) in [
            ("/v1/queues/q", #"{"capacity": 1}"#), ("/v1/windows/w", "{}"),
            ("/v1/pools/p", #"{"elements": [{"id": "e1"}]}"#), ("/v1/pipelines/jobs", #"{"max_deliveries": 1}"#),
        ] {
            let made = try await s.call("PUT", path, s.put(body))
            #expect(made.status == 201, "\(path): \(made.text)")
        }
        _ = try await s.call("PUT", "/v1/machines/m", #"{"definition": "player"}"#)
        _ = try await s.call("POST", "/v1/queues/q/visitors", #"{"id": "v1"}"#)
        _ = try await s.call("POST", "/v1/windows/w/show", #"{"id": "i1"}"#)
        _ = try await s.call("POST", "/v1/pools/p/fetch", #"{"id": "l1"}"#)
        _ = try await s.call("POST", "/v1/pipelines/jobs/items", #"{"id": "dead1", "payload": 0}"#)
        _ = try await s.call("POST", "/v1/pipelines/jobs/take", "{}")
        let released = try await s.call("POST", "/v1/pipelines/jobs/items/dead1/release", "{}")
        #expect(released.json["status"] as? String == "dead", "\(released.text)")
        _ = try await s.call("POST", "/v1/pipelines/jobs/items", #"{"id": "j1", "payload": 1}"#)
        _ = try await s.call(
            "PUT", "/v1/pipelines/jobs/filters/f", #"{"when": {"field": "/x", "equals": 1}, "action": "drop"}"#)
    }
}

/// An `ETag` header as the cache keys it.
private struct EntityTagText {
    let parsed: EntityTag

    init(_ header: String) {
        var text = Substring(header)
        let weak = text.hasPrefix("W/")
        if weak { text = text.dropFirst(2) }
        parsed = EntityTag(opaque: String(text.dropFirst().dropLast()), weak: weak)
    }
}
