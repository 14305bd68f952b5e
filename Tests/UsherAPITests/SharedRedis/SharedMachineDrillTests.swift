import Foundation
import HTTPTestClient
import Testing

@testable import Locking

/// Issue 17, "Tests", the machine: three `usher` processes on one
/// `redis-server`, clients on all three racing `If-Match` events for 20 s.
/// Every answered transition must lie on one valid path, and no two clients
/// may both win with the same version (a lost update).
@Suite(.serialized, .enabled(if: FileManager.default.fileExists(atPath: CommandLineTests.binary.path)))
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

    static var body: String {
        let list = transitions.sorted { "\($0)" < "\($1)" }.map {
            #"{"event": "\#($0.event)", "from": "\#($0.from)", "to": "\#($0.to)"}"#
        }
        let definition = #"{"initial": "A", "transitions": [\#(list.joined(separator: ", "))]}"#
        return #"{"backend": "redis", "definition": \#(definition)}"#
    }

    @Test func racingIfMatchClientsOnThreeProcessesLeaveOneValidPath() async throws {
        let cluster = try await SharedRedisCluster()
        defer { cluster.stop() }
        let created = try cluster.ushers[0].call("PUT", "/v1/machines/\(Self.machine)", Self.body)
        #expect(created.status == 201, "\(created.text)")
        let initialVersion = try #require(created.json["version"] as? Int)
        for usher in cluster.ushers {
            let seen = await poll(5) { (try? usher.call("GET", "/v1/machines/\(Self.machine)").status) == 200 }
            #expect(seen, "usher \(usher.index) does not see the machine")
        }
        let seconds = ProcessInfo.processInfo.environment["USHER_SOAK_SECONDS"].flatMap(Double.init) ?? 20
        let end = Date().addingTimeInterval(seconds)
        let wins = Locked<[MachineWin]>([])
        let statuses = Locked<[Int: Int]>([:])
        await onThreads(9) { worker in
            let usher = cluster.ushers[worker % cluster.ushers.count]
            let client = TestHTTPClient(port: usher.port, timeoutSeconds: 15)
            var random = SystemRandomNumberGenerator()
            while Date() < end {
                guard let read = try? client.request("GET", "/v1/machines/\(Self.machine)"),
                    read.status == 200, let version = read.json["version"] as? Int
                else {
                    statuses.withLock { $0[-1, default: 0] += 1 }
                    continue
                }
                let allowed = read.json["allowed_events"] as? [String] ?? []
                // Mostly an event allowed when read; now and then any event.
                let event =
                    Int.random(in: 0..<5, using: &random) == 0 || allowed.isEmpty
                    ? Self.events.randomElement(using: &random)! : allowed.randomElement(using: &random)!
                guard
                    let fired = try? client.request(
                        "POST", "/v1/machines/\(Self.machine)/events/\(event)", body: "{}",
                        headers: ["If-Match": "\"\(version)\""])
                else {
                    statuses.withLock { $0[-1, default: 0] += 1 }
                    continue
                }
                statuses.withLock { $0[fired.status, default: 0] += 1 }
                if fired.status == 200 {
                    let win = MachineWin(
                        ifMatch: version, version: fired.json["version"] as? Int ?? -1,
                        from: fired.json["previous_state"] as? String ?? "?", event: event,
                        to: fired.json["state"] as? String ?? "?", usher: usher.index)
                    wins.withLock { $0.append(win) }
                }
            }
        }
        let answered = statuses.withLock { $0 }
        let won = wins.withLock { $0 }
        let final = try cluster.ushers[2].call("GET", "/v1/machines/\(Self.machine)")
        let violations = MachinePathChecker(transitions: Self.transitions, initial: "A", initialVersion: initialVersion)
            .check(won, finalState: final.json["state"] as? String, finalVersion: final.json["version"] as? Int)
        #expect(violations.isEmpty, "\(violations.count) violations: \(violations.prefix(10))")
        #expect(Set(answered.keys).isSubset(of: [200, 409, 412]), "unexpected answers: \(answered)")
        #expect(answered[200, default: 0] > Int(seconds) * 5, "too few transitions: \(answered)")
        #expect(answered[412, default: 0] > 0, "no race was lost: \(answered)")
        #expect(Set(won.map(\.usher)) == [0, 1, 2], "every process won some")
        // The server's own history ends with the last answered transitions.
        let history = (final.json["history"] as? [[String: Any]] ?? []).compactMap { $0["version"] as? Int }
        let lastWins = won.map(\.version).sorted().suffix(history.count)
        #expect(history == Array(lastWins), "the history differs from the answers")
        #expect(cluster.deaths().isEmpty, "\(cluster.deaths())")
        print(
            "[shared-redis] machine: \(seconds) s, answers \(answered.sorted { $0.key < $1.key }), "
                + "\(won.count) transitions, \(violations.count) violations")
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
}

/// One transition of the definition.
struct MachineStep: Hashable, CustomStringConvertible {
    let from: String
    let event: String
    let to: String

    var description: String { "\(from) -\(event)-> \(to)" }
}

/// A `200` a client got for an event sent with `If-Match: ifMatch`.
struct MachineWin: Sendable {
    var ifMatch: Int
    var version: Int
    var from: String
    var event: String
    var to: String
    var usher: Int
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
        var violations: [String] = []
        let ordered = wins.sorted { $0.version < $1.version }
        var state = initial
        var version = initialVersion
        for win in ordered {
            if win.version <= version { violations.append("version \(win.version) not above \(version)") }
            if win.ifMatch != version {
                violations.append("won with If-Match \(win.ifMatch) after version \(version) (lost update)")
            }
            if win.from != state { violations.append("\(win.event) at \(win.version) from \(win.from), not \(state)") }
            if !transitions.contains(MachineStep(from: win.from, event: win.event, to: win.to)) {
                violations.append("\(win.from) -\(win.event)-> \(win.to) is not in the definition")
            }
            state = win.to
            version = win.version
        }
        if finalState != state { violations.append("ended in \(finalState ?? "nil"), the answers say \(state)") }
        if finalVersion != version { violations.append("ended at version \(finalVersion ?? -1), answers \(version)") }
        return violations
    }
}
