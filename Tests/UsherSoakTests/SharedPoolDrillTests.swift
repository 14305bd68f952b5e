import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import Locking

/// Issue 17, "Tests": three `usher` processes sharing one `redis-server`,
/// clients on all three for 20 s against one pool: fetches with and without
/// waits, extends, recycles by lease and by element (often through another
/// process than the fetch's), leases left to expire, lease waits, and fetches
/// whose client gives up while waiting. Then every lease is read back and
/// checked (`PoolHistoryChecker`): no element under two leases at once,
/// fences strictly increasing per element in grant order, every lease ended;
/// and every answer a client got agrees with the end state.
@Suite(.serialized, .enabled(if: FileManager.default.fileExists(atPath: usherBinary.path)))
struct SharedPoolDrillTests {
    static let pool = "shared"
    /// Three elements, short leases: holders overlap, leases expire, waiters wait.
    /// Few enough grants that the pool's 1000 finished leases keep them all.
    static let poolBody = #"{"backend": "redis", "elements": ["e0", "e1", "e2"], "lease_seconds": 1}"#

    static func note(_ text: String) { print("[shared-redis] \(text)") }

    /// The cluster (`extra` in every process's config) with the pool created
    /// through process 0, once every process serves it.
    func start(extra: [String: Any] = [:]) async throws -> SharedRedisCluster {
        let cluster = try await SharedRedisCluster(extra: extra)
        let created = try cluster.ushers[0].call("PUT", "/v1/pools/\(Self.pool)", Self.poolBody)
        #expect(created.status == 201, "\(created.text)")
        for usher in cluster.ushers {
            let seen = await poll(5) { (try? usher.call("GET", "/v1/pools/\(Self.pool)").status) == 200 }
            #expect(seen, "usher \(usher.index) does not see the pool")
        }
        return cluster
    }

