import Foundation
import HTTPTestClient
import Testing

@testable import UsherAPI

/// The rules of docs/api.md, "Vocabulary": over every kind on both
/// backends, states keep their gauges in `counts`, every object answer has
/// a `status` and a `fence` member, a request that made an object is
/// answered 201 and one that answers an existing one 200, and events carry
/// what reads answer; over every route of the OpenAPI document, the words,
/// the answer shapes, the waits by id and the page size.
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

    /// Every time member the API answers, by the word the Vocabulary table
    /// gives it (docs/api.md); a new one must be added there first.
    static let timeWords: Set<String> = [
        "created_at", "granted_at", "shown_at", "taken_at", "finished_at",  // an object's life
        "expires_at", "next_expiry_at", "available_at", "dead_at",  // holds, delays, the dead list
        "entered_at", "opened_at", "next_retry_at",  // a machine's state, a transaction, a source
    ]
    /// The words `/v1` renamed (CHANGELOG.md), which must not come back.
    static let retiredWords: Set<String> = [
        "enqueued_at", "queued_at", "pushed_at", "leased_at", "dismissed_at", "ended_at", "previous_state",
        "dismissed",
    ]

    /// Every route of the OpenAPI document (which schemathesis holds the
    /// server to): one word per time, no retired word, no object wrapped in
    /// a one-member answer, every object by id can be waited on, every page
    /// holds 100 by default, and every operation that makes an object
    /// answers 201 for it.
    @Test func everyRouteOfTheDocumentSpeaksTheSameWords() async throws {
        let s = try await BackendApp(.memory)
        let document = try await s.call("GET", "/openapi.json").json
        let paths = try #require(document["paths"] as? [String: [String: Any]])
        let schemas = try #require((document["components"] as? [String: Any])?["schemas"] as? [String: Any])
        var names = Set<String>()
        Self.collectPropertyNames(document, into: &names)
        #expect(names.filter { $0.hasSuffix("_at") }.subtracting(Self.timeWords).isEmpty, "\(names.sorted())")
        #expect(names.intersection(Self.retiredWords).isEmpty, "\(names.intersection(Self.retiredWords))")
        #expect(paths.count > 40, "\(paths.count) paths: the document is not the whole API")
        // The check below finds the shape `/v1` had before (`{"lease": {…}}`).
        let lease = ["$ref": "#/components/schemas/Lease"]
        #expect(Self.wrappingMember(["properties": ["lease": lease]], in: schemas) == "lease")
        #expect(Self.wrappingMember(["properties": ["items": ["type": "array"]]], in: schemas) == nil)

        let makers: Set<String> = [
            "post /v1/queues/{name}/visitors", "post /v1/windows/{name}/show", "post /v1/pools/{name}/fetch",
            "post /v1/pipelines/{name}/items", "post /v1/pipelines/{name}/items/batch",
            "post /v1/machines/{name}/transactions",
        ]
        for (path, operations) in paths {
            for (method, value) in operations {
                guard let operation = value as? [String: Any],
                    let responses = operation["responses"] as? [String: Any]
                else { continue }
                let route = "\(method) \(path)"
                let query = (operation["parameters"] as? [[String: Any]] ?? []).filter {
                    $0["in"] as? String == "query"
                }
                if let limit = query.first(where: { $0["name"] as? String == "limit" }) {
                    #expect((limit["schema"] as? [String: Any])?["default"] as? Int == 100, "\(route)")
                }
                let byID =
                    path.hasSuffix("/{id}")
                    && ["visitors", "items", "leases"].contains(
                        path.split(separator: "/").dropLast().last.map(String.init) ?? "")
                if method == "get" && byID {
                    #expect(query.contains { $0["name"] as? String == "wait" }, "\(route): cannot be waited on")
                }
                if makers.contains(route) || method == "put" {
                    #expect(responses["201"] != nil, "\(route): makes an object, yet no 201")
                }
                for code in ["200", "201"] {
                    let wrapper = Self.wrappingMember(Self.schema(of: responses[code], in: schemas), in: schemas)
                    #expect(wrapper == nil, "\(route) \(code): wraps it in {\"\(wrapper ?? "")\": …}")
                }
            }
        }
    }

    /// One cache rule for every answer: `no-cache` with an `ETag` (and 304
    /// for `If-None-Match` naming it), `no-store` without one.
    @Test func everyAnswerSaysHowACacheMayKeepIt() async throws {
        let s = try await BackendApp(.memory)
        _ = try await s.call("PUT", "/v1/queues/q", "{}")
        _ = try await s.call("PUT", "/v1/machines/m", #"{"definition": "player"}"#)
        for path in [
            "/v1/queues/q", "/v1/queues", "/v1/machines/m", "/openapi.json", "/", "/dashboard.js", "/dashboard.css",
        ] {
            let whole = try await s.call("GET", path)
            let tag = try #require(whole.headers["etag"], "\(path)")
            #expect(whole.status == 200 && whole.headers["cache-control"] == "no-cache", "\(path)")
            let same = try await s.call("GET", path, headers: ["If-None-Match": "\"x\", W/\(tag)"])
            #expect(same.status == 304 && same.body.isEmpty && same.headers["etag"] == tag, "\(path)")
            #expect(try await s.call("GET", path, headers: ["If-None-Match": "\"x\""]).status == 200, "\(path)")
        }
        for (method, path) in [
            ("GET", "/v1/queues/nope"), ("GET", "/metrics"),
            ("GET", "/healthz"), ("POST", "/v1/queues/q/visitors"), ("DELETE", "/v1/queues/q"),
        ] {
            let r = try await s.call(method, path)
            #expect(r.headers["cache-control"] == "no-store" && r.headers["etag"] == nil, "\(method) \(path)")
        }
    }

    /// `Prefer` as RFC 7240 spells it: preferences in a list, parameters
    /// after `;`, any case, spaces and tabs around tokens.
    @Test func preferIsReadAsTheRFCSpellsIt() async throws {
        let s = try await BackendApp(.memory)
        _ = try await s.call("PUT", "/v1/queues/q", #"{"capacity": 100}"#)
        for (n, prefer) in [
            "return=minimal", "RETURN=Minimal", "respond-async, return=minimal", "return = minimal",
            "return=minimal; a=b", "wait=5,return=minimal", " return=minimal ,x",
        ].enumerated() {
            let r = try await s.call("POST", "/v1/queues/q/visitors", #"{"id": "m\#(n)"}"#, headers: ["Prefer": prefer])
            #expect(r.body.isEmpty && r.headers["location"] == "/v1/queues/q/visitors/m\(n)", "\(prefer)")
        }
        for (n, prefer) in [
            "return=minimalx", "return=representation", "xreturn=minimal", "a; return=minimal", "", "return=",
        ].enumerated() {
            let r = try await s.call("POST", "/v1/queues/q/visitors", #"{"id": "f\#(n)"}"#, headers: ["Prefer": prefer])
            #expect(r.json["id"] as? String == "f\(n)" && r.headers["preference-applied"] == nil, "\(prefer)")
        }
    }

    /// `Prefer: return=minimal` on every kind and backend: the same status, no
    /// body, `Location` of the object (which reads as the full answer would
    /// have) and the headers of docs/api.md, "Minimal answers".
    @Test(arguments: both) func aMinimalAnswerHasTheStatusAndTheHeaders(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend)
        for (path, body) in [
            ("/v1/queues/q", #"{"capacity": 1}"#), ("/v1/windows/w", "{}"), ("/v1/pools/p", #"{"size": 1}"#),
            ("/v1/pipelines/p", "{}"),
        ] {
            #expect(try await s.call("PUT", path, s.put(body)).status == 201)
        }
        _ = try await s.call("PUT", "/v1/machines/m", #"{"definition": "player"}"#)
        let minimal = ["Prefer": "respond-async, return=minimal"]
        let made: [(path: String, body: String, status: String, fence: Bool, position: String?)] = [
            ("/v1/queues/q/visitors", #"{"id": "v1"}"#, "granted", true, nil),
            ("/v1/queues/q/visitors", #"{"id": "v2"}"#, "waiting", false, "1"),
            ("/v1/windows/w/show", #"{"id": "i1"}"#, "showing", true, nil),
            ("/v1/pools/p/fetch", #"{"id": "l1"}"#, "active", true, nil),
            ("/v1/pipelines/p/items", #"{"id": "p1", "payload": 1}"#, "ready", false, nil),
        ]
        for m in made {
            let r = try await s.call("POST", m.path, m.body, headers: minimal)
            #expect(r.status == 201 && r.body.isEmpty, "\(m.path): \(r.status) \(r.text)")
            #expect(r.headers["preference-applied"] == "return=minimal" && r.headers["content-type"] == nil)
            #expect(r.headers["usher-status"] == m.status, "\(m.path): \(r.headers)")
            #expect((r.headers["usher-fence"] != nil) == m.fence && r.headers["usher-position"] == m.position)
            let location = try #require(r.headers["location"], "\(m.path)")
            let read = try await s.call("GET", location)
            #expect(read.status == 200 && read.json["status"] as? String == m.status, "\(location): \(read.text)")
            #expect(read.json["fence"] as? Int == r.headers["usher-fence"].flatMap { Int($0) })
        }
        let lease = try await s.call("POST", "/v1/pools/p/recycle", #"{"lease": "l1"}"#, headers: minimal)
        #expect(lease.status == 200 && lease.body.isEmpty && lease.headers["usher-element"] == "el-1")
        let fired = try await s.call("POST", "/v1/machines/m/events/prepare", nil, headers: minimal)
        #expect(fired.status == 200 && fired.body.isEmpty && fired.headers["usher-state"] == "Ready")
        #expect(fired.headers["etag"] != nil && fired.headers["location"] == "/v1/machines/m")
        // Any other preference, or none: the whole object.
        let whole = try await s.call("GET", "/v1/queues/q/visitors/v1", headers: ["Prefer": "return=representation"])
        #expect(whole.status == 200 && whole.json["id"] as? String == "v1")
    }

    /// Events carry the objects `GET …/{id}` answers, with the same members
    /// (but those of a waiting visitor's place in line), on both backends.
    @Test(arguments: both) func eventsCarryTheObjectsReadsAnswer(_ backend: TestBackend) async throws {
        let s = try await BackendLiveServer(backend)
        for (path, body) in [
            ("/v1/queues/q", "{}"), ("/v1/windows/w", "{}"), ("/v1/pools/p", #"{"size": 1}"#),
            ("/v1/pipelines/p", "{}"),
        ] {
            #expect(try await s.call("PUT", path, s.put(body)).status == 201)
        }
        let events = try await AsyncSSEReader(port: s.live.port)
        let made = [
            ("queue", "POST", "/v1/queues/q/visitors", #"{"id": "v1"}"#, "/v1/queues/q/visitors/v1"),
            ("window", "POST", "/v1/windows/w/show", #"{"id": "i1"}"#, "/v1/windows/w/items/i1"),
            ("pool", "POST", "/v1/pools/p/fetch", #"{"id": "l1"}"#, "/v1/pools/p/leases/l1"),
            ("pipeline", "POST", "/v1/pipelines/p/items", #"{"id": "p1", "payload": 1}"#, "/v1/pipelines/p/items/p1"),
        ]
        for (kind, method, path, body, read) in made {
            let answer = try await s.call(method, path, body)
            #expect(answer.status == 201, "\(kind): \(answer.text)")
            let event = try #require(try await events.next())
            let object = try #require(event.data["data"] as? [String: Any], "\(kind): \(event.data)")
            let read = try await s.call("GET", read).json
            let place: Set<String> = ["position", "estimated_wait_seconds", "estimated_wait_reason"]
            #expect(
                Set(object.keys).subtracting(place) == Set(read.keys).subtracting(place),
                "\(kind): \(event.type) has \(object.keys.sorted()), GET \(read.keys.sorted())")
            #expect(Set(answer.json.keys) == Set(read.keys), "\(kind): the answer and GET differ")
        }
    }

    /// The member an answer wraps its object in: a schema whose one member is an object.
    private static func wrappingMember(_ body: [String: Any]?, in schemas: [String: Any]) -> String? {
        guard let members = body?["properties"] as? [String: Any], members.count == 1,
            let (member, inner) = members.first, resolve(inner, in: schemas)?["type"] as? String == "object"
        else { return nil }
        return member
    }

    private static func collectPropertyNames(_ value: Any, into names: inout Set<String>) {
        if let object = value as? [String: Any] {
            if let members = object["properties"] as? [String: Any] { names.formUnion(members.keys) }
            for inner in object.values { collectPropertyNames(inner, into: &names) }
        } else if let list = value as? [Any] {
            for inner in list { collectPropertyNames(inner, into: &names) }
        }
    }

    private static func schema(of response: Any?, in schemas: [String: Any]) -> [String: Any]? {
        let content = (response as? [String: Any])?["content"] as? [String: Any]
        return resolve((content?["application/json"] as? [String: Any])?["schema"], in: schemas)
    }

    /// A schema with its `$ref` followed.
    private static func resolve(_ schema: Any?, in schemas: [String: Any]) -> [String: Any]? {
        guard let schema = schema as? [String: Any] else { return nil }
        guard let ref = schema["$ref"] as? String else { return schema }
        return schemas[String(ref.split(separator: "/").last ?? "")] as? [String: Any]
    }
}
