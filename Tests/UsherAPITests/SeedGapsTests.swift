import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import UsherAPI

/// What the seed articles do that Usher once could not, on both backends.
@Suite struct SeedGapsTests {
    static let both = TestBackend.both

    /// Seed 001 makes a pool of N by an initializer: `{"size": N}` names them
    /// as grown elements are; the same body again is the same pool.
    @Test(arguments: both) func aPoolIsMadeByCount(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend)
        let made = try await s.call("PUT", "/v1/pools/x", s.put(#"{"size": 3}"#))
        #expect(made.status == 201, "\(made.text)")
        #expect(ids(made.json["elements"]) == ["el-1", "el-2", "el-3"])
        #expect(made.json["size"] as? Int == 3 && made.json["max_size"] as? Int == 3)
        #expect(try await s.call("PUT", "/v1/pools/x", s.put(#"{"size": 3}"#)).status == 200)
        #expect(try await s.call("PUT", "/v1/pools/x", s.put(#"{"size": 4}"#)).status == 409)

        let prefixed = try await s.call(
            "PUT", "/v1/pools/g", s.put(#"{"size": 1, "grow": {"max_size": 2, "prefix": "gpu-"}}"#))
        #expect(ids(prefixed.json["elements"]) == ["gpu-1"])
        let both = try await s.call("PUT", "/v1/pools/y", s.put(#"{"size": 2, "elements": ["a"]}"#))
        #expect(both.status == 400 && both.json["field"] as? String == "size", "\(both.text)")
        #expect(try await s.call("GET", "/v1/pools/y").status == 404)
    }

    /// A new growing pool has no elements yet and says what it can grow to.
    @Test(arguments: both) func aGrowingPoolSaysWhatItCanGrowTo(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend)
        let made = try await s.call("PUT", "/v1/pools/grows", s.put(#"{"grow": {"max_size": 4}}"#))
        #expect(made.json["size"] as? Int == 0 && made.json["max_size"] as? Int == 4, "\(made.text)")
        let listed = try await s.call("GET", "/v1/pools").json["pools"] as? [[String: Any]]
        #expect(listed?.first?["max_size"] as? Int == 4 && listed?.first?["size"] as? Int == 0)
    }

    /// No payload is dropped unless the config asks: two print jobs with one
    /// `key` both wait, two alerts with one `key` both queue; `opposites`
    /// alone still cancel by key.
    @Test(arguments: both) func nothingMergesUnlessAsked(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend)
        #expect(try await s.call("PUT", "/v1/queues/print", s.put(#"{"capacity": 1}"#)).status == 201)
        for id in ["h", "j1", "j2"] {
            let r = try await s.call(
                "POST", "/v1/queues/print/visitors", #"{"id": "\#(id)", "key": "doc", "payload": "\#(id)"}"#)
            #expect(r.status == 201 && r.json["status"] as? String != "merged", "\(r.text)")
        }
        #expect(try await s.call("PUT", "/v1/windows/alerts", s.put("{}")).status == 201)
        for id in ["berlin", "paris", "rome"] {
            let r = try await s.call("POST", "/v1/windows/alerts/show", #"{"id": "\#(id)", "key": "city"}"#)
            #expect(r.status == 201, "\(r.text)")
        }
        #expect(
            try await s.call("PUT", "/v1/queues/votes", s.put(#"{"opposites": [["like", "unlike"]]}"#)).status == 201)
        let config = try await s.call("GET", "/v1/queues/votes").json["config"] as? [String: Any]
        #expect(config?["dedup"] as? String == "key")
    }
}
