import Foundation
import HTTPTestClient
import TestSupport
import Testing

/// A fetch parked on an instance that dies keeps nothing: with two `usher`
/// processes on one Redis, process 0 parks a fetch and is killed. Left
/// waiting, the fetch is revoked `abandoned` `idle_seconds` after its wait
/// would have ended; granted with nobody there, its lease is recycled
/// `unclaimed` after `claim_seconds`, and the element goes to the next fetch.
@Suite(.serialized, .enabled(if: FileManager.default.fileExists(atPath: usherBinary.path)))
struct SharedPoolAbandonTests {
    static let body = #"{"backend": "redis", "elements": ["g1"], "idle_seconds": 1, "claim_seconds": 0.5}"#

    /// Two processes serving pool `gpus`, its one element leased through process 1 as `held`.
    private func start() async throws -> SharedRedisCluster {
        let cluster = try await SharedRedisCluster(count: 2)
        #expect(try cluster.ushers[1].call("PUT", "/v1/pools/gpus", Self.body).status == 201)
        let seen = await poll(5) { (try? cluster.ushers[0].call("GET", "/v1/pools/gpus").status) == 200 }
        #expect(seen)
        #expect(try cluster.ushers[1].call("POST", "/v1/pools/gpus/fetch", #"{"id": "held"}"#).status == 201)
        return cluster
    }

    /// Parks `POST …/fetch?wait=S {"id": "ghost"}` on process 0, then kills it.
    private func parkAndKill(_ cluster: SharedRedisCluster, wait: Double) async throws {
        let dying = cluster.ushers[0]
        DispatchQueue.global().async {
            _ = try? dying.call("POST", "/v1/pools/gpus/fetch?wait=\(wait)", #"{"id": "ghost"}"#, timeoutSeconds: 60)
        }
        // The pool's state, not the lease: a call naming the fetch would be hearing of its client.
        let parked = await poll(5) { counts(cluster)["waiting"] as? Int == 1 }
        #expect(parked)
        dying.kill()
    }

    private func lease(_ cluster: SharedRedisCluster, _ id: String) -> [String: Any] {
        (try? cluster.ushers[1].call("GET", "/v1/pools/gpus/leases/\(id)").json) ?? [:]
    }

    /// The pool's counts, with its `waiting` gauge.
    private func counts(_ cluster: SharedRedisCluster) -> [String: Any] {
        let state = try? cluster.ushers[1].call("GET", "/v1/pools/gpus").json
        return state?["counts"] as? [String: Any] ?? [:]
    }

    @Test func aFetchLeftByADeadInstanceIsAbandoned() async throws {
        let cluster = try await start()
        defer { cluster.stop() }
        try await parkAndKill(cluster, wait: 1)
        // Heard of until its wait's end (1 s), then idle_seconds (1 s) of silence.
        let abandoned = await poll(10) { counts(cluster)["abandoned_total"] as? Int == 1 }
        #expect(abandoned)
        let ghost = lease(cluster, "ghost")
        #expect(ghost["status"] as? String == "revoked" && ghost["reason"] as? String == "abandoned")
        #expect(counts(cluster)["waiting"] as? Int == 0)
        // The element, recycled, goes to a live fetch, not to the ghost.
        #expect(try cluster.ushers[1].call("POST", "/v1/pools/gpus/recycle", #"{"lease": "held"}"#).status == 200)
        let next = try cluster.ushers[1].call("POST", "/v1/pools/gpus/fetch", #"{"id": "next"}"#)
        #expect(next.status == 201 && next.json["element"] as? [String: Any] != nil)
    }

    @Test func aLeaseGrantedToADeadInstancesFetchIsRecycledUnclaimed() async throws {
        let cluster = try await start()
        defer { cluster.stop() }
        try await parkAndKill(cluster, wait: 30)
        #expect(try cluster.ushers[1].call("POST", "/v1/pools/gpus/recycle", #"{"lease": "held"}"#).status == 200)
        // Granted to the ghost with nobody there: recycled after claim_seconds, not lease_seconds (60).
        let recycled = await poll(10) { counts(cluster)["unclaimed_total"] as? Int == 1 }
        #expect(recycled)
        let ghost = lease(cluster, "ghost")
        #expect(ghost["status"] as? String == "recycled" && ghost["reason"] as? String == "unclaimed")
        let next = try cluster.ushers[1].call("POST", "/v1/pools/gpus/fetch", #"{"id": "next"}"#)
        #expect(next.status == 201 && next.json["element"] as? [String: Any] != nil)
    }
}
