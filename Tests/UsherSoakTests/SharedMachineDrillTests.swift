import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import Locking

/// Issue 17, "Tests", the machine: three `usher` processes on one
/// `redis-server`, clients on all three racing `If-Match` events for 20 s.
/// Every answered transition must lie on one valid path, and no two clients
/// may both win with the same version (a lost update). The fault drills run
/// the same race while Redis is paused or restarted empty.
@Suite(.serialized, .enabled(if: FileManager.default.fileExists(atPath: usherBinary.path)))
struct SharedMachineDrillTests {
    static let machine = "shared"
    /// A cycle A → B → C → A with a step back and a shortcut, so that racing
    /// clients also send events the state no longer allows.
    static let transitions: Set<MachineStep> = [
        MachineStep(from: "A", event: "go", to: "B"), MachineStep(from: "B", event: "go", to: "C"),
        MachineStep(from: "C", event: "go", to: "A"), MachineStep(from: "B", event: "back", to: "A"),
        MachineStep(from: "A", event: "skip", to: "C"),
    ]
    static let events = ["go", "back", "skip"]

    static var definition: String {
        let list = transitions.sorted { "\($0)" < "\($1)" }.map {
            #"{"event": "\#($0.event)", "from": "\#($0.from)", "to": "\#($0.to)"}"#
        }
        return #"{"initial": "A", "transitions": [\#(list.joined(separator: ", "))]}"#
    }

