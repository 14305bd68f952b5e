import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import Locking

/// Issue 17 for windows: three `usher` processes sharing one `redis-server`,
/// clients on all three showing, dismissing (the item shown, or one by id)
/// and reading what is shown for ~10 s, with display times ending by
/// themselves. Then: never two items shown at once (by each item's
/// `shown_at`/`finished_at`, in fence order), fences rising with the showing
/// times, and every item ends (`dismissed`, `expired` or `merged`).
@Suite(.serialized, .enabled(if: FileManager.default.fileExists(atPath: usherBinary.path)))
struct SharedWindowDrillTests {
    static let window = "screen"
    static let body = #"{"backend": "redis", "display_seconds": 0.1, "dedup": "key"}"#

    static func note(_ text: String) { print("[shared-redis] \(text)") }

    /// The cluster (`extra` in every process's config) with the window
    /// created through process 0, once every process serves it.
    func start(extra: [String: Any] = [:]) async throws -> SharedRedisCluster {
        let cluster = try await SharedRedisCluster(extra: extra)
        let path = "/v1/windows/\(Self.window)"
        let created = try cluster.ushers[0].call("PUT", path, Self.body)
        #expect(created.status == 201, "\(created.text)")
        for usher in cluster.ushers {
            let seen = await poll(5) { (try? usher.call("GET", path).status) == 200 }
            #expect(seen, "usher \(usher.index) does not see the window")
        }
        return cluster
    }

