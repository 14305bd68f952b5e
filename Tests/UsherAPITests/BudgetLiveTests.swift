import Foundation
import HTTPTestClient
import Testing

@testable import UsherAPI
@testable import UsherCore

/// `max_stored_bytes` (507 `storage_full`) and `max_response_bytes` (pages
/// with `next_cursor`) on the real server.
@Suite struct BudgetLiveTests {
    /// A visitor body with a payload of `bytes` characters.
    static func visitor(_ id: String, bytes: Int) -> String {
        #"{"id": "\#(id)", "payload": "\#(String(repeating: "p", count: bytes))"}"#
    }

    @Test func configKeysDefaultsAndRanges() throws {
        let defaults = UsherConfig()
        #expect(defaults.maxStoredBytes == 256 << 20 && defaults.maxResponseBytes == 8 << 20)
        let set = try UsherConfig.parse(
            try JSONValue.parse(#"{"max_stored_bytes": 2097152, "max_response_bytes": 65536}"#))
        #expect(set.maxStoredBytes == 2_097_152 && set.maxResponseBytes == 65536)
        for bad in [#"{"max_stored_bytes": 1000}"#, #"{"max_response_bytes": 100}"#, #"{"max_stored_bytes": "big"}"#] {
            #expect(throws: FieldError.self) { _ = try UsherConfig.parse(try JSONValue.parse(bad)) }
        }
    }

    @Test func theQueueBoundIsNeverBelowTheEncodedSize() throws {
        let t0 = Timestamp(micros: 1_767_225_600_000_000)
        var config = QueueConfig()
        config.capacity = 2
        config.opposites = [["a\u{1}\"", "b\\"]]
        config.dedup = .off
        var engine = QueueEngine(name: "q\u{2}", config: config, createdAt: t0)
        let nasty = String(repeating: "\u{1}\"\\é", count: 50)
        let payloads: [JSONValue?] = [
            nil, .null, .int(Int.min), .double(-1.2345678901234567e-300), .string(nasty),
            .array([.object([(nasty, .array([.bool(false), .null, .double(1e300)]))]), .array([])]),
            .object([("k", .object([("", .string(""))]))]),
        ]
        for (i, p) in payloads.enumerated() {
            _ = try engine.enqueue(
                VisitorRequest(id: "v\(i)", key: "k\u{3}", action: nasty.count > 0 ? "a\u{1}\"" : nil, payload: p),
                now: t0)
        }
        _ = try engine.enqueue(VisitorRequest(key: "k\u{3}", action: "a\u{1}\"", payload: .int(1)), now: t0)
        let state = engine.state(limit: 100, now: t0)
        #expect(state.holding.count == 2 && state.waiting.count == 6)
        for v in state.holding + state.waiting {
            #expect(Paging.bound(v) >= Wire.bytes(VisitorBody(v)).count, "\(v.id)")
        }
        var envelope = state
        envelope.holding = []
        envelope.waiting = []
        #expect(Paging.envelopeBound(state) >= Wire.bytes(QueueStateBody(envelope)).count)
    }

    @Test func aWriteBeyondTheBudgetIs507WithTheFiguresAndStoresNothing() throws {
        let s = try LiveServer(
            #"{"max_stored_bytes": 1048576, "queues": {"a": {"capacity": 0}, "b": {"capacity": 0}}}"#)
        let c = s.client()
        var stored = 0
        var refused: TestHTTPClient.Response?
        for i in 0..<100 {
            let r = try c.request("POST", "/v1/queues/a/visitors", body: Self.visitor("v\(i)", bytes: 60_000))
            if r.status == 507 {
                refused = r
                break
            }
            #expect(r.status == 201)
            stored += 1
        }
        let full = try #require(refused)
        #expect(stored >= 15 && stored <= 17)
        #expect(full.code == "storage_full")
        #expect(full.headers["content-type"] == "application/problem+json")
        #expect(full.json["limit_bytes"] as? Int == 1_048_576)
        let used = try #require(full.json["used_bytes"] as? Int)
        let requested = try #require(full.json["requested_bytes"] as? Int)
        #expect(requested > 60_000 && used + requested > 1_048_576)
        // Nothing of the refused visitor was kept.
        #expect(try c.request("GET", "/v1/queues/a/visitors/v\(stored)").status == 404)
        let counts = try c.request("GET", "/v1/queues/a?limit=0").json["counts"] as? [String: Any]
        #expect(counts?["enqueued_total"] as? Int == stored)
        // The budget is server-wide: another queue is refused too.
        #expect(try c.request("POST", "/v1/queues/b/visitors", body: Self.visitor("x", bytes: 60_000)).status == 507)
        let metrics = String(decoding: try c.request("GET", "/metrics").body, as: UTF8.self)
        #expect(metrics.contains("usher_stored_bytes_limit 1048576"))
        #expect(metrics.contains("usher_stored_bytes \(used)"))
        // Deleting the queue frees its bytes at once: the refused write now succeeds.
        #expect(try c.request("DELETE", "/v1/queues/a").status == 204)
        #expect(try c.request("POST", "/v1/queues/b/visitors", body: Self.visitor("x", bytes: 60_000)).status == 201)
        #expect(s.app.storage.usedBytes < 100_000)
    }

    @Test func queuePagesListEveryVisitorOnceUnderTheByteCap() throws {
        let s = try LiveServer(#"{"max_response_bytes": 65536, "queues": {"q": {"capacity": 3}}}"#)
        let c = s.client()
        var ids: [String] = []
        for i in 0..<40 {
            // Priorities shuffle the grant order; the cursor follows it.
            let body = #"{"id": "v\#(i)", "priority": \#(i % 3), "payload": "\#(String(repeating: "p", count: 7000))"}"#
            #expect(try c.request("POST", "/v1/queues/q/visitors", body: body).status == 201)
            ids.append("v\(i)")
        }
        var seen: [String] = []
        var cursor: String?
        var pages = 0
        repeat {
            let r = try c.request("GET", "/v1/queues/q?limit=10000" + (cursor.map { "&cursor=\($0)" } ?? ""))
            #expect(r.status == 200)
            #expect(r.body.count <= 65536)
            for list in ["holding", "waiting"] {
                seen += ((r.json[list] as? [[String: Any]]) ?? []).compactMap { $0["id"] as? String }
            }
            cursor = r.json["next_cursor"] as? String
            pages += 1
        } while cursor != nil && pages < 50
        #expect(pages >= 5)
        #expect(seen.count == ids.count)
        #expect(Set(seen) == Set(ids))
        // `limit` alone pages too, and a bad cursor is 400.
        let first = try c.request("GET", "/v1/queues/q?limit=2")
        #expect((first.json["holding"] as? [Any])?.count == 2)
        #expect(first.json["next_cursor"] is String)
        let bad = try c.request("GET", "/v1/queues/q?cursor=zz")
        #expect(bad.status == 400)
        #expect(bad.json["field"] as? String == "cursor")
    }

    @Test func poolPipelineAndResourceListsPageToo() throws {
        let s = try LiveServer(
            #"{"max_response_bytes": 65536, "pools": {"p": {}}, "pipelines": {"f": {"max_deliveries": 1}}}"#)
        let c = s.client()
        let data = String(repeating: "d", count: 6000)
        for i in 0..<30 {
            #expect(try c.request("PUT", "/v1/pools/p/elements/e\(i)", body: #"{"data": "\#(data)"}"#).status == 201)
            #expect(
                try c.request("POST", "/v1/pipelines/f/items", body: #"{"id": "i\#(i)", "payload": "\#(data)"}"#).status
                    == 201)
            #expect(try c.request("PUT", "/v1/machines/m\(i)", body: #"{"definition": "player"}"#).status == 201)
        }
        func collect(_ path: String, _ list: String, _ key: String) throws -> [String] {
            var out: [String] = []
            var cursor: String?
            var pages = 0
            repeat {
                let sep = path.contains("?") ? "&" : "?"
                let r = try c.request("GET", path + (cursor.map { "\(sep)cursor=\($0)" } ?? ""))
                #expect(r.status == 200)
                #expect(r.body.count <= 65536)
                out += ((r.json[list] as? [[String: Any]]) ?? []).compactMap { $0[key] as? String }
                cursor = r.json["next_cursor"] as? String
                pages += 1
            } while cursor != nil && pages < 50
            return out
        }
        #expect(try collect("/v1/pools/p", "elements", "id") == (0..<30).map { "e\($0)" })
        #expect(try collect("/v1/pipelines/f", "items", "id") == (0..<30).map { "i\($0)" })
        #expect(try collect("/v1/machines?limit=7", "machines", "name") == (0..<30).map { "m\($0)" }.sorted())
        // The dead list: every item taken and released once is dead.
        for _ in 0..<30 {
            let taken = try c.request("POST", "/v1/pipelines/f/take")
            let id = try #require(((taken.json["items"] as? [[String: Any]])?.first?["id"]) as? String)
            #expect(try c.request("POST", "/v1/pipelines/f/items/\(id)/release").status == 200)
        }
        #expect(try collect("/v1/pipelines/f/dead", "items", "id") == (0..<30).map { "i\($0)" })
    }

    @Test func aTakeAnswersNoMoreThanMaxResponseBytes() throws {
        let s = try LiveServer(#"{"max_response_bytes": 65536, "pipelines": {"f": {"max_in_flight": 100}}}"#)
        let c = s.client()
        let payload = String(repeating: "d", count: 7000)
        for i in 0..<20 {
            #expect(
                try c.request("POST", "/v1/pipelines/f/items", body: #"{"id": "i\#(i)", "payload": "\#(payload)"}"#)
                    .status == 201)
        }
        var taken: [String] = []
        var takes = 0
        while taken.count < 20 && takes < 10 {
            let r = try c.request("POST", "/v1/pipelines/f/take?max=100")
            #expect(r.status == 200)
            #expect(r.body.count <= 65536)
            taken += ((r.json["items"] as? [[String: Any]]) ?? []).compactMap { $0["id"] as? String }
            takes += 1
        }
        #expect(takes >= 3)
        #expect(taken == (0..<20).map { "i\($0)" })
    }
}
