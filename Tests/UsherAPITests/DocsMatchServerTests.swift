import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import UsherAPI

/// What `docs/api.md` and `docs/pipelines.md` say of paging, cursors and
/// field messages, held against the server (each once answered otherwise).
@Suite struct DocsMatchServerTests {
    static let both = TestBackend.both

    @Test(arguments: both) func holdersCountTowardsAQueuePagesLimit(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend)
        #expect(try await s.call("PUT", "/v1/queues/pg", s.put(#"{"capacity": 2}"#)).status == 201)
        for id in ["h1", "h2", "w1", "w2", "w3"] {
            #expect(try await s.call("POST", "/v1/queues/pg/visitors", #"{"id": "\#(id)"}"#).status == 201)
        }
        var seen: [String] = []
        var path = "/v1/queues/pg?limit=2"
        var pages = 0
        while pages < 10 {
            let page = try await s.call("GET", path).json
            let listed = ids(page["holding"]) + ids(page["waiting"])
            #expect(listed.count <= 2, "\(listed)")
            seen += listed
            pages += 1
            guard let next = page["next_cursor"] as? String else { break }
            path = "/v1/queues/pg?limit=2&cursor=\(next)"
        }
        #expect(seen == ["h1", "h2", "w1", "w2", "w3"])
        #expect(pages == 3)