    /// Empties the window, reads every item back and checks them; the
    /// report. Items sent before `lostBefore` may be missing (Redis lost them).
    func verify(_ load: WindowLoad, _ cluster: SharedRedisCluster, lostBefore: Double = 0, label: String) async
        -> Report
    {
        let unexpected = load.unexpected
        #expect(unexpected.isEmpty, "\(label): \(unexpected.count) unexpected answers: \(unexpected.prefix(5))")
        #expect(cluster.deaths().isEmpty, "\(cluster.deaths())")
        // Every item ends: dismiss what is left until the window is empty.
        let path = "/v1/windows/\(Self.window)"
        let emptied = await poll(10) {
            _ = try? cluster.ushers[1].call("POST", "\(path)/dismiss", "{}")
            guard let state = try? cluster.ushers[2].call("GET", path) else { return false }
            return state.json["showing"] is NSNull && (state.json["queued"] as? [Any])?.isEmpty == true
        }
        #expect(emptied, "\(label): the window did not empty")
        let (items, unread) = load.readBack(lostBefore: lostBefore)
        #expect(unread.isEmpty, "\(label): \(unread.count) items not read: \(unread.prefix(5))")
        let report = Self.check(items)
        #expect(
            report.violations.isEmpty,
            "\(label): \(report.violations.count) violations: \(report.violations.prefix(10))")
        Self.note(
            "windows \(label): \(load.calls) calls \(load.statusCounts.sorted { $0.key < $1.key }), "
                + "\(items.count) items, \(report.shown) shown; \(report.byStatus.sorted { $0.key < $1.key })")
        return report
    }

    @Test func tenSecondsOfShowAndDismissOnThreeProcesses() async throws {
        let cluster = try await start()
        defer { cluster.stop() }
        let seconds = ProcessInfo.processInfo.environment["USHER_SOAK_SECONDS"].flatMap(Double.init) ?? 10
        let load = WindowLoad(ports: cluster.ushers.map(\.port), window: Self.window)
        await load.run(workers: 6, seconds: seconds)
        let report = await verify(load, cluster, label: "\(seconds) s on 3 processes")
        #expect(report.shown > 50 && report.byStatus["expired", default: 0] > 0)
        #expect(report.byStatus["dismissed", default: 0] > 0)
    }

    /// The fault drill: under the load, the subscriber connections killed
    /// twice, then Redis paused (SIGSTOP) for 5 s. Meanwhile the window
    /// answers 503 `backend_unavailable` with `Retry-After` on every process,
    /// a memory window and `/healthz` answer at once; after SIGCONT every
    /// process serves the window again within seconds, never two items shown at once.
    @Test func subscribersKilledAndRedisPaused() async throws {
        let cluster = try await start()
        defer { cluster.stop() }
        let path = "/v1/windows/\(Self.window)"
        for usher in cluster.ushers {
            let local = try usher.call("PUT", "/v1/windows/local", "{}")
            #expect(local.status == 201, "\(local.text)")
        }
        let load = WindowLoad(ports: cluster.ushers.map(\.port), window: Self.window, tolerated: [503])
        let started = Date()
        async let running: Void = load.run(workers: 6, seconds: 12)
        try await cluster.killSubscribersThenPause(shared: path, memory: "/v1/windows/local", what: "window")
        await running
        let report = await verify(load, cluster, label: "drill")
        #expect(load.statusCounts[503, default: 0] > 0, "no 503 while Redis was paused")
        #expect(report.shown > 20 && report.byStatus["expired", default: 0] > 0)
        Self.note("windows drill: \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
    }

    /// Redis restarted empty under the load: the window made by `PUT` is gone
    /// (404 on every process) until a `PUT` makes it anew, which all three
    /// serve; a window the config declares comes back by itself; no process
    /// dies, and the items after the loss keep the invariants.
    @Test func redisRestartedEmpty() async throws {
        let declared = "declared"
        let cluster = try await start(extra: ["windows": [declared: ["backend": "redis", "display_seconds": 1]]])
        defer { cluster.stop() }
        let path = "/v1/windows/\(Self.window)"
        let load = WindowLoad(ports: cluster.ushers.map(\.port), window: Self.window, tolerated: [404, 410, 503])
        async let running: Void = load.run(workers: 6, seconds: 8)
        let (killed, restarted) = try await cluster.restartRedisEmpty(
            shared: path, declared: "/v1/windows/\(declared)", what: "window")
        let recreate = try await onThread { try cluster.ushers[1].call("PUT", path, Self.body) }
        #expect(recreate.status == 201, "\(recreate.text)")
        let recreated = Date()
        let serving = await cluster.recovery(path, since: recreated, timeout: 5)
        Self.note(
            "windows restart: Redis down \(String(format: "%.2f", restarted.timeIntervalSince(killed))) s; "
                + "after the PUT, serving in \(secondsList(serving))")
        #expect(serving.allSatisfy { $0 != nil }, "\(serving)")
        await running
        let report = await verify(load, cluster, lostBefore: recreated.timeIntervalSince1970, label: "restart")
        #expect(report.shown > 10, "too few shown after the PUT")
    }

    /// The check can fail: fabricated histories with an overlap, a shared
    /// fence, an item left queued.
    @Test func theCheckCatchesBrokenHistories() {
        func item(_ id: String, _ status: String, fence: Int?, _ from: String?, _ to: String?) -> [String: Any] {
            var object: [String: Any] = ["id": id, "status": status]
            if let fence { object["fence"] = fence }
            if let from { object["shown_at"] = "2026-12-01T10:00:\(from)Z" }
            if let to { object["finished_at"] = "2026-12-01T10:00:\(to)Z" }
            return object
        }
        let good = [
            item("a", "dismissed", fence: 1, "00.100", "00.200"), item("b", "expired", fence: 2, "00.200", "00.400"),
            item("m", "merged", fence: nil, nil, "00.150"),
        ]
        #expect(Self.check(good).violations.isEmpty && Self.check(good).shown == 2)
        let overlap = [good[0], item("b", "expired", fence: 2, "00.150", "00.400")]
        #expect(Self.check(overlap).violations.count == 1)
        let sharedFence = [good[0], item("b", "expired", fence: 1, "00.300", "00.400")]
        #expect(Self.check(sharedFence).violations.count == 1)
        let unfinished = [good[0], item("q", "queued", fence: nil, nil, nil)]
        #expect(Self.check(unfinished).violations == ["q ended queued"])
    }

    /// The drills' other checks can fail: an acknowledged item missing
    /// (unless Redis lost it before), and a 503 without its cause or `Retry-After`.
    @Test func theDrillChecksCatchMissingItemsAndBareRefusals() {
        let shown = WindowLoad.Shown(id: "a", sent: 100, status: 201)
        let refused = WindowLoad.Shown(id: "b", sent: 100, status: 503)
        #expect(WindowLoad.readProblem(shown, status: 404, lostBefore: 0) == "a (show 201): 404")
        #expect(WindowLoad.readProblem(shown, status: 404, lostBefore: 100) == "a (show 201): 404")
        #expect(WindowLoad.readProblem(shown, status: 404, lostBefore: 101) == nil)
        #expect(WindowLoad.readProblem(shown, status: 503, lostBefore: 101) != nil)
        #expect(WindowLoad.readProblem(refused, status: 404, lostBefore: 0) == nil)
        #expect(WindowLoad.readProblem(refused, status: 500, lostBefore: 0) != nil)
        #expect(refusalProblem(status: 503, code: "backend_unavailable", retryAfter: "1") == nil)
        #expect(refusalProblem(status: 409, code: "pool_exhausted", retryAfter: nil) == nil)
        #expect(refusalProblem(status: 503, code: "backend_unavailable", retryAfter: nil) != nil)
        #expect(refusalProblem(status: 503, code: "shutting_down", retryAfter: "1") != nil)
    }

    struct Report {
        var violations: [String] = []
        var shown = 0
        var byStatus: [String: Int] = [:]
    }

    /// Every item final; the shown ones, in fence order, shown one after the
    /// other (at equal milliseconds a dismiss counts before the next showing)
    /// with their showing times in the same order.
    static func check(_ items: [[String: Any]]) -> Report {
        var report = Report()
        var shown: [(id: String, fence: Int64, from: Int64, to: Int64)] = []
        for item in items {
            let id = item["id"] as? String ?? "?"
            let status = item["status"] as? String ?? "?"
            report.byStatus[status, default: 0] += 1
            guard ["dismissed", "expired", "merged"].contains(status) else {
                report.violations.append("\(id) ended \(status)")
                continue
            }
            guard let fence = (item["fence"] as? NSNumber)?.int64Value else { continue }
            guard let from = (item["shown_at"] as? String).flatMap(rfc3339Milliseconds),
                let to = (item["finished_at"] as? String).flatMap(rfc3339Milliseconds), from <= to
            else {
                report.violations.append("\(id) has a fence without shown_at <= finished_at")
                continue
            }
            shown.append((id, fence, from, to))
        }
        shown.sort { $0.fence < $1.fence }
        report.shown = shown.count
        for (a, b) in zip(shown, shown.dropFirst()) {
            if a.fence == b.fence { report.violations.append("\(a.id) and \(b.id) share fence \(a.fence)") }
            if b.from < a.to { report.violations.append("\(b.id) shown at \(b.from) before \(a.id) ended at \(a.to)") }
        }
        return report
    }
}