    static var body: String { #"{"backend": "redis", "definition": \#(definition)}"# }

    static func note(_ text: String) { print("[shared-redis] \(text)") }

    /// The cluster (`extra` in every process's config) with the machine
    /// created through process 0, once every process serves it; its version.
    func start(extra: [String: Any] = [:]) async throws -> (SharedRedisCluster, Int) {
        let cluster = try await SharedRedisCluster(extra: extra)
        let created = try cluster.ushers[0].call("PUT", "/v1/machines/\(Self.machine)", Self.body)
        #expect(created.status == 201, "\(created.text)")
        for usher in cluster.ushers {
            let seen = await poll(5) { (try? usher.call("GET", "/v1/machines/\(Self.machine)").status) == 200 }
            #expect(seen, "usher \(usher.index) does not see the machine")
        }
        return (cluster, try #require(created.json["version"] as? Int))
    }

    @Test func racingIfMatchClientsOnThreeProcessesLeaveOneValidPath() async throws {
        let (cluster, initialVersion) = try await start()
        defer { cluster.stop() }
        let seconds = ProcessInfo.processInfo.environment["USHER_SOAK_SECONDS"].flatMap(Double.init) ?? 20
        let race = MachineRace(ports: cluster.ushers.map(\.port), machine: Self.machine, events: Self.events)
        await race.run(workers: 9, seconds: seconds)
        let answered = race.statusCounts
        let won = race.wins
        let final = try cluster.ushers[2].call("GET", "/v1/machines/\(Self.machine)")
        let violations = MachinePathChecker(transitions: Self.transitions, initial: "A", initialVersion: initialVersion)
            .check(won, finalState: final.json["state"] as? String, finalVersion: final.json["version"] as? Int)
        #expect(violations.isEmpty, "\(violations.count) violations: \(violations.prefix(10))")
        #expect(Set(answered.keys).isSubset(of: [200, 409, 412]), "unexpected answers: \(answered)")
        #expect(race.readFailures.isEmpty, "reads failed: \(race.readFailures)")
        #expect(answered[200, default: 0] > Int(seconds) * 5, "too few transitions: \(answered)")
        #expect(answered[412, default: 0] > 0, "no race was lost: \(answered)")
        #expect(Set(won.map(\.usher)) == [0, 1, 2], "every process won some")
        // The server's own history ends with the last answered transitions.
        let history = (final.json["history"] as? [[String: Any]] ?? []).compactMap { $0["version"] as? Int }
        let lastWins = won.map(\.version).sorted().suffix(history.count)
        #expect(history == Array(lastWins), "the history differs from the answers")
        #expect(cluster.deaths().isEmpty, "\(cluster.deaths())")
        Self.note(
            "machine: \(seconds) s, answers \(answered.sorted { $0.key < $1.key }), "
                + "\(won.count) transitions, \(violations.count) violations")
    }

    /// Checks what the race left against the machine's end state: the
    /// answered transitions since `initialVersion` (with events whose answer
    /// was lost filling gaps) form one path to where the machine is, and the
    /// server's history is that path's end. The number of gaps filled.
    func verify(
        _ race: MachineRace, _ cluster: SharedRedisCluster, since initialVersion: Int, label: String
    ) throws -> Int {
        let final = try cluster.ushers[1].call("GET", "/v1/machines/\(Self.machine)")
        let checker = MachinePathChecker(transitions: Self.transitions, initial: "A", initialVersion: initialVersion)
        let (path, violations) = checker.walk(
            race.wins.filter { $0.version > initialVersion }, unanswered: race.unanswered,
            end: (final.json["state"] as? String, final.json["version"] as? Int))
        #expect(violations.isEmpty, "\(label): \(violations.count) violations: \(violations.prefix(10))")
        let history = (final.json["history"] as? [[String: Any]] ?? []).map(MachineWin.init(historyEntry:))
        let disagreements = MachinePathChecker.historyProblems(history, path: path)
        #expect(disagreements.isEmpty, "\(label): \(disagreements.prefix(5))")
        #expect(race.refusals.isEmpty, "\(label): \(race.refusals.prefix(5))")
        #expect(cluster.deaths().isEmpty, "\(cluster.deaths())")
        let filled = path.count - race.wins.filter { $0.version > initialVersion }.count
        Self.note(
            "machine \(label): events answered \(race.statusCounts.sorted { $0.key < $1.key }), reads refused "
                + "\(race.readFailures.sorted { $0.key < $1.key }); \(path.count) transitions since version "
                + "\(initialVersion) (\(filled) of them answered 503 or not at all), history of \(history.count) agrees"
        )
        return filled
    }

    /// The fault drill: under the race, the subscriber connections killed
    /// twice, then Redis paused (SIGSTOP) for 5 s. Meanwhile the machine
    /// answers 503 `backend_unavailable` with `Retry-After` on every process,
    /// a memory machine and `/healthz` answer at once; after SIGCONT every
    /// process serves it again within seconds, and the transitions keep to one path.
    @Test func subscribersKilledAndRedisPaused() async throws {
        let (cluster, initialVersion) = try await start()
        defer { cluster.stop() }
        let path = "/v1/machines/\(Self.machine)"
        for usher in cluster.ushers {
            let local = try usher.call("PUT", "/v1/machines/local", #"{"definition": \#(Self.definition)}"#)
            #expect(local.status == 201, "\(local.text)")
        }
        let race = MachineRace(ports: cluster.ushers.map(\.port), machine: Self.machine, events: Self.events)
        let started = Date()
        async let running: Void = race.run(workers: 9, seconds: 11)
        try await cluster.killSubscribersThenPause(shared: path, memory: "/v1/machines/local", what: "machine")
        let winsBefore = race.wins.count
        await running
        _ = try verify(race, cluster, since: initialVersion, label: "pause")
        let answered = race.statusCounts
        #expect(Set(answered.keys).isSubset(of: [200, 409, 412, 503]), "unexpected answers: \(answered)")
        #expect(Set(race.readFailures.keys).isSubset(of: [503]), "reads: \(race.readFailures)")
        #expect(answered[503, default: 0] + race.readFailures[503, default: 0] > 0, "no 503 while Redis was paused")
        #expect(race.wins.count > winsBefore, "no transition after SIGCONT")
        Self.note("machine pause drill: \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
    }

    /// Redis restarted empty under the race: the machine made by `PUT` is
    /// gone (404 on every process) until a `PUT` makes it anew in its initial
    /// state, with a version above every one before; a machine the config
    /// declares comes back by itself in its initial state. No process dies,
    /// and the transitions on each side of the loss keep to one path.
    @Test func redisRestartedEmpty() async throws {
        let declared = "declared"
        let declaration = try JSONSerialization.jsonObject(with: Data(Self.body.utf8))
        let (cluster, initialVersion) = try await start(extra: ["machines": [declared: declaration]])
        defer { cluster.stop() }
        let path = "/v1/machines/\(Self.machine)"
        // The declared machine moved on, so that coming back shows.
        let moved = try cluster.ushers[0].call("POST", "/v1/machines/\(declared)/events/go", "{}")
        #expect(moved.status == 200 && moved.json["to"] as? String == "B", "\(moved.text)")
        let race = MachineRace(ports: cluster.ushers.map(\.port), machine: Self.machine, events: Self.events)
        let started = Date()
        async let running: Void = race.run(workers: 9, seconds: 8)
        let (killed, restarted) = try await cluster.restartRedisEmpty(
            shared: path, declared: "/v1/machines/\(declared)", what: "machine")
        var declaredVersions: Set<Int> = []
        for usher in cluster.ushers {
            let state = try await onThread { try usher.call("GET", "/v1/machines/\(declared)") }
            #expect(state.json["state"] as? String == "A", "usher \(usher.index): \(state.text)")
            declaredVersions.insert(state.json["version"] as? Int ?? -1)
        }
        #expect(declaredVersions.count == 1, "the processes disagree: \(declaredVersions)")
        let movedVersion = moved.json["version"] as? Int ?? .max
        #expect(declaredVersions.allSatisfy { $0 > movedVersion }, "\(declaredVersions), \(movedVersion) before")
        let recreate = try await onThread { try cluster.ushers[1].call("PUT", path, Self.body) }
        #expect(recreate.status == 201 && recreate.json["state"] as? String == "A", "\(recreate.text)")
        let recreatedVersion = try #require(recreate.json["version"] as? Int)
        let serving = await cluster.recovery(path, since: Date(), timeout: 5)
        Self.note(
            "machine restart: Redis down \(String(format: "%.2f", restarted.timeIntervalSince(killed))) s; "
                + "after the PUT, serving in \(secondsList(serving))")
        #expect(serving.allSatisfy { $0 != nil }, "\(serving)")
        await running
        // Before the loss: the answered transitions lie on one path (where it ended is lost).
        let checker = MachinePathChecker(transitions: Self.transitions, initial: "A", initialVersion: initialVersion)
        let before = race.wins.filter { $0.version < recreatedVersion }
        let (pathBefore, violationsBefore) = checker.walk(before, unanswered: race.unanswered)
        #expect(violationsBefore.isEmpty, "before the loss: \(violationsBefore.prefix(10))")
        #expect(!pathBefore.isEmpty, "no transition before the loss")
        // Versions keep rising across the loss.
        let lastBefore = pathBefore.last?.version ?? .max
        #expect(lastBefore < recreatedVersion, "version \(recreatedVersion) after the loss, \(lastBefore) before")
        let after = try verify(race, cluster, since: recreatedVersion, label: "restart")
        let answered = race.statusCounts
        #expect(Set(answered.keys).isSubset(of: [200, 404, 409, 410, 412, 503]), "unexpected answers: \(answered)")
        #expect(race.wins.count - before.count > 0, "no transition after the PUT")
        Self.note(
            "machine restart drill: \(before.count) answered transitions before the loss, "
                + "\(race.wins.count - before.count) after (\(after) gaps filled); "
                + "\(String(format: "%.1f", Date().timeIntervalSince(started))) s")
    }

    @Test func theCheckerFindsBrokenPaths() {
        let checker = MachinePathChecker(transitions: Self.transitions, initial: "A", initialVersion: 10)
        let good = [
            MachineWin(ifMatch: 10, version: 11, from: "A", event: "go", to: "B", usher: 0),
            MachineWin(ifMatch: 11, version: 12, from: "B", event: "back", to: "A", usher: 1),
            MachineWin(ifMatch: 12, version: 13, from: "A", event: "skip", to: "C", usher: 2),
        ]
        #expect(checker.check(good, finalState: "C", finalVersion: 13).isEmpty)
        // Two clients won with the same version: a lost update.
        var lost = good
        lost[1].ifMatch = 10
        #expect(!checker.check(lost, finalState: "C", finalVersion: 13).isEmpty)
        // A step the definition does not have.
        var invalid = good
        invalid[2] = MachineWin(ifMatch: 12, version: 13, from: "A", event: "back", to: "C", usher: 2)
        #expect(!checker.check(invalid, finalState: "C", finalVersion: 13).isEmpty)
        // A gap in the path: B's transition missing.
        #expect(!checker.check([good[0], good[2]], finalState: "C", finalVersion: 13).isEmpty)
        // A version handed out twice.
        var twice = good
        twice[2].version = 12
        #expect(!checker.check(twice, finalState: "C", finalVersion: 12).isEmpty)
        // The machine ended elsewhere than the last answer said.
        #expect(!checker.check(good, finalState: "A", finalVersion: 13).isEmpty)
        #expect(!checker.check(good, finalState: "C", finalVersion: 14).isEmpty)
    }

    /// The drills' additions can fail: a gap is filled only by an event
    /// whose answer was lost, sent with the version before the gap and
    /// leading where the path goes on, and each such event once; the
    /// server's history must be the path's end.
    @Test func lostAnswersFillGapsOnlyWhereTheyFit() {
        let checker = MachinePathChecker(transitions: Self.transitions, initial: "A", initialVersion: 10)
        let wins = [
            MachineWin(ifMatch: 10, version: 11, from: "A", event: "go", to: "B", usher: 0),
            MachineWin(ifMatch: 12, version: 13, from: "A", event: "skip", to: "C", usher: 2),
        ]
        let back = MachineAttempt(ifMatch: 11, event: "back", usher: 1)
        let (path, violations) = checker.walk(wins, unanswered: [back], end: ("C", 13))
        #expect(violations.isEmpty, "\(violations)")
        #expect(path.map(\.version) == [11, 12, 13] && path[1].from == "B" && path[1].to == "A")
        // Sent with another version, or leading elsewhere: the gap stays.
        for misfit in [
            MachineAttempt(ifMatch: 10, event: "back", usher: 1), MachineAttempt(ifMatch: 11, event: "go", usher: 1),
        ] {
            #expect(!checker.walk(wins, unanswered: [misfit]).violations.isEmpty, "\(misfit)")
        }
        // A second gap needs a lost answer of its own.
        let twoGaps = wins + [MachineWin(ifMatch: 14, version: 15, from: "A", event: "go", to: "B", usher: 0)]
        let again = MachineAttempt(ifMatch: 13, event: "go", usher: 1)
        #expect(!checker.walk(twoGaps, unanswered: [back]).violations.isEmpty)
        #expect(checker.walk(twoGaps, unanswered: [back, again]).violations.isEmpty)
        // A lost answer may be the last step, but only to where the machine is.
        #expect(checker.walk(wins, unanswered: [back, again], end: ("A", 14)).violations.isEmpty)
        let elsewhere = checker.walk(wins, unanswered: [back, again], end: ("B", 14)).violations
        #expect(elsewhere == ["B at 14 is not where the answers lead (C at 13)"])
        // The history must be the path's end, step for step.
        #expect(MachinePathChecker.historyProblems(Array(path.suffix(2)), path: path).isEmpty)
        #expect(!MachinePathChecker.historyProblems(Array(path.prefix(2)), path: path).isEmpty)
        var forged = path
        forged[2].to = "A"
        #expect(!MachinePathChecker.historyProblems(forged, path: path).isEmpty)
        #expect(MachinePathChecker.historyProblems([], path: path).isEmpty)
    }
}

/// One transition of the definition.
struct MachineStep: Hashable, CustomStringConvertible {
    let from: String
    let event: String
    let to: String

    var description: String { "\(from) -\(event)-> \(to)" }
}

/// A `200` a client got for an event sent with `If-Match: ifMatch`.
struct MachineWin: Sendable, Equatable {
    var ifMatch: Int
    var version: Int
    var from: String
    var event: String
    var to: String
    var usher: Int
}

extension MachineWin {
    /// An entry of the machine's `history` (which has no `If-Match`).
    init(historyEntry entry: [String: Any]) {
        self.init(
            ifMatch: -1, version: entry["version"] as? Int ?? -1, from: entry["from"] as? String ?? "?",
            event: entry["event"] as? String ?? "?", to: entry["to"] as? String ?? "?", usher: -1)
    }
}

/// An event sent with `If-Match: ifMatch` whose answer was lost (503, or
/// none): Redis may have applied it or not.
struct MachineAttempt: Sendable, Equatable {
    var ifMatch: Int
    var event: String
    var usher: Int
}

/// Clients on every process of a `SharedRedisCluster` racing on one machine:
/// each reads it and fires an event (mostly one allowed when read, now and
/// then any) with `If-Match` the version read. Wins, events whose answer
/// was lost, and every other answer are kept for the end.
final class MachineRace: Sendable {
    let ports: [UInt16]
    let path: String
    let events: [String]
    private let won = Locked<[MachineWin]>([])
    private let lost = Locked<[MachineAttempt]>([])
    private let statuses = Locked<[Int: Int]>([:])
    private let reads = Locked<[Int: Int]>([:])
    private let bareRefusals = Locked<[String]>([])

    init(ports: [UInt16], machine: String, events: [String]) {
        self.ports = ports
        self.path = "/v1/machines/\(machine)"
        self.events = events
    }

    var wins: [MachineWin] { won.withLock { $0 } }
    /// Events answered 503 or not at all.
    var unanswered: [MachineAttempt] { lost.withLock { $0 } }
    /// How many events had each status (0: no answer).
    var statusCounts: [Int: Int] { statuses.withLock { $0 } }
    /// Reads that did not answer 200, by status (0: no answer).
    var readFailures: [Int: Int] { reads.withLock { $0 } }
    /// The 503s that were not `backend_unavailable` with `Retry-After`.
    var refusals: [String] { bareRefusals.withLock { $0 } }

    private func refused(_ label: String, _ r: TestHTTPClient.Response) {
        if let problem = refusalProblem(status: r.status, code: r.code, retryAfter: r.headers["retry-after"]) {
            bareRefusals.withLock { $0.append("\(label): \(problem)") }
        }
    }

    func run(workers: Int, seconds: Double) async {
        let end = Date().addingTimeInterval(seconds)
        await onThreads(workers) { [self] worker in
            let usher = worker % ports.count
            let client = TestHTTPClient(port: ports[usher], timeoutSeconds: 15)
            var random = SystemRandomNumberGenerator()
            while Date() < end {
                let read = try? client.request("GET", path)
                guard let read, read.status == 200, let version = read.json["version"] as? Int else {
                    reads.withLock { $0[read?.status ?? 0, default: 0] += 1 }
                    if let read { refused("read", read) }
                    // Refused at once (Redis down, the machine gone): a moment before the next try.
                    usleep(50_000)
                    continue
                }
                let allowed = read.json["allowed_events"] as? [String] ?? []
                // Mostly an event allowed when read; now and then any event.
                let event =
                    Int.random(in: 0..<5, using: &random) == 0 || allowed.isEmpty
                    ? events.randomElement(using: &random)! : allowed.randomElement(using: &random)!
                let fired = try? client.request(
                    "POST", "\(path)/events/\(event)", body: "{}", headers: ["If-Match": "\"\(version)\""])
                let status = fired?.status ?? 0
                statuses.withLock { $0[status, default: 0] += 1 }
                if let fired { refused("event", fired) }
                if status == 0 || status == 503 {
                    lost.withLock { $0.append(MachineAttempt(ifMatch: version, event: event, usher: usher)) }
                } else if let fired, status == 200 {
                    let win = MachineWin(
                        ifMatch: version, version: fired.json["version"] as? Int ?? -1,
                        from: fired.json["from"] as? String ?? "?", event: event,
                        to: fired.json["to"] as? String ?? "?", usher: usher)
                    won.withLock { $0.append(win) }
                }
            }
        }
    }
}

/// Checks that the transitions clients were answered form one path of the
/// definition from the initial state, each won against the version the one
/// before it produced (so no two clients won with the same version), and
/// that the machine ended where the last one left it.
struct MachinePathChecker {
    let transitions: Set<MachineStep>
    let initial: String
    let initialVersion: Int

    func check(_ wins: [MachineWin], finalState: String?, finalVersion: Int?) -> [String] {
        walk(wins, end: (finalState, finalVersion)).violations
    }

    /// The path the wins make, in version order, and what is wrong with it.
    /// An event whose answer was lost (`unanswered`) fills a gap when it was
    /// sent with the version before the gap and leads from the state there
    /// to where the next win starts (or, last, to `end`): each fills one. An
    /// `end` (state and version the machine has now) must be where the path ends.
    func walk(
        _ wins: [MachineWin], unanswered: [MachineAttempt] = [], end: (state: String?, version: Int?)? = nil
    ) -> (path: [MachineWin], violations: [String]) {
        var violations: [String] = []
        var path: [MachineWin] = []
        var spare = unanswered
        var state = initial
        var version = initialVersion
        // A lost answer's event applied: from `state` at `version` to `to` at `next`.
        func fill(to: String, next: Int) {
            guard next > version,
                let i = spare.firstIndex(where: {
                    $0.ifMatch == version
                        && transitions.contains(MachineStep(from: state, event: $0.event, to: to))
                })
            else { return }
            let attempt = spare.remove(at: i)
            path.append(
                MachineWin(
                    ifMatch: version, version: next, from: state, event: attempt.event, to: to,
                    usher: attempt.usher))
            state = to
            version = next
        }
        for win in wins.sorted(by: { $0.version < $1.version }) {
            if win.ifMatch != version { fill(to: win.from, next: win.ifMatch) }
            if win.version <= version { violations.append("version \(win.version) not above \(version)") }
            if win.ifMatch != version {
                violations.append("won with If-Match \(win.ifMatch) after version \(version) (lost update)")
            }
            if win.from != state { violations.append("\(win.event) at \(win.version) from \(win.from), not \(state)") }
            if !transitions.contains(MachineStep(from: win.from, event: win.event, to: win.to)) {
                violations.append("\(win.from) -\(win.event)-> \(win.to) is not in the definition")
            }
            path.append(win)
            state = win.to
            version = win.version
        }
        if let end {
            if end.version != version, let to = end.state, let next = end.version { fill(to: to, next: next) }
            if end.state != state || end.version != version {
                violations.append(
                    "\(end.state ?? "nil") at \(end.version ?? -1) is not where the answers lead (\(state) at \(version))"
                )
            }
        }
        return (path, violations)
    }

    /// What is wrong with the server's `history` (oldest first) as the end
    /// of `path`: it must be the path's last transitions, step for step.
    static func historyProblems(_ history: [MachineWin], path: [MachineWin]) -> [String] {
        let steps = { (w: MachineWin) in "\(w.version): \(w.from) -\(w.event)-> \(w.to)" }
        let expected = path.suffix(history.count).map(steps)
        let got = history.map(steps)
        return zip(got, expected).filter { $0 != $1 }.map { "history has \($0.0), the answers \($0.1)" }
            + (got.count > expected.count ? ["history longer than the path: \(got.count) > \(expected.count)"] : [])
    }
}