    @Test func twentySecondsOnThreeProcesses() async throws {
        let cluster = try await start()
        defer { cluster.stop() }
        let seconds = ProcessInfo.processInfo.environment["USHER_SOAK_SECONDS"].flatMap(Double.init) ?? 20
        let seed = UInt64(Date().timeIntervalSince1970)
        Self.note("pool: \(seconds) s run, seed \(seed)")
        let load = PoolLoad(ports: cluster.ushers.map(\.port), pool: Self.pool)
        await load.run(workers: 12, seconds: seconds, seed: seed)

        // Every lease ends: the last ones expire within a second.
        let settled = await poll(10) {
            let state = try? cluster.ushers[1].call("GET", "/v1/pools/\(Self.pool)?limit=0")
            return (state?.json["counts"] as? [String: Any])?["leased"] as? Int == 0
                && (state?.json["counts"] as? [String: Any])?["waiting"] as? Int == 0
        }
        #expect(settled, "leases or waiters left")
        let (outcomes, missing, failures) = await load.finalStates()
        #expect(failures.isEmpty, "\(failures.count) not read: \(failures.prefix(5))")
        let report = PoolHistoryChecker().check(outcomes)
        #expect(report.violations.isEmpty, "\(report.violations.count) violations: \(report.violations.prefix(10))")
        let disagreements = load.crossCheck(outcomes, missing: missing)
        #expect(disagreements.isEmpty, "\(disagreements.count) answers disagree: \(disagreements.prefix(10))")
        let counts = try #require(
            try cluster.ushers[2].call("GET", "/v1/pools/\(Self.pool)?limit=0").json["counts"] as? [String: Any])
        #expect(counts["fetched_total"] as? Int == outcomes.count, "\(counts)")
        #expect(cluster.deaths().isEmpty, "\(cluster.deaths())")
        Self.note("pool: \(load.summary()); \(missing.count) never leased (withdrawn)")
        Self.note("pool: \(report.summary)")
        // The mix did what it is for.
        #expect(report.byStatus["expired", default: 0] > 0 && report.byStatus["recycled", default: 0] > 0)
        #expect(outcomes.count > Int(seconds * 5) && outcomes.count < 1000)
        #expect(load.tally("fetch wait 201") > 0 && load.tally("fetch wait 409") > 0)
        #expect(load.tally("gave up") > 0 && load.tally("extend 200") > 0)
    }

    /// Waits until every lease of the pool has ended, reads them all back and
    /// checks them; the report. Leases asked for before `lostBefore` may be
    /// missing (Redis lost them); `allowed` are the statuses the load may see.
    func verify(
        _ load: PoolLoad, _ cluster: SharedRedisCluster, allowed: Set<Int>, lostBefore: Double = 0, label: String
    ) async throws -> PoolHistoryChecker.Report {
        let path = "/v1/pools/\(Self.pool)?limit=0"
        // Leases end by their expiry within a second; undelivered ones are recycled once Redis answers.
        let settled = await poll(10) {
            let state = try? cluster.ushers[1].call("GET", path)
            return (state?.json["counts"] as? [String: Any])?["leased"] as? Int == 0
                && (state?.json["counts"] as? [String: Any])?["waiting"] as? Int == 0
        }
        #expect(settled, "\(label): leases or waiters left")
        let (outcomes, missing, failures) = await load.finalStates()
        #expect(failures.isEmpty, "\(label): \(failures.count) not read: \(failures.prefix(5))")
        let report = PoolHistoryChecker().check(outcomes)
        #expect(
            report.violations.isEmpty,
            "\(label): \(report.violations.count) violations: \(report.violations.prefix(10))")
        let disagreements = load.crossCheck(outcomes, missing: missing, lostBefore: lostBefore)
        #expect(disagreements.isEmpty, "\(label): \(disagreements.count) answers disagree: \(disagreements.prefix(10))")
        let counts = try #require(try cluster.ushers[2].call("GET", path).json["counts"] as? [String: Any])
        #expect(counts["fetched_total"] as? Int == outcomes.count, "\(label): \(counts)")
        let statuses = load.statusCounts
        #expect(Set(statuses.keys).isSubset(of: allowed), "\(label): answers \(statuses)")
        #expect(load.badRefusals.isEmpty, "\(label): \(load.badRefusals.prefix(5))")
        #expect(cluster.deaths().isEmpty, "\(cluster.deaths())")
        Self.note("pool \(label): answers by status \(statuses.sorted { $0.key < $1.key })")
        let undelivered = outcomes.filter { $0.reason == "undelivered" }.count
        Self.note(
            "pool \(label): \(report.summary); \(undelivered) recycled undelivered; \(missing.count) never leased or lost"
        )
        return report
    }

    /// The fault drill: under the load, the subscriber connections killed
    /// twice, then Redis paused (SIGSTOP) for 5 s. Meanwhile the pool answers
    /// 503 `backend_unavailable` with `Retry-After` on every process, a memory
    /// pool and `/healthz` answer at once; after SIGCONT every process
    /// serves the pool again within seconds, and the leases keep the invariants.
    @Test func subscribersKilledAndRedisPaused() async throws {
        let cluster = try await start()
        defer { cluster.stop() }
        let path = "/v1/pools/\(Self.pool)"
        for usher in cluster.ushers {
            let local = try usher.call("PUT", "/v1/pools/local", #"{"elements": ["m0"]}"#)
            #expect(local.status == 201, "\(local.text)")
        }
        let seed = UInt64(Date().timeIntervalSince1970)
        let load = PoolLoad(ports: cluster.ushers.map(\.port), pool: Self.pool)
        let started = Date()
        async let running: Void = load.run(workers: 9, seconds: 12, seed: seed)
        try await cluster.killSubscribersThenPause(shared: path, memory: "/v1/pools/local", what: "pool")
        await running
        let report = try await verify(load, cluster, allowed: [200, 201, 409, 503], label: "drill (seed \(seed))")
        #expect(load.statusCounts[503, default: 0] > 0, "no 503 while Redis was paused")
        #expect(report.byStatus["expired", default: 0] > 0 && report.byStatus["recycled", default: 0] > 0)
        Self.note("pool drill: \(load.summary()); \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
    }

    /// Redis restarted empty under the load: the pool made by `PUT` is gone
    /// (404 on every process, 410 for a moment) until a `PUT` makes it anew,
    /// which all three serve; a pool the config declares comes back by
    /// itself. No process dies; fences after the loss are above those before,
    /// and the leases after it keep the invariants.
    @Test func redisRestartedEmpty() async throws {
        let declared = "declared"
        let declaration: [String: Any] = ["backend": "redis", "elements": ["d0", "d1"], "lease_seconds": 1]
        let cluster = try await start(extra: ["pools": [declared: declaration]])
        defer { cluster.stop() }
        let path = "/v1/pools/\(Self.pool)"
        let seed = UInt64(Date().timeIntervalSince1970)
        let load = PoolLoad(ports: cluster.ushers.map(\.port), pool: Self.pool)
        async let running: Void = load.run(workers: 9, seconds: 9, seed: seed)
        let (killed, restarted) = try await cluster.restartRedisEmpty(
            shared: path, declared: "/v1/pools/\(declared)", what: "pool")
        for usher in cluster.ushers {
            let state = try await onThread { try usher.call("GET", "/v1/pools/\(declared)") }
            #expect(state.json["size"] as? Int == 2, "usher \(usher.index): \(state.text)")
        }
        let declaredLease = try await onThread {
            try cluster.ushers[2].call("POST", "/v1/pools/\(declared)/fetch", #"{"id": "after-restart"}"#)
        }
        #expect(declaredLease.status == 201, "\(declaredLease.text)")
        // Made again through another process, it serves on all three.
        let recreate = try await onThread { try cluster.ushers[1].call("PUT", path, Self.poolBody) }
        #expect(recreate.status == 201, "\(recreate.text)")
        let recreated = Date()
        let serving = await cluster.recovery(path, since: recreated, timeout: 5)
        Self.note(
            "pool restart: Redis down \(String(format: "%.2f", restarted.timeIntervalSince(killed))) s; "
                + "after the PUT, serving in \(secondsList(serving))")
        #expect(serving.allSatisfy { $0 != nil }, "\(serving)")
        await running
        let report = try await verify(
            load, cluster, allowed: [200, 201, 404, 409, 410, 503], lostBefore: recreated.timeIntervalSince1970,
            label: "restart (seed \(seed))")
        #expect(report.byStatus.values.reduce(0, +) > 0, "no lease after the PUT")
        // Fences keep rising across the loss: the new pool's are above every old one.
        let before = load.grantedFences(asked: 0...killed.timeIntervalSince1970).max() ?? 0
        let after = load.grantedFences(asked: recreated.timeIntervalSince1970...Double.infinity).min() ?? .max
        #expect(before > 0 && before < after, "fence \(after) after the restart, \(before) before")
    }
}

/// The pool scenario's clients: each worker uses one process for its fetches
/// and another, often, for what follows; every lease id it asked for and
/// every answer it got are kept for the end.
final class PoolLoad: Sendable {
    let ports: [UInt16]
    let pool: String

    /// What a client learnt about one lease id.
    struct Seen: Sendable {
        /// The fetch answered a lease: its element and fence.
        var granted: (element: String, fence: Int)?
        /// A fetch with a wait answered `pool_exhausted`: the id never holds an element.
        var exhausted = false
        /// The client gave up waiting: either outcome.
        var gaveUp = false
        /// A recycle answered 200.
        var recycled = false
        /// When the fetch was sent (seconds since the epoch, client clock).
        var asked = 0.0
    }

    private let seen = Locked<[String: Seen]>([:])
    private let tallies = Locked<[String: Int]>([:])
    private let statuses = Locked<[Int: Int]>([:])
    private let refusals = Locked<[String]>([])

    init(ports: [UInt16], pool: String) {
        self.ports = ports
        self.pool = pool
    }

    func tally(_ what: String) -> Int { tallies.withLock { $0[what, default: 0] } }

    func summary() -> String {
        tallies.withLock { $0.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") }
    }

    /// How many answers had each status (0: none came), over every fetch, extend and recycle.
    var statusCounts: [Int: Int] { statuses.withLock { $0 } }

    /// The 503s that were not `backend_unavailable` with `Retry-After`.
    var badRefusals: [String] { refusals.withLock { $0 } }

    private func count(_ what: String) { tallies.withLock { $0[what, default: 0] += 1 } }

    /// Counts `r` as "`label` status", and checks a 503 names its cause and when to retry.
    private func answered(_ label: String, _ r: TestHTTPClient.Response?) {
        let status = r?.status ?? 0
        count("\(label) \(status)")
        statuses.withLock { $0[status, default: 0] += 1 }
        if let r, let problem = refusalProblem(status: status, code: r.code, retryAfter: r.headers["retry-after"]) {
            refusals.withLock { $0.append("\(label): \(problem)") }
        }
        // Refused at once (Redis down, the pool gone): a moment before the next try rather than a spin.
        if [0, 404, 410, 503].contains(status) { usleep(50_000) }
    }

    private func note(_ id: String, _ change: (inout Seen) -> Void) {
        seen.withLock { change(&$0[id, default: Seen()]) }
    }

    func run(workers: Int, seconds: Double, seed: UInt64) async {
        let end = Date().addingTimeInterval(seconds)
        await onThreads(workers) { [self] w in
            var random = SplitMix64(seed: seed &+ UInt64(w))
            let home = w % ports.count
            let clients = ports.map { TestHTTPClient(port: $0, timeoutSeconds: 15) }
            let base = "/v1/pools/\(pool)"
            var n = 0
            while Date() < end {
                n += 1
                let id = "w\(w)-\(n)"
                note(id) { $0.asked = Date().timeIntervalSince1970 }
                let other = clients[random.below(ports.count)]
                let body = #"{"id": "\#(id)", "holder": "w\#(w)"}"#
                let action = random.below(10)
                if action == 0 {
                    // A client that gives up while waiting: the server withdraws its fetch.
                    note(id) { $0.gaveUp = true }
                    count("gave up")
                    let impatient = TestHTTPClient(port: ports[random.below(ports.count)], timeoutSeconds: 1)
                    _ = try? impatient.request("POST", base + "/fetch?wait=5", body: body)
                    impatient.disconnect()
                    continue
                }
                // Most waits outlast a holder; short ones often end pool_exhausted.
                let path = action == 1 ? base + "/fetch" : base + "/fetch?wait=" + (action == 2 ? "0.2" : "2")
                let answer = try? clients[home].request("POST", path, body: body)
                answered(action == 1 ? "fetch" : "fetch wait", answer)
                guard let got = answer else {
                    note(id) { $0.gaveUp = true }
                    continue
                }
                guard got.status == 201, let lease = got.json as [String: Any]?,
                    let element = (lease["element"] as? [String: Any])?["id"] as? String,
                    let fence = lease["fence"] as? Int
                else {
                    if got.code == "pool_exhausted" && action != 1 { note(id) { $0.exhausted = true } }
                    if got.status != 409 { note(id) { $0.gaveUp = true } }
                    continue
                }
                note(id) { $0.granted = (element, fence) }
                usleep(UInt32(random.below(300_000)))
                switch random.below(10) {
                case 0, 1:
                    count("left to expire")
                case 2, 3:
                    let extended = try? other.request("POST", base + "/leases/\(id)/extend", body: "{}")
                    answered("extend", extended)
                    usleep(UInt32(random.below(200_000)))
                    recycle(id, element: nil, through: clients[random.below(ports.count)])
                case 4:
                    // A lease wait on another process, answered when the recycle ends the lease.
                    let port = ports[(home + 1) % ports.count]
                    let watcher = Thread {
                        let reader = TestHTTPClient(port: port, timeoutSeconds: 5)
                        _ = try? reader.request("GET", base + "/leases/\(id)?wait=2")
                    }
                    watcher.start()
                    recycle(id, element: element, through: other)
                default:
                    recycle(id, element: random.below(3) == 0 ? element : nil, through: other)
                }
            }
        }
    }

    private func recycle(_ id: String, element: String?, through client: TestHTTPClient) {
        let body = element.map { #"{"element": "\#($0)"}"# } ?? #"{"lease": "\#(id)"}"#
        let r = try? client.request("POST", "/v1/pools/\(pool)/recycle", body: body)
        answered("recycle", r)
        // By element, the 200 may name a later lease of the element (this one expired first).
        if r?.status == 200, r?.json["id"] as? String == id {
            note(id) { $0.recycled = true }
        }
    }

    /// The fences clients were granted for fetches sent in `range` (seconds since the epoch).
    func grantedFences(asked range: ClosedRange<Double>) -> [Int] {
        seen.withLock { $0.values.filter { range.contains($0.asked) }.compactMap { $0.granted?.fence } }
    }

    /// Every lease id asked for, read back: the leases, the ids with none, reads that failed.
    func finalStates() async -> (outcomes: [LeaseOutcome], missing: [String], failures: [String]) {
        let ids = seen.withLock { Array($0.keys) }
        let ports = ports
        let pool = pool
        let results = Locked<(outcomes: [LeaseOutcome], missing: [String], failures: [String])>(([], [], []))
        await onThreads(ports.count) { lane in
            let client = TestHTTPClient(port: ports[lane])
            for id in ids.enumerated().filter({ $0.offset % ports.count == lane }).map(\.element) {
                let r = try? client.request("GET", "/v1/pools/\(pool)/leases/\(id)")
                if r?.status == 404 {
                    results.withLock { $0.missing.append(id) }
                } else if let lease = r?.json as [String: Any]?, let outcome = LeaseOutcome(lease) {
                    results.withLock { $0.outcomes.append(outcome) }
                } else {
                    results.withLock { $0.failures.append("\(id): \(r?.text ?? "no answer")") }
                }
            }
        }
        return results.withLock { $0 }
    }

    /// What clients were told against the end state: a lease they got has
    /// that element and fence; one they recycled is `recycled`; a wait that
    /// ended `pool_exhausted` left no lease behind. Leases asked for before
    /// `lostBefore` (seconds since the epoch) may be missing: Redis lost them.
    func crossCheck(_ outcomes: [LeaseOutcome], missing: [String], lostBefore: Double = 0) -> [String] {
        Self.crossCheck(seen: seen.withLock { $0 }, outcomes, missing: missing, lostBefore: lostBefore)
    }

    /// `crossCheck` on what clients saw, by lease id.
    static func crossCheck(seen: [String: Seen], _ outcomes: [LeaseOutcome], missing: [String], lostBefore: Double)
        -> [String]
    {
        let missing = Set(missing)
        let byID = Dictionary(outcomes.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        var problems: [String] = []
        for (id, s) in seen {
            let end = byID[id]
            if end == nil, s.asked < lostBefore { continue }
            if let (element, fence) = s.granted {
                if end?.element != element || end?.fence != Int64(fence) {
                    problems.append("\(id): got \(element) fence \(fence), end state \(String(describing: end))")
                }
            } else if s.exhausted, !s.gaveUp, let end {
                problems.append("\(id): its wait ended pool_exhausted, but it has a lease (\(end.status))")
            }
            if s.recycled, end?.status != "recycled" {
                problems.append("\(id): recycled, but ends \(end?.status ?? "missing")")
            }
            if end == nil && !missing.contains(id) { problems.append("\(id): not read") }
        }
        return problems
    }
}
