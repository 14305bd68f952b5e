import Foundation
import HTTPTestClient
import TestSupport

@testable import Locking

/// What a client saw of one request: when it sent it and when the answer
/// came (client clock, seconds since the epoch), and the answer.
struct Answer: Sendable {
    enum Operation: String, Sendable, CaseIterable {
        case enqueue, follow, complete, extend, cancel
    }
    var operation: Operation
    var visitor: String
    var process: Int
    var longPoll: Bool
    var sent: Double
    var received: Double = 0
    /// 0: no answer (the connection failed or timed out).
    var status: Int = 0
    var code: String?
    var retryAfter: String?
    /// The visitor in the answer (nil for a problem document).
    var visitorStatus: String?
    var fence: Int64?
    var finishedAt: Int64?
    var currentStatus: String?
    var failure: String?
}

/// Clients on every process of a `SharedRedisCluster` doing a random mix on
/// one Redis-backed queue: enqueues (keys for dedup, opposite actions,
/// priorities, delays, shorter holds, `?wait=` with and without
/// `on_timeout=cancel`), long-polls on their visitors, completes, extends,
/// releases and cancels, and grants left to expire. Every answer is kept.
final class SharedQueueLoad: Sendable {
    let ports: [UInt16]
    let queue: String
    private let answers = Locked<[Answer]>([])
    /// Every visitor id a client tried to create, with the delay and priority it asked.
    private let asked = Locked<[(id: String, delayMicros: Int64, priority: Int)]>([])

    init(cluster: SharedRedisCluster, queue: String) {
        ports = cluster.ushers.map(\.port)
        self.queue = queue
    }

    var allAnswers: [Answer] { answers.withLock { $0 } }

    /// Runs `workers` clients until `seconds` pass; worker `i` is seeded with `seed + i`.
    func run(workers: Int, seconds: Double, seed: UInt64, tag: String = "") async {
        let end = Date().addingTimeInterval(seconds)
        await onThreads(workers) { [self] i in
            var worker = Worker(load: self, name: "\(tag)w\(i)", seed: seed &+ UInt64(i))
            worker.run(until: end)
            answers.withLock { $0 += worker.answers }
            asked.withLock { $0 += worker.asked }
        }
    }

    fileprivate func path(_ suffix: String = "") -> String { "/v1/queues/\(queue)\(suffix)" }

    // MARK: After a run

    /// Cancels whatever still waits (or is delayed) and waits for the holds
    /// to end by themselves (expiry); the seconds it took, or nil when the
    /// queue did not empty within `timeout`.
    func drain(timeout: Double) async throws -> Double? {
        let ports = ports
        let path = path()
        return try await onThread {
            let started = Date()
            while Date().timeIntervalSince(started) < timeout {
                let state = try TestHTTPClient.once(port: ports[0], "GET", path + "?limit=1000")
                guard state.status == 200, let counts = state.json["counts"] as? [String: Any] else {
                    usleep(100_000)
                    continue
                }
                let left = ["waiting", "holding", "delayed"].map { (counts[$0] as? NSNumber)?.intValue ?? -1 }
                if left == [0, 0, 0] { return Date().timeIntervalSince(started) }
                let lined =
                    (state.json["waiting"] as? [[String: Any]] ?? [])
                    + (state.json["delayed"] as? [[String: Any]] ?? [])
                for view in lined {
                    guard let id = view["id"] as? String else { continue }
                    _ = try? TestHTTPClient.once(port: ports[0], "DELETE", "\(path)/visitors/\(id)")
                }
                usleep(100_000)
            }
            return nil
        }
    }

    /// Every visitor the clients tried to create, read back (from all the
    /// processes in turn); `missing`: the ids the queue does not know.
    func finalStates() async -> (outcomes: [VisitorOutcome], missing: [String], failures: [String]) {
        let asked = asked.withLock { $0 }
        let ports = ports
        let path = path()
        let results = Locked<(outcomes: [VisitorOutcome], missing: [String], failures: [String])>(([], [], []))
        let lanes = ports.count
        await onThreads(lanes) { lane in
            let client = TestHTTPClient(port: ports[lane])
            for item in asked.enumerated() where item.offset % lanes == lane {
                let (id, delay, _) = item.element
                let response = try? client.request("GET", "\(path)/visitors/\(id)")
                results.withLock { r in
                    if response?.status == 404 {
                        r.missing.append(id)
                    } else if response?.status == 200,
                        let outcome = VisitorOutcome(view: response!.json, delayMicros: delay)
                    {
                        r.outcomes.append(outcome)
                    } else {
                        r.failures.append("GET \(id): \(response.map { "\($0.status) \($0.text)" } ?? "no answer")")
                    }
                }
            }
        }
        return results.withLock { $0 }
    }