/// Clients on every process of a `SharedRedisCluster` on one window:
/// showing items (priorities, dedup keys, display times of their own),
/// dismissing the item shown or one of theirs by id, reading what is shown.
/// An answer outside what each call expects (and `tolerated`) is kept in `unexpected`.
final class WindowLoad: Sendable {
    let ports: [UInt16]
    let path: String
    /// Statuses any call may also answer: a drill's 503 while Redis is away,
    /// 404 and 410 once it lost the window.
    let tolerated: Set<Int>

    /// One item a client asked to show, when, and the status it was answered (0: none).
    struct Shown: Sendable {
        var id: String
        var sent: Double
        var status: Int
        var acknowledged: Bool { status == 200 || status == 201 }
    }

    private let shown = Locked<[Shown]>([])
    private let unexpectedAnswers = Locked<[String]>([])
    private let statuses = Locked<[Int: Int]>([:])

    init(ports: [UInt16], window: String, tolerated: Set<Int> = []) {
        self.ports = ports
        self.path = "/v1/windows/\(window)"
        self.tolerated = tolerated
    }

    var unexpected: [String] { unexpectedAnswers.withLock { $0 } }
    var statusCounts: [Int: Int] { statuses.withLock { $0 } }
    var calls: Int { statusCounts.values.reduce(0, +) }

