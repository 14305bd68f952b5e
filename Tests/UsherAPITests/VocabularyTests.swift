import Foundation
import HTTPTestClient
import Testing

@testable import UsherAPI

/// The rules of docs/api.md, "Vocabulary", walked over every kind on both
/// backends: states keep their gauges in `counts`, every object answer has
/// a `status` and a `fence` member, and a request that made an object is
/// answered 201, one that answers an existing one 200.
@Suite struct VocabularyTests {
    static let both = TestBackend.both

    /// One call per kind that makes a new object, with what repeating it answers.
    static let makers: [(kind: String, path: String, body: String)] = [
        ("queues", "/v1/queues/q/visitors", #"{"id": "v1"}"#),
        ("windows", "/v1/windows/w/show", #"{"id": "i1"}"#),
        ("pipelines", "/v1/pipelines/p/items", #"{"id": "p1", "payload": 1}"#),
    ]

    @Test(arguments: both) func everyKindSpeaksTheSameWords(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend)
        let machine = #"{"initial": "a", "transitions": [{"event": "go", "from": "a", "to": "b"}]}"#
        for (kind, body) in [
            ("queues", "{}"), ("windows", "{}"), ("pools", #"{"size": 1}"#), ("pipelines", "{}"),
        ] {
            let made = try await s.call("PUT", "/v1/\(kind)/\(kind.prefix(1))", s.put(body))
            #expect(made.status == 201, "\(kind): \(made.text)")
            #expect(try await s.call("PUT", "/v1/\(kind)/\(kind.prefix(1))", s.put(body)).status == 200, "\(kind)")
        }
        #expect(try await s.call("PUT", "/v1/machines/m", machine).status == 201)

        for (kind, path, body) in Self.makers {
            let first = try await s.call("POST", path, body)
            #expect(first.status == 201, "\(kind): \(first.text)")
            #expect(first.json["status"] is String && first.json.keys.contains("fence"), "\(kind): \(first.text)")
            #expect(try await s.call("POST", path, body).status == 200, "\(kind): a retried id")
        }
        let lease = try await s.call("POST", "/v1/pools/p/fetch", #"{"id": "l1"}"#)
        #expect(lease.json["fence"] != nil, "\(lease.text)")
        let fired = try await s.call("POST", "/v1/machines/m/events/go")
        #expect(fired.json["from"] as? String == "a" && fired.json["to"] as? String == "b", "\(fired.text)")
        #expect(fired.json["fence"] as? Int == fired.json["version"] as? Int)

        // Gauges and totals in counts, no count beside them (a list may share
        // its count's word: `waiting` lists them, `counts.waiting` counts
        // them); every page holds 100 by default.
        let gauges = [
            "queues": ["waiting", "holding", "delayed"], "windows": ["showing", "queued", "delayed"],
            "pools": ["available", "leased", "waiting"],
            "pipelines": ["ready", "in_flight", "delayed", "dead", "waiting_consumers", "waiting_producers"],
        ]
        for (kind, names) in gauges {
            let state = try await s.call("GET", "/v1/\(kind)/\(kind.prefix(1))")
            let counts = state.counts
            #expect(counts.values.allSatisfy { $0 is Int }, "\(kind): \(state.text)")
            #expect(names.allSatisfy { counts[$0] is Int }, "\(kind): \(names) in \(counts.keys.sorted())")
            #expect(counts.keys.allSatisfy { names.contains($0) || $0.hasSuffix("_total") }, "\(kind)")
            let beside = Set(state.json.filter { $0.value is Int }.keys).intersection(counts.keys)
            #expect(beside.isEmpty, "\(kind): \(beside) outside counts too")
            #expect(state.json.keys.contains("next_cursor"), "\(kind)")
        }
        for n in 0..<105 {
            _ = try await s.call("POST", "/v1/queues/q/visitors", #"{"id": "w\#(n)"}"#)
        }
        let page = try await s.call("GET", "/v1/queues/q")
        #expect(ids(page.json["holding"]).count + ids(page.json["waiting"]).count == 100, "\(page.text)")
    }
}