        // One holder and a limit of 1: the holder alone, then the line.
        let first = try await s.call("GET", "/v1/queues/pg?limit=1").json
        #expect(ids(first["holding"]) == ["h1"] && ids(first["waiting"]).isEmpty)
    }

    @Test func cursorsThisServerDidNotMakeAre400() throws {
        let s = try AppTester(#"{"queues": {"q": {"capacity": 1}, "printer": {"capacity": 1}, "z": {"capacity": 1}}}"#)
        for id in ["h1", "w1", "w2"] {
            #expect(try s.call("POST", "/v1/queues/q/visitors", #"{"id": "\#(id)"}"#).status == 201)
        }
        for path in [
            "/v1/queues/q?cursor=h1", "/v1/queues/q?cursor=w0_1", "/v1/queues?cursor=printer", "/v1/queues?cursor=",
            "/v1/windows?cursor=a.00000000",
        ] {
            let r = try s.call("GET", path)
            #expect(r.status == 400 && r.json["field"] as? String == "cursor", "\(path): \(r.status) \(r.text)")
        }
        // A cursor the server made works, and says where to go on.
        let page = try s.call("GET", "/v1/queues?limit=1").json
        let next = try #require(page["next_cursor"] as? String)
        let rest = try s.call("GET", "/v1/queues?limit=5&cursor=\(next)")
        #expect(rest.status == 200)
        #expect(((rest.json["queues"] as? [[String: Any]]) ?? []).compactMap { $0["name"] as? String } == ["q", "z"])
    }

    /// `limit=0` lists nothing, and its `next_cursor` is where the listing
    /// would start (or resume): never null while elements follow.
    @Test func aPageOfNothingIsNotTheLastPage() throws {
        let s = try AppTester(
            #"{"queues": {"q": {"capacity": 1}}, "windows": {"w": {}}, "pools": {"p": {"elements": ["a", "b"]}}, "#
                + #""pipelines": {"l": {}}}"#)
        _ = try s.call("POST", "/v1/queues/q/visitors", #"{"id": "v1"}"#)
        _ = try s.call("POST", "/v1/queues/q/visitors", #"{"id": "v2"}"#)
        _ = try s.call("POST", "/v1/windows/w/show", #"{"id": "i1"}"#)
        _ = try s.call("POST", "/v1/windows/w/show", #"{"id": "i2"}"#)
        _ = try s.call("POST", "/v1/windows/w/show", #"{"id": "i3"}"#)
        _ = try s.call("POST", "/v1/pipelines/l/items", #"{"id": "x", "payload": 1}"#)
        _ = try s.call("POST", "/v1/pipelines/l/items", #"{"id": "y", "payload": 2}"#)
        let lists: [(path: String, list: String, first: String)] = [
            ("/v1/queues", "queues", "name"), ("/v1/queues/q", "holding", "id"), ("/v1/windows/w", "queued", "id"),
            ("/v1/pools/p", "elements", "id"), ("/v1/pipelines/l", "items", "id"),
        ]
        for (path, list, member) in lists {
            let empty = try s.call("GET", "\(path)?limit=0")
            #expect((empty.json[list] as? [Any])?.isEmpty == true, "\(path): \(empty.text)")
            let cursor = try #require(empty.json["next_cursor"] as? String, "\(path): \(empty.text)")
            let first = try s.call("GET", "\(path)?limit=1&cursor=\(cursor)")
            let whole = try s.call("GET", "\(path)?limit=1")
            #expect(first.status == 200, "\(path): \(first.text)")
            let names = [first, whole].map { (($0.json[list] as? [[String: Any]])?.first?[member] as? String) ?? "-" }
            #expect(names[0] == names[1] && names[0] != "-", "\(path): \(names)")
        }
        // Resuming after a cursor, a page of nothing answers that cursor again.
        let page = try s.call("GET", "/v1/pools/p?limit=1").json
        let after = try #require(page["next_cursor"] as? String)
        #expect(try s.call("GET", "/v1/pools/p?limit=0&cursor=\(after)").json["next_cursor"] as? String == after)
    }

    /// One syntax for `field`, whether the strict parser or a reader names it.
    @Test func fieldPathsNameArrayElementsInBrackets() throws {
        let s = try AppTester(#"{"pipelines": {"p": {}}}"#)
        let typo = try s.call(
            "POST", "/v1/pipelines/p/items/batch", #"{"items": [{"payload": 1}, {"payload": 2, "prioirty": 1}]}"#)
        #expect(typo.status == 400 && typo.json["field"] as? String == "items[1].prioirty", "\(typo.text)")
        let inexact = try s.call(
            "POST", "/v1/pipelines/p/items/batch",
            #"{"items": [{"payload": 1}, {"payload": {"a": [1, 18446744073709551617]}}]}"#)
        #expect(inexact.status == 400 && inexact.json["field"] as? String == "items[1].payload.a[1]", "\(inexact.text)")
    }

    @Test func fieldMessagesSayWhatToDo() throws {
        let s = try AppTester(#"{"pipelines": {"p": {}}}"#)
        let slash = try s.call("GET", "/v1/queues/")
        #expect(slash.status == 400 && slash.text.contains(#"must not end with \"/\""#), "\(slash.text)")

        let paused = try s.call("PUT", "/v1/pipelines/n", #"{"paused": true}"#)
        #expect(paused.status == 400 && paused.json["field"] as? String == "paused")
        #expect((paused.json["detail"] as? String)?.contains("PATCH") == true, "\(paused.text)")
        #expect(try s.call("PUT", "/v1/pipelines/n", #"{"paused": null}"#).status == 201)

        // `null` means absent in a PATCH too.
        let patched = try s.call("PATCH", "/v1/pipelines/p", #"{"source": null, "filters": null, "max_deliveries": 3}"#)
        #expect(patched.status == 200, "\(patched.text)")
        #expect(try s.call("PATCH", "/v1/pipelines/p", #"{"source": {"url": "file:///x"}}"#).status == 400)
    }

    @Test func aFilterSaysHowToCompareWithNull() throws {
        let s = try AppTester(#"{"pipelines": {"p": {}}}"#)
        let refused = try s.call(
            "PUT", "/v1/pipelines/p/filters/no-city", #"{"when": {"field": "/city", "equals": null}, "action": "drop"}"#
        )
        #expect(refused.status == 400 && refused.json["field"] as? String == "when.equals", "\(refused.text)")
        #expect((refused.json["detail"] as? String)?.contains(#""in": [null]"#) == true, "\(refused.text)")
        let filter = #"{"when": {"field": "/city", "in": [null]}, "action": "drop"}"#
        #expect(try s.call("PUT", "/v1/pipelines/p/filters/no-city", filter).status == 201)
        #expect(try s.call("POST", "/v1/pipelines/p/items", #"{"payload": {"city": null}}"#).status == 201)
        #expect(try s.call("POST", "/v1/pipelines/p/items", #"{"payload": {"city": "Paris"}}"#).status == 201)
        let taken = try s.call("POST", "/v1/pipelines/p/take?max=10").json["items"] as? [[String: Any]]
        #expect(taken?.map { ($0["payload"] as? [String: Any])?["city"] as? String } == ["Paris"])
    }
}