    func run(workers: Int, seconds: Double) async {
        let end = Date().addingTimeInterval(seconds)
        await onThreads(workers) { [self] worker in
            let port = ports[worker % ports.count]
            var rng = SystemRandomNumberGenerator()
            var mine: [Shown] = []
            var n = 0
            while Date() < end {
                let roll = Int.random(in: 0..<100, using: &rng)
                let request: (String, String, String?, Set<Int>)
                switch roll {
                case 0..<25:
                    n += 1
                    let id = "w\(worker)-\(n)"
                    var fields = [#""id": "\#(id)""#, #""priority": \#(Int.random(in: 0...1, using: &rng))"#]
                    if Int.random(in: 0..<5, using: &rng) == 0 { fields.append(#""key": "k\#(n % 3)""#) }
                    if Int.random(in: 0..<5, using: &rng) == 0 {
                        fields.append(#""display_seconds": \#(Double(Int.random(in: 5...30, using: &rng)) / 100)"#)
                    }
                    mine.append(Shown(id: id, sent: Date().timeIntervalSince1970, status: 0))
                    request = ("POST", "\(path)/show", "{\(fields.joined(separator: ", "))}", [200, 201])
                case 25..<35: request = ("POST", "\(path)/dismiss", "{}", [200, 409])
                case 35..<45:
                    let item = mine.randomElement(using: &rng)
                    let id = item?.id ?? "none"
                    // An item whose show was not acknowledged may not exist.
                    request = (
                        "POST", "\(path)/dismiss", #"{"id": "\#(id)"}"#,
                        item?.acknowledged == true ? [200] : [404, 200]
                    )
                default: request = ("GET", "\(path)/showing", nil, [200, 204])
                }
                let (method, target, body, allowed) = request
                let r: TestHTTPClient.Response?
                do {
                    r = try TestHTTPClient(port: port).request(method, target, body: body)
                } catch {
                    r = nil
                    unexpectedAnswers.withLock { $0.append("\(method) \(target): \(error)") }
                }
                let status = r?.status ?? 0
                statuses.withLock { $0[status, default: 0] += 1 }
                if target.hasSuffix("/show") { mine[mine.count - 1].status = status }
                if let r, !allowed.union(tolerated).contains(status) {
                    unexpectedAnswers.withLock { $0.append("\(method) \(target) \(body ?? ""): \(status) \(r.text)") }
                }
                if let r,
                    let problem = refusalProblem(status: status, code: r.code, retryAfter: r.headers["retry-after"])
                {
                    unexpectedAnswers.withLock { $0.append("\(method) \(target): \(problem)") }
                }
                Thread.sleep(forTimeInterval: 0.03)
            }
            shown.withLock { $0 += mine }
        }
    }

    /// What is wrong with reading `item` back answering `status`: only a
    /// 404 is excused, for an item whose show was not acknowledged or that
    /// was sent before `lostBefore` (Redis lost it).
    static func readProblem(_ item: Shown, status: Int, lostBefore: Double) -> String? {
        if status == 200 || (status == 404 && (!item.acknowledged || item.sent < lostBefore)) { return nil }
        return "\(item.id) (show \(item.status)): \(status)"
    }

    /// Every item a client asked to show, read back; what could not be:
    /// an acknowledged item (sent at or after `lostBefore`) must exist, one
    /// whose show was refused or unanswered may not.
    func readBack(lostBefore: Double = 0) -> (items: [[String: Any]], unread: [String]) {
        var items: [[String: Any]] = []
        var unread: [String] = []
        let clients = ports.map { TestHTTPClient(port: $0) }
        for (i, item) in shown.withLock({ $0 }).enumerated() {
            let r = try? clients[i % clients.count].request("GET", "\(path)/items/\(item.id)")
            if r?.status == 200, let json = r?.json {
                items.append(json)
            } else if let problem = Self.readProblem(item, status: r?.status ?? 0, lostBefore: lostBefore) {
                unread.append(problem)
            }
        }
        return (items, unread)
    }
}