    /// The queue's counts (`GET /v1/queues/{q}`).
    func counts() async throws -> [String: Int] {
        let port = ports[0]
        let path = path()
        return try await onThread {
            let state = try TestHTTPClient.once(port: port, "GET", path)
            let counts = state.json["counts"] as? [String: Any] ?? [:]
            return counts.compactMapValues { ($0 as? NSNumber)?.intValue }
        }
    }

    /// What the answers say against the final states: a fence or a final
    /// status an answer reported is the visitor's at the end; a 200 complete
    /// ended it (and its `finished_at` lies between send and receive); a
    /// visitor whose creation was acknowledged exists; every answer's status
    /// is one of `allowed`, and a 503 is `backend_unavailable` with `Retry-After`.
    /// Visitors acknowledged before `lostBefore` may be missing (Redis lost them).
    func crossCheck(_ outcomes: [VisitorOutcome], missing: [String], allowed: Set<Int>, lostBefore: Double = 0)
        -> [String]
    {
        var violations: [String] = []
        let byID = Dictionary(outcomes.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        let missingSet = Set(missing)
        for a in allAnswers {
            if a.status != 0, !allowed.contains(a.status) {
                violations.append("\(a.operation) \(a.visitor) on \(a.process): \(a.status) \(a.code ?? "")")
            }
            if a.status == 503, a.code != "backend_unavailable" || a.retryAfter == nil {
                violations.append(
                    "\(a.operation) \(a.visitor): 503 \(a.code ?? "") retry-after \(a.retryAfter ?? "none")")
            }
            if a.operation == .enqueue, a.status == 200 || a.status == 201, a.received >= lostBefore,
                missingSet.contains(a.visitor)
            {
                violations.append("\(a.visitor): created (\(a.status)) but unknown at the end")
            }
            guard let final = byID[a.visitor] else { continue }
            if let fence = a.fence, fence != final.fence {
                violations.append(
                    "\(a.visitor): an answer had fence \(fence), the end \(final.fence.map(String.init) ?? "none")")
            }
            if let status = a.visitorStatus, QueueHistoryChecker.finalStatuses.contains(status), status != final.status
            {
                violations.append("\(a.visitor): an answer said \(status), the end says \(final.status)")
            }
            if a.operation == .complete, a.status == 200 {
                if final.status != "completed" {
                    violations.append("\(a.visitor): completed (200) but ends \(final.status)")
                }
                if let end = final.finishedAt, Double(end) < a.sent * 1000 - 2 || Double(end) > a.received * 1000 + 2 {
                    violations.append(
                        "\(a.visitor): completed at \(end) ms, outside its request \(a.sent)–\(a.received)")
                }
            }
        }
        return violations
    }

    /// The counts against the visitors: every visitor created is counted once, in its final status.
    static func countCheck(_ counts: [String: Int], _ outcomes: [VisitorOutcome]) -> [String] {
        var violations: [String] = []
        if counts["enqueued_total"] != outcomes.count {
            violations.append("enqueued_total \(counts["enqueued_total"] ?? -1), visitors found \(outcomes.count)")
        }
        for status in ["completed", "released", "expired", "cancelled", "merged"] {
            let found = outcomes.filter { $0.status == status }.count
            if counts["\(status)_total"] != found {
                violations.append("\(status)_total \(counts["\(status)_total"] ?? -1), visitors \(status) \(found)")
            }
        }
        let grants = outcomes.filter { $0.grantedAt != nil }.count
        if counts["granted_total"] != grants {
            violations.append("granted_total \(counts["granted_total"] ?? -1), grants \(grants)")
        }
        return violations
    }

    /// Answers by operation and status, 503s, failures and long-polls, in one line.
    func summary() -> String {
        let all = allAnswers
        let statuses = Dictionary(grouping: all, by: \.status).mapValues(\.count).sorted { $0.key < $1.key }
            .map { "\($0.key == 0 ? "none" : String($0.key)): \($0.value)" }.joined(separator: ", ")
        let operations = Answer.Operation.allCases.map { op in
            "\(op.rawValue) \(all.filter { $0.operation == op }.count)"
        }
        .joined(separator: ", ")
        let polls = all.filter(\.longPoll)
        let slowest = all.map { $0.received - $0.sent }.max() ?? 0
        return
            "\(all.count) requests (\(operations)); statuses \(statuses); long-polls \(polls.count) "
            + "(503: \(polls.filter { $0.status == 503 }.count)); slowest answer \(String(format: "%.2f", slowest)) s"
    }
}

/// One client: a keep-alive connection to each process, the visitors it
/// created and still cares about, and a seeded random choice of what to do next.
private struct Worker {
    let load: SharedQueueLoad
    let name: String
    var random: SplitMix64
    var clients: [TestHTTPClient]
    var answers: [Answer] = []
    var asked: [(id: String, delayMicros: Int64, priority: Int)] = []
    /// Its visitors still waiting, delayed or granted, by their last known status.
    var mine: [(id: String, status: String)] = []
    var made = 0

