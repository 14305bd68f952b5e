import Foundation
import HTTPTestClient
import Testing

@testable import Locking

/// Issue 17 for windows: three `usher` processes sharing one `redis-server`,
/// clients on all three showing, dismissing (the item shown, or one by id)
/// and reading what is shown for ~10 s, with display times ending by
/// themselves. Then: never two items shown at once (by each item's
/// `shown_at`/`dismissed_at`, in fence order), fences rising with the showing
/// times, and every item ends (`dismissed`, `expired` or `merged`).
@Suite(.serialized, .enabled(if: FileManager.default.fileExists(atPath: CommandLineTests.binary.path)))
struct SharedWindowDrillTests {
    static let window = "screen"
    static let body = #"{"backend": "redis", "display_seconds": 0.1, "dedup": "key"}"#

    static func note(_ text: String) { print("[shared-redis] \(text)") }

    /// What the workers did, from every thread.
    final class Log: Sendable {
        let created = Locked<[String]>([])
        let unexpected = Locked<[String]>([])
        let calls = Locked(0)
    }

    @Test func tenSecondsOfShowAndDismissOnThreeProcesses() async throws {
        let cluster = try await SharedRedisCluster()
        defer { cluster.stop() }
        let path = "/v1/windows/\(Self.window)"
        let created = try cluster.ushers[0].call("PUT", path, Self.body)
        #expect(created.status == 201, "\(created.text)")
        for usher in cluster.ushers {
            let seen = await poll(5) { (try? usher.call("GET", path).status) == 200 }
            #expect(seen, "usher \(usher.index) does not see the window")
        }
        let log = Log()
        let seconds = ProcessInfo.processInfo.environment["USHER_SOAK_SECONDS"].flatMap(Double.init) ?? 10
        let end = Date().addingTimeInterval(seconds)
        await onThreads(6) { worker in
            let usher = cluster.ushers[worker % 3]
            var rng = SystemRandomNumberGenerator()
            var mine: [String] = []
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
                    mine.append(id)
                    request = ("POST", "\(path)/show", "{\(fields.joined(separator: ", "))}", [200, 201])
                case 25..<35: request = ("POST", "\(path)/dismiss", "{}", [200, 409])
                case 35..<45:
                    let id = mine.randomElement(using: &rng) ?? "none"
                    request = ("POST", "\(path)/dismiss", #"{"id": "\#(id)"}"#, id == "none" ? [404] : [200])
                default: request = ("GET", "\(path)/showing", nil, [200])
                }
                let (method, target, body, allowed) = request
                do {
                    let r = try usher.call(method, target, body)
                    if !allowed.contains(r.status) {
                        log.unexpected.withLock {
                            $0.append("\(method) \(target) \(body ?? ""): \(r.status) \(r.text)")
                        }
                    }
                } catch {
                    log.unexpected.withLock { $0.append("\(method) \(target): \(error)") }
                }
                log.calls.withLock { $0 += 1 }
                Thread.sleep(forTimeInterval: 0.03)
            }
            log.created.withLock { $0 += mine }
        }
        let unexpected = log.unexpected.withLock { $0 }
        #expect(unexpected.isEmpty, "\(unexpected.count) unexpected answers: \(unexpected.prefix(5))")
        #expect(cluster.deaths().isEmpty, "\(cluster.deaths())")

        // Every item ends: dismiss what is left until the window is empty.
        let emptied = await poll(10) {
            _ = try? cluster.ushers[1].call("POST", "\(path)/dismiss", "{}")
            guard let state = try? cluster.ushers[2].call("GET", path) else { return false }
            return state.json["showing"] is NSNull && (state.json["queued"] as? [Any])?.isEmpty == true
        }
        #expect(emptied, "the window did not empty")
        var items: [[String: Any]] = []
        var unread: [String] = []
        for (i, id) in log.created.withLock({ $0 }).enumerated() {
            let r = try cluster.ushers[i % 3].call("GET", "\(path)/items/\(id)")
            if r.status == 200 { items.append(r.json) } else { unread.append("\(id): \(r.status)") }
        }
        #expect(unread.isEmpty, "\(unread.count) items not read: \(unread.prefix(5))")
        let report = Self.check(items)
        #expect(report.violations.isEmpty, "\(report.violations.count) violations: \(report.violations.prefix(10))")
        #expect(report.shown > 50 && report.byStatus["expired", default: 0] > 0)
        #expect(report.byStatus["dismissed", default: 0] > 0)
        Self.note(
            "windows, \(seconds) s on 3 processes: \(log.calls.withLock { $0 }) calls, \(items.count) items, "
                + "\(report.shown) shown; \(report.byStatus.sorted { $0.key < $1.key })")
    }

    /// The check can fail: fabricated histories with an overlap, a shared
    /// fence, an item left queued.
    @Test func theCheckCatchesBrokenHistories() {
        func item(_ id: String, _ status: String, fence: Int?, _ from: String?, _ to: String?) -> [String: Any] {
            var object: [String: Any] = ["id": id, "status": status]
            if let fence { object["fence"] = fence }
            if let from { object["shown_at"] = "2026-12-01T10:00:\(from)Z" }
            if let to { object["dismissed_at"] = "2026-12-01T10:00:\(to)Z" }
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
                let to = (item["dismissed_at"] as? String).flatMap(rfc3339Milliseconds), from <= to
            else {
                report.violations.append("\(id) has a fence without shown_at <= dismissed_at")
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
