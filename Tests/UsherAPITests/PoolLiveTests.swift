import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import Locking
@testable import UsherAPI

/// Pools over HTTP: every route and error code (docs/api.md, Pools), each test once
/// with memory pools and once with pools kept in a redis-server of the
/// test's own (`BackendLiveServer`).
@Suite(.serialized) struct PoolLiveTests {
    static let both = TestBackend.both

    /// Waits (at most 5 s) until `n` fetchers wait in the pool's line. Parked
    /// is not yet in line: a wait joins the line on a task after its
    /// connection is parked.
    static func untilWaiting(_ s: any BackendUnderTest, _ pool: String, _ n: Int) async {
        _ = await poll(5) { (try? await s.call("GET", "/v1/pools/\(pool)"))?.counts["waiting"] as? Int == n }
    }

    static func untilWaiting(_ s: any UsherUnderTest, _ pool: String, _ n: Int) {
        _ = pollBlocking(2, every: 2) { (try? s.call("GET", "/v1/pools/\(pool)"))?.counts["waiting"] as? Int == n }
    }

    static let gpus = #"{"pools": {"gpus": {"elements": ["gpu-0", {"id": "gpu-1", "data": {"mem": 24}}]}}}"#

    @Test(arguments: both) func lifecycle(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend)
        let created = try await s.call(
            "PUT", "/v1/pools/seats", s.put(#"{"elements": ["s1", "s2"], "lease_seconds": 30}"#))
        #expect(created.status == 201)
        #expect(created.json["size"] as? Int == 2 && created.counts["available"] as? Int == 2)
        #expect((created.json["elements"] as? [[String: Any]])?.map { $0["status"] as? String } == ["free", "free"])
        let same = s.put(#"{"elements": ["s1", "s2"], "lease_seconds": 30, "max_waiting": 1000}"#)
        #expect(try await s.call("PUT", "/v1/pools/seats", same).status == 200)
        // Elements added later do not count in the comparison.
        #expect(try await s.call("PUT", "/v1/pools/seats/elements/s3", "{}").status == 201)
        let again = s.put(#"{"elements": ["s1", "s2"], "lease_seconds": 30}"#)
        #expect(try await s.call("PUT", "/v1/pools/seats", again).status == 200)
        let other = s.put(#"{"elements": ["s1"], "lease_seconds": 30}"#)
        #expect(try await s.call("PUT", "/v1/pools/seats", other).code == "already_exists")
        let list = try await s.call("GET", "/v1/pools")
        #expect((list.json["pools"] as? [[String: Any]])?.first?["size"] as? Int == 3)
        let patched = try await s.call(
            "PATCH", "/v1/pools/seats", #"{"lease_seconds": 10, "grow": {"max_size": 5, "prefix": "s-"}}"#)
        #expect((patched.json["config"] as? [String: Any])?["lease_seconds"] as? Int == 10)
        let noElements = try await s.call("PATCH", "/v1/pools/seats", #"{"elements": []}"#)
        #expect(noElements.status == 400 && (noElements.json["detail"] as? String)?.contains("elements/{id}") == true)
        #expect(try await s.call("DELETE", "/v1/pools/seats").status == 204)
        #expect(try await s.call("GET", "/v1/pools/seats").status == 404)
        #expect(try await s.call("POST", "/v1/pools/seats/fetch").status == 404)
    }

    @Test(arguments: both) func fetchRecycleAndState(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, Self.gpus)
        let a = try await s.call("POST", "/v1/pools/gpus/fetch", #"{"holder": "job-1"}"#)
        #expect(a.status == 201)
        let lease = a.json
        #expect((lease["element"] as? [String: Any])?["id"] as? String == "gpu-0")
        #expect(lease["holder"] as? String == "job-1" && lease["fence"] is Int && lease["expires_at"] is String)
        let b = try await s.call("POST", "/v1/pools/gpus/fetch", #"{"id": "job-2", "lease_seconds": 5}"#)
        let bLease = b.json
        #expect(((bLease["element"] as? [String: Any])?["data"] as? [String: Any])?["mem"] as? Int == 24)
        #expect(
            try await s.call("POST", "/v1/pools/gpus/fetch", #"{"id": "job-2"}"#).json as NSDictionary
                == bLease as NSDictionary)
        let exhausted = try await s.call("POST", "/v1/pools/gpus/fetch")
        #expect(exhausted.status == 409 && exhausted.code == "pool_exhausted")
        #expect(exhausted.json["next_expiry_at"] as? String == bLease["expires_at"] as? String)

        let state = try await s.call("GET", "/v1/pools/gpus")
        #expect(
            state.counts["leased"] as? Int == 2 && state.counts["available"] as? Int == 0
                && state.counts["waiting"] as? Int == 0)
        let elements = try #require(state.json["elements"] as? [[String: Any]])
        #expect(elements.map { $0["id"] as? String } == ["gpu-0", "gpu-1"])
        #expect((elements[1]["lease"] as? [String: Any])?["id"] as? String == "job-2")

        let byLease = try await s.call("POST", "/v1/pools/gpus/recycle", #"{"lease": "job-2"}"#)
        #expect(byLease.status == 200 && byLease.json["status"] as? String == "recycled")
        let again = try await s.call("POST", "/v1/pools/gpus/recycle", #"{"lease": "job-2"}"#)
        #expect(
            again.status == 409 && again.code == "not_leased" && again.json["current_status"] as? String == "recycled")
        let byElement = try await s.call("POST", "/v1/pools/gpus/recycle", #"{"element": "gpu-0"}"#)
        #expect(byElement.status == 200)
        #expect(try await s.call("POST", "/v1/pools/gpus/recycle", #"{"element": "gpu-0"}"#).code == "not_leased")
        #expect(try await s.call("POST", "/v1/pools/gpus/recycle", #"{"element": "gpu-9"}"#).status == 404)
        #expect(try await s.call("POST", "/v1/pools/gpus/recycle", #"{"lease": "nope"}"#).status == 404)
        let counts = try #require(try await s.call("GET", "/v1/pools/gpus").json["counts"] as? [String: Any])
        #expect(counts["fetched_total"] as? Int == 2 && counts["recycled_total"] as? Int == 2)
        #expect(counts["expired_total"] as? Int == 0 && counts["grown_total"] as? Int == 0)
    }

    @Test(arguments: both) func extend(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, #"{"pools": {"p": {"elements": ["a"], "lease_seconds": 60}}}"#)
        _ = try await s.call("POST", "/v1/pools/p/fetch", #"{"id": "l", "lease_seconds": 10}"#)
        let extended = try await s.call("POST", "/v1/pools/p/leases/l/extend", #"{"lease_seconds": 50}"#)
        #expect(extended.status == 200 && extended.json["status"] as? String == "active")
        let tooLong = try await s.call("POST", "/v1/pools/p/leases/l/extend", #"{"lease_seconds": 61}"#)
        #expect(tooLong.status == 400 && tooLong.json["field"] as? String == "lease_seconds")
        #expect(try await s.call("POST", "/v1/pools/p/leases/nope/extend").status == 404)
        _ = try await s.call("POST", "/v1/pools/p/recycle", #"{"lease": "l"}"#)
        #expect(try await s.call("POST", "/v1/pools/p/leases/l/extend").code == "not_leased")
    }

    @Test(arguments: both) func extendNeverShortensALease(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, #"{"pools": {"p": {"elements": ["a"], "lease_seconds": 60}}}"#)
        let fetched = try await s.call("POST", "/v1/pools/p/fetch", #"{"id": "l"}"#)
        let expiresAt = try #require(fetched.json["expires_at"] as? String)
        let shorter = try await s.call("POST", "/v1/pools/p/leases/l/extend", #"{"lease_seconds": 1}"#)
        #expect(shorter.status == 200)
        #expect(shorter.json["expires_at"] as? String == expiresAt)
    }

    @Test(arguments: both) func elementsAtRunTime(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, Self.gpus)
        let added = try await s.call("PUT", "/v1/pools/gpus/elements/gpu-2", #"{"data": {"mem": 80}}"#)
        #expect(added.status == 201 && added.json["status"] as? String == "free")
        let replaced = try await s.call("PUT", "/v1/pools/gpus/elements/gpu-2", #"{"data": {"mem": 40}}"#)
        #expect(replaced.status == 200)
        #expect((replaced.json["data"] as? [String: Any])?["mem"] as? Int == 40 && replaced.json["element"] == nil)
        _ = try await s.call("POST", "/v1/pools/gpus/fetch", #"{"id": "mine"}"#)
        let leased = try await s.call("DELETE", "/v1/pools/gpus/elements/gpu-0")
        #expect(leased.status == 409 && leased.code == "element_leased" && leased.json["lease"] as? String == "mine")
        let forced = try await s.call("DELETE", "/v1/pools/gpus/elements/gpu-0?force=true")
        #expect(forced.status == 200 && forced.json["id"] as? String == "gpu-0")
        #expect(forced.json["status"] as? String == "removed")
        #expect((forced.json["lease"] as? [String: Any])?["status"] as? String == "revoked")
        let holder = try await s.call("POST", "/v1/pools/gpus/recycle", #"{"lease": "mine"}"#)
        #expect(
            holder.status == 409 && holder.code == "not_leased" && holder.json["current_status"] as? String == "revoked"
        )
        let free = try await s.call("DELETE", "/v1/pools/gpus/elements/gpu-1")
        #expect(free.status == 200 && free.json["status"] as? String == "removed" && free.json["lease"] is NSNull)
        #expect(try await s.call("DELETE", "/v1/pools/gpus/elements/gpu-1").status == 404)
        #expect(try await s.call("DELETE", "/v1/pools/gpus/elements/gpu-2?force=maybe").status == 400)
        let state = try await s.call("GET", "/v1/pools/gpus")
        #expect((state.json["elements"] as? [[String: Any]])?.map { $0["id"] as? String } == ["gpu-2"])
        #expect((state.json["counts"] as? [String: Any])?["revoked_total"] as? Int == 1)
    }

    @Test(arguments: both) func growCreatesElementsUpToMaxSize(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, #"{"pools": {"p": {"grow": {"max_size": 2, "prefix": "el-"}}}}"#)
        var ids: [String?] = []
        for _ in 0..<2 {
            let lease = try await s.call("POST", "/v1/pools/p/fetch").json as [String: Any]?
            ids.append((lease?["element"] as? [String: Any])?["id"] as? String)
        }
        #expect(ids == ["el-1", "el-2"])
        #expect(try await s.call("POST", "/v1/pools/p/fetch").code == "pool_exhausted")
        #expect((try await s.call("GET", "/v1/pools/p").json["counts"] as? [String: Any])?["grown_total"] as? Int == 2)
    }

    @Test(arguments: both) func badInputIs400(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, Self.gpus)
        let cases: [(String, String, String?, String)] = [
            ("POST", "/v1/pools/gpus/fetch", #"{"holdr": "x"}"#, "holdr"),
            ("POST", "/v1/pools/gpus/fetch", #"{"lease_seconds": 61}"#, "lease_seconds"),
            ("POST", "/v1/pools/gpus/fetch", #"{"lease_seconds": 0}"#, "lease_seconds"),
            ("POST", "/v1/pools/gpus/fetch?wiat=1", "{}", "wiat"),
            ("POST", "/v1/pools/gpus/recycle", "{}", "lease and element"),
            ("POST", "/v1/pools/gpus/recycle", #"{"lease": "a", "element": "b"}"#, "lease and element"),
            ("PUT", "/v1/pools/gpus/elements/x", #"{"dta": 1}"#, "dta"),
            ("PUT", "/v1/pools/new", #"{"elements": ["a", "a"]}"#, "duplicate"),
            ("PUT", "/v1/pools/new", #"{"grow": {"prefix": "x"}}"#, "max_size"),
        ]
        for (method, path, body, mention) in cases {
            let r = try await s.call(method, path, body)
            #expect(r.status == 400 && r.code == "bad_request", "\(method) \(path) \(body ?? "")")
            #expect((r.json["detail"] as? String)?.contains(mention) == true, "\(r.text) should mention \(mention)")
        }
    }

    @Test(arguments: both) func aWaitingFetchIsServedByARecycle(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, Self.gpus)
        _ = try await s.call("POST", "/v1/pools/gpus/fetch", #"{"id": "a"}"#)
        _ = try await s.call("POST", "/v1/pools/gpus/fetch", #"{"id": "b"}"#)
        let started = Date()
        let waiting = s.start("POST", "/v1/pools/gpus/fetch?wait=10", #"{"id": "w", "holder": "late"}"#)
        await Self.untilWaiting(s, "gpus", 1)
        #expect((try await s.call("GET", "/v1/pools/gpus")).counts["waiting"] as? Int == 1)
        #expect(try await s.call("POST", "/v1/pools/gpus/recycle", #"{"element": "gpu-1"}"#).status == 200)
        let r = try await waiting.value
        #expect(r.status == 201)
        let lease = r.json
        #expect(lease["id"] as? String == "w" && (lease["element"] as? [String: Any])?["id"] as? String == "gpu-1")
        #expect(Date().timeIntervalSince(started) < 5)
    }

    @Test(arguments: both) func aWaitThatEndsIsPoolExhausted(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, #"{"pools": {"p": {"elements": ["a"]}}}"#)
        _ = try await s.call("POST", "/v1/pools/p/fetch")
        let started = Date()
        let r = try await s.call("POST", "/v1/pools/p/fetch?wait=0.3")
        #expect(r.status == 409 && r.code == "pool_exhausted" && r.json["next_expiry_at"] is String)
        #expect(Date().timeIntervalSince(started) >= 0.25)
        #expect((try await s.call("GET", "/v1/pools/p")).counts["waiting"] as? Int == 0)
    }

    @Test(arguments: both) func moreWaitingFetchersThanMaxWaitingIs429(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, #"{"pools": {"p": {"elements": ["a"], "max_waiting": 1}}}"#)
        _ = try await s.call("POST", "/v1/pools/p/fetch", #"{"id": "held"}"#)
        let first = s.start("POST", "/v1/pools/p/fetch?wait=20", #"{"id": "first"}"#)
        await Self.untilWaiting(s, "p", 1)
        let full = try await s.call("POST", "/v1/pools/p/fetch?wait=5")
        #expect(full.status == 429 && full.code == "queue_full" && full.headers["retry-after"] != nil)
        // Without wait nothing would wait: pool_exhausted.
        #expect(try await s.call("POST", "/v1/pools/p/fetch").code == "pool_exhausted")
        _ = try await s.call("POST", "/v1/pools/p/recycle", #"{"lease": "held"}"#)
        let r = try await first.value
        #expect(r.status == 201 && r.json["id"] as? String == "first")
    }

    @Test(arguments: both) func anExpiredLeaseServesAWaitingFetcher(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, #"{"pools": {"p": {"elements": ["a"], "lease_seconds": 60}}}"#)
        _ = try await s.call("POST", "/v1/pools/p/fetch", #"{"lease_seconds": 0.2}"#)
        let r = try await s.call("POST", "/v1/pools/p/fetch?wait=5", #"{"id": "next"}"#)
        #expect(r.status == 201 && r.json["id"] as? String == "next")
        let counts = try #require(try await s.call("GET", "/v1/pools/p").json["counts"] as? [String: Any])
        #expect(counts["expired_total"] as? Int == 1 && counts["recycled_total"] as? Int == 0)
    }

    @Test(arguments: both) func waitersOfADeletedPoolGet410AndShutdown503(_ backend: TestBackend) async throws {
        let s = try await BackendApp(
            backend, #"{"pools": {"p": {"elements": ["a"]}, "q": {"elements": ["a"]}}}"#)
        _ = try await s.call("POST", "/v1/pools/p/fetch")
        _ = try await s.call("POST", "/v1/pools/q/fetch")
        let deleted = s.start("POST", "/v1/pools/p/fetch?wait=10")
        let stopping = s.start("POST", "/v1/pools/q/fetch?wait=10")
        await s.untilParked(2)
        #expect(try await s.call("DELETE", "/v1/pools/p").status == 204)
        let gone = try await deleted.value
        #expect(gone.status == 410 && gone.code == "gone")
        #expect(s.shutdown())
        let r = try await stopping.value
        #expect(r.status == 503 && r.code == "shutting_down")
    }

    /// Many fetchers and recyclers at once: no element is ever leased to two
    /// holders at the same time, and fences on each element only grow.
    @Test func concurrentFetchersAndRecyclersNeverShareAnElement() throws {
        let elements = 4
        let threads = 24
        let rounds = 15
        let names = (0..<elements).map { "\"e\($0)\"" }.joined(separator: ",")
        let s = try LiveServer(
            #"{"pools": {"p": {"elements": [\#(names)], "lease_seconds": 30, "max_waiting": 1000}}}"#)
        let holders = Locked<[String: String]>([:])  // element → lease holding it, as the clients see it
        let lastFence = Locked<[String: Int]>([:])
        let failures = Locked<[String]>([])
        let group = DispatchGroup()
        for t in 0..<threads {
            group.enter()
            Thread {
                defer { group.leave() }
                let c = s.client()
                for r in 0..<rounds {
                    let id = "t\(t)-\(r)"
                    do {
                        let got = try c.request(
                            "POST", "/v1/pools/p/fetch?wait=20", body: #"{"id": "\#(id)", "holder": "t\#(t)"}"#)
                        guard got.status == 201, let lease = got.json as [String: Any]?,
                            let element = (lease["element"] as? [String: Any])?["id"] as? String,
                            let fence = lease["fence"] as? Int
                        else {
                            failures.withLock { $0.append("\(id) fetch: \(got.status) \(got.text)") }
                            continue
                        }
                        holders.withLock { h in
                            if let other = h[element] {
                                failures.withLock { $0.append("\(element): \(other) and \(id)") }
                            }
                            h[element] = id
                        }
                        lastFence.withLock { f in
                            if fence <= f[element, default: 0] {
                                failures.withLock { $0.append("\(element): fence \(fence) not growing") }
                            }
                            f[element] = fence
                        }
                        usleep(UInt32.random(in: 0...500))
                        // Let go first, then recycle: the next holder may get it the moment it is recycled.
                        holders.withLock { $0[element] = nil }
                        let body = r % 3 == 0 ? #"{"element": "\#(element)"}"# : #"{"lease": "\#(id)"}"#
                        let done = try c.request("POST", "/v1/pools/p/recycle", body: body)
                        if done.status != 200 { failures.withLock { $0.append("\(id) recycle: \(done.text)") } }
                    } catch {
                        failures.withLock { $0.append("\(id): \(error)") }
                    }
                }
            }.start()
        }
        #expect(group.wait(timeout: .now() + 60) == .success)
        #expect(failures.withLock { $0 } == [])
        let state = try s.call("GET", "/v1/pools/p")
        let counts = try #require(state.json["counts"] as? [String: Any])
        #expect(counts["fetched_total"] as? Int == threads * rounds)
        #expect(counts["recycled_total"] as? Int == threads * rounds)
        #expect(state.counts["leased"] as? Int == 0 && state.counts["waiting"] as? Int == 0)
    }
}
