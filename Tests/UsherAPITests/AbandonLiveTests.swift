import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import UsherAPI

/// A client that stops showing up keeps nothing, over
/// real sockets: the README's job-3, left in line by a `?wait` that ended,
/// is granted later and released `unclaimed`; a visitor nobody asks about
/// is cancelled `abandoned`; one that keeps polling keeps its place.
/// Each test runs once on a memory queue and once on a Redis-backed one.
@Suite(.serialized) struct AbandonLiveTests {
    static let both = TestBackend.both

    private static let config =
        #"{"queues": {"printer": {"capacity": 1, "hold_seconds": 60, "idle_seconds": 2, "claim_seconds": 0.5}}}"#

    private func visitor(_ s: any BackendUnderTest, _ id: String) async throws -> [String: Any] {
        try await s.call("GET", "/v1/queues/printer/visitors/\(id)").json
    }

    private func counts(_ s: any BackendUnderTest) async throws -> [String: Any] {
        try #require(try await s.call("GET", "/v1/queues/printer").json["counts"] as? [String: Any])
    }

    /// Yields until `condition` holds, for up to 10 s.
    private func eventually(
        _ condition: () async throws -> Bool, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        #expect(try await poll(10, every: .milliseconds(50), condition), sourceLocation: sourceLocation)
    }

    @Test(arguments: both) func aGrantNobodyClaimsPassesOn(_ backend: TestBackend) async throws {
        let s = try await BackendLiveServer(backend, Self.config)
        #expect(try await s.call("POST", "/v1/queues/printer/visitors", #"{"id": "job-2"}"#).status == 201)
        let left = try await s.call("POST", "/v1/queues/printer/visitors?wait=0.2", #"{"id": "job-3"}"#)
        #expect(left.json["status"] as? String == "waiting")
        // job-3's script is gone; job-2 gives the slot back and job-3 gets it with nobody there.
        #expect(try await s.call("DELETE", "/v1/queues/printer/visitors/job-2").status == 200)
        try await eventually { try await counts(s)["holding"] as? Int == 0 }
        let job3 = try await visitor(s, "job-3")
        #expect(job3["status"] as? String == "released" && job3["reason"] as? String == "unclaimed")
        let c = try await counts(s)
        #expect(c["released_total"] as? Int == 2 && c["unclaimed_total"] as? Int == 1)
        // The printer is free for the next job at once.
        let next = try await s.call("POST", "/v1/queues/printer/visitors", #"{"id": "job-5"}"#)
        #expect(next.json["status"] as? String == "granted")
        let metrics = String(decoding: try await s.call("GET", "/metrics").body, as: UTF8.self)
        #expect(
            backend == .redis
                || metrics.contains(
                    #"usher_resource_events_total{kind="queues",name="printer",event="unclaimed"} 1"#)
        )
    }

    @Test(arguments: both) func aVisitorNobodyAsksAboutIsAbandoned(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, Self.config)
        _ = try await s.call("POST", "/v1/queues/printer/visitors", #"{"id": "a"}"#)
        _ = try await s.call("POST", "/v1/queues/printer/visitors", #"{"id": "gone"}"#)
        try await eventually { try await counts(s)["waiting"] as? Int == 0 }
        let gone = try await visitor(s, "gone")
        #expect(gone["status"] as? String == "cancelled" && gone["reason"] as? String == "abandoned")
        #expect(try await counts(s)["abandoned_total"] as? Int == 1)
    }

    @Test(arguments: both) func aClientThatKeepsPollingKeepsItsPlaceAndGetsTheSlot(_ backend: TestBackend)
        async throws
    {
        let s = try await BackendApp(backend, Self.config)
        _ = try await s.call("POST", "/v1/queues/printer/visitors", #"{"id": "a"}"#)
        _ = try await s.call("POST", "/v1/queues/printer/visitors?wait=0.1", #"{"id": "b"}"#)
        // A long-poll loop: each wait is shorter than idle_seconds, so b is heard of throughout.
        for _ in 0..<6 {
            let polled = try await s.call("POST", "/v1/queues/printer/visitors?wait=0.5", #"{"id": "b"}"#)
            #expect(polled.json["status"] as? String == "waiting")
        }
        let granted = s.start("POST", "/v1/queues/printer/visitors?wait=5", #"{"id": "b"}"#)
        await s.untilParked(1)
        #expect(try await s.call("POST", "/v1/queues/printer/visitors/a/complete").status == 200)
        #expect(try await granted.value.json["status"] as? String == "granted")
        // Its parked wait claimed the grant: it holds the slot past claim_seconds.
        try await Task.sleep(for: .seconds(1))
        #expect(try await visitor(s, "b")["status"] as? String == "granted")
        #expect(try await counts(s)["abandoned_total"] as? Int == 0)
    }

    /// Queues and pools: the resource path and the body that makes one.
    static let kinds = [("/v1/queues/q", "{}"), ("/v1/pools/p", #"{"elements": ["e1"]}"#)]

    @Test(arguments: both, kinds) func theBoundsAreConfigAndZeroMeansNever(
        _ backend: TestBackend, _ kind: (path: String, body: String)
    ) async throws {
        let s = try await BackendApp(backend)
        let made = try await s.call("PUT", kind.path, s.put(kind.body))
        let config = try #require(made.json["config"] as? [String: Any])
        #expect(config["idle_seconds"] as? Double == 30 && config["claim_seconds"] as? Double == 10)
        let patched = try await s.call("PATCH", kind.path, #"{"idle_seconds": 0, "claim_seconds": 0}"#)
        let after = try #require(patched.json["config"] as? [String: Any])
        #expect(after["idle_seconds"] as? Double == 0 && after["claim_seconds"] as? Double == 0)
        let bad = try await s.call("PATCH", kind.path, #"{"claim_seconds": 0.001}"#)
        #expect(bad.status == 400 && bad.json["field"] as? String == "claim_seconds")
    }

    @Test(arguments: both) func aLeaseFetchedAtOnceIsClaimedByItsOwnRequest(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend)
        _ = try await s.call("PUT", "/v1/pools/p", s.put(#"{"elements": ["e1"], "claim_seconds": 0.3}"#))
        #expect(try await s.call("POST", "/v1/pools/p/fetch", #"{"id": "mine"}"#).status == 201)
        try await Task.sleep(for: .seconds(1))
        let state = try await s.call("GET", "/v1/pools/p").json
        #expect((state["counts"] as? [String: Any])?["leased"] as? Int == 1)
        #expect((state["counts"] as? [String: Any])?["unclaimed_total"] as? Int == 0)
    }
}