    init(load: SharedQueueLoad, name: String, seed: UInt64) {
        self.load = load
        self.name = name
        random = SplitMix64(seed: seed)
        clients = load.ports.map { TestHTTPClient(port: $0, timeoutSeconds: 15) }
    }

    mutating func run(until end: Date) {
        while Date() < end {
            if mine.isEmpty || (mine.count < 2 && random.chance(0.4)) {
                enqueue()
            } else {
                act(on: random.below(mine.count))
            }
            usleep(UInt32(random.below(15) * 1000))
        }
    }

    mutating func enqueue() {
        made += 1
        let id = "\(name)-\(made)"
        var body: [String: Any] = ["id": id]
        let priority = [0, 0, 0, 0, 0, 0, 0, 1, 1, 3][random.below(10)]
        if priority != 0 { body["priority"] = priority }
        if random.chance(0.5) {
            body["key"] = "k\(random.below(4))"
            body["action"] = ["like", "unlike", "view"][random.below(3)]
        }
        if random.chance(0.3) { body["hold_seconds"] = [0.2, 0.4, 0.7][random.below(3)] }
        var delayMicros: Int64 = 0
        if random.chance(0.1) {
            let delay = [0.1, 0.3, 0.5][random.below(3)]
            body["delay_seconds"] = delay
            delayMicros = Int64(delay * 1_000_000)
        }
        var query = ""
        if random.chance(0.6) {
            query = "?wait=\([0.2, 0.5, 1, 2][random.below(4)])"
            if random.chance(0.3) { query += "&on_timeout=cancel" }
        }
        asked.append((id, delayMicros, priority))
        let text = String(decoding: (try? JSONSerialization.data(withJSONObject: body)) ?? Data(), as: UTF8.self)
        let answer = send(.enqueue, id, "POST", load.path("/visitors\(query)"), text, longPoll: !query.isEmpty)
        if let status = answer.visitorStatus, ["waiting", "delayed", "granted"].contains(status) {
            mine.append((id, status))
        }
    }

    mutating func act(on index: Int) {
        let (id, status) = mine[index]
        let visitor = load.path("/visitors/\(id)")
        let r = random.unit()
        let answer: Answer
        if status == "granted" {
            if r < 0.55 {
                usleep(UInt32(random.below(100) * 1000))
                answer = send(.complete, id, "POST", visitor + "/complete", nil)
            } else if r < 0.7 {
                let body = random.chance(0.5) ? #"{"hold_seconds": 0.5}"# : nil
                answer = send(.extend, id, "POST", visitor + "/extend", body)
            } else if r < 0.85 {
                answer = send(.cancel, id, "DELETE", visitor, nil)
            } else {
                mine.remove(at: index)  // left to expire
                return
            }
        } else {
            if r < 0.6 {
                let wait = [0.3, 1, 2][random.below(3)]
                answer = send(.follow, id, "GET", visitor + "?wait=\(wait)", nil, longPoll: true)
            } else if r < 0.8 {
                answer = send(.cancel, id, "DELETE", visitor, nil)
            } else if r < 0.9 {
                answer = send(.follow, id, "GET", visitor, nil)
            } else {
                mine.remove(at: index)  // left in line: granted later, then expires
                return
            }
        }
        let now = answer.visitorStatus ?? answer.currentStatus
        if answer.status == 404 {
            mine.remove(at: index)
        } else if let now {
            if ["waiting", "delayed", "granted"].contains(now) {
                mine[index].status = now
            } else {
                mine.remove(at: index)
            }
        }
    }

    /// One request to a process chosen at random, kept in `answers`.
    mutating func send(
        _ operation: Answer.Operation, _ id: String, _ method: String, _ path: String, _ body: String?,
        longPoll: Bool = false
    ) -> Answer {
        let process = random.below(clients.count)
        var answer = Answer(
            operation: operation, visitor: id, process: process, longPoll: longPoll,
            sent: Date().timeIntervalSince1970)
        do {
            let response = try clients[process].request(method, path, body: body)
            answer.status = response.status
            let json = response.json
            answer.code = json["code"] as? String
            answer.retryAfter = response.headers["retry-after"]
            answer.visitorStatus = json["status"] as? String
            answer.fence = (json["fence"] as? NSNumber)?.int64Value
            answer.finishedAt = (json["finished_at"] as? String).flatMap(rfc3339Milliseconds)
            answer.currentStatus = json["current_status"] as? String
        } catch {
            answer.failure = "\(error)"
            clients[process].disconnect()
        }
        answer.received = Date().timeIntervalSince1970
        answers.append(answer)
        return answer
    }
}
