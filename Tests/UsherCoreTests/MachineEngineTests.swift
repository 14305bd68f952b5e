import TestSupport
import Testing

@testable import UsherCore

/// Definitions shared by the machine tests.
enum MachineFixtures {
    static let start = Timestamp(micros: 1_767_225_600_000_000)

    /// Idle → claim → Held; Held → renew → Held; Held → release/expire → Idle;
    /// Held expires after 10 s.
    static let lock = try! MachineDefinition(
        initial: "Idle",
        transitions: [
            .init(event: "claim", from: "Idle", to: "Held"),
            .init(event: "renew", from: "Held", to: "Held"),
            .init(event: "release", from: "Held", to: "Idle"),
            .init(event: "expire", from: "Held", to: "Idle"),
        ],
        timeouts: [.init(state: "Held", afterSeconds: 10, event: "expire")])

    /// A → B after 10 s, B → C after 5 s; the initial state has a timeout.
    static let chain = try! MachineDefinition(
        initial: "A",
        transitions: [
            .init(event: "next", from: ["A", "B"], to: "B"),
            .init(event: "finish", from: "B", to: "C"),
        ],
        timeouts: [
            .init(state: "A", afterSeconds: 10, event: "next"),
            .init(state: "B", afterSeconds: 5, event: "finish"),
        ])

    /// The next event along the player's cycle.
    static func playerEvent(after state: String) -> String {
        MachineDefinition.player.allowedEvents(in: state)[0]
    }
}

/// The value-type engine, driven synchronously.
@Suite struct MachineEngineTests {
    let t0 = MachineFixtures.start

    @Test func startsInTheInitialStateWithTheCreationTimeAsVersion() {
        let e = MachineEngine(definition: .player, createdAt: t0)
        #expect(e.state == "NotReady")
        #expect(e.version == t0.micros)
        #expect(e.enteredAt == t0)
        #expect(e.history.isEmpty)
        #expect(e.allowedEvents == ["prepare"])
    }

    @Test func walksThePlayerCycle() throws {
        var e = MachineEngine(definition: .player, createdAt: t0)
        var at = t0
        for (event, to) in [("prepare", "Ready"), ("start", "Running"), ("teardown", "NotReady"), ("prepare", "Ready")]
        {
            at = at.adding(seconds: 1)
            let from = e.state
            let t = try e.fire(event, expectedVersion: nil, data: nil, at: at)
            #expect(
                t
                    == MachineTransition(
                        event: event, from: from, to: to, version: e.version, at: at, cause: .event, data: nil))
            #expect(e.state == to)
            #expect(e.enteredAt == at)
        }
        #expect(e.version == t0.micros + 4)
        #expect(e.history.map(\.to) == ["Ready", "Running", "NotReady", "Ready"])
    }

    @Test func refusesAnEventTheStateDoesNotAllow() {
        var e = MachineEngine(definition: .player, createdAt: t0)
        #expect(throws: MachineError.invalidTransition(state: "NotReady", allowedEvents: ["prepare"])) {
            try e.fire("start", expectedVersion: nil, data: nil, at: t0)
        }
        #expect(e.state == "NotReady")
        #expect(e.version == t0.micros)
        #expect(e.history.isEmpty)
    }

    @Test func refusesAnUnknownEventListingTheAllowedOnes() {
        var e = MachineEngine(definition: .player, createdAt: t0)
        #expect(throws: MachineError.unknownEvent(allowedEvents: ["prepare"])) {
            try e.fire("rewind", expectedVersion: nil, data: nil, at: t0)
        }
    }

    @Test func checksTheExpectedVersion() throws {
        var e = MachineEngine(definition: .player, createdAt: t0)
        #expect(throws: MachineError.versionMismatch(current: t0.micros)) {
            try e.fire("prepare", expectedVersion: t0.micros - 1, data: nil, at: t0)
        }
        #expect(e.state == "NotReady")
        let t = try e.fire("prepare", expectedVersion: t0.micros, data: nil, at: t0)
        #expect(t.version == t0.micros + 1)
    }

    @Test func checksInOrderUnknownThenVersionThenState() {
        var e = MachineEngine(definition: .player, createdAt: t0)
        #expect(throws: MachineError.unknownEvent(allowedEvents: ["prepare"])) {
            try e.fire("rewind", expectedVersion: 1, data: nil, at: t0)
        }
        #expect(throws: MachineError.versionMismatch(current: t0.micros)) {
            try e.fire("start", expectedVersion: 1, data: nil, at: t0)
        }
    }

    @Test func keepsTheDataInHistory() throws {
        var e = MachineEngine(definition: .player, createdAt: t0)
        let data = JSONValue.object([("track", .int(7))])
        try e.fire("prepare", expectedVersion: nil, data: data, at: t0)
        #expect(
            e.history.last
                == MachineTransition(
                    event: "prepare", from: "NotReady", to: "Ready", version: t0.micros + 1, at: t0, cause: .event,
                    data: data))
    }

    @Test func historyKeepsTheLastFiftyInOrder() throws {
        var e = MachineEngine(definition: .player, createdAt: t0)
        for i in 0..<120 {
            try e.fire(MachineFixtures.playerEvent(after: e.state), expectedVersion: nil, data: .int(i), at: t0)
        }
        #expect(e.history.count == 50)
        #expect(e.history.map(\.version) == Array((t0.micros + 71)...(t0.micros + 120)))
        #expect(e.history.first?.data == .int(70))
        #expect(e.history.last?.data == .int(119))
        for (a, b) in zip(e.history, e.history.dropFirst()) {
            #expect(a.to == b.from)
        }
    }

    @Test func plansTheTimeoutsOfEachEntry() throws {
        var e = MachineEngine(definition: MachineFixtures.lock, createdAt: t0)
        #expect(e.plannedTimeouts().isEmpty)
        try e.fire("claim", expectedVersion: nil, data: nil, at: t0)
        let first = e.plannedTimeouts()
        #expect(
            first == [PlannedTimeout(token: TimeoutToken(entry: e.entry, index: 0), deadline: t0.adding(seconds: 10))])

        // A self-transition is a new entry: the old token is stale.
        let t1 = t0.adding(seconds: 4)
        try e.fire("renew", expectedVersion: nil, data: nil, at: t1)
        #expect(e.plannedTimeouts().map(\.deadline) == [t1.adding(seconds: 10)])
        #expect(e.fire(timeout: first[0].token, at: t0.adding(seconds: 10)) == nil)
        #expect(e.state == "Held")

        let fresh = e.plannedTimeouts()[0].token
        let fired = e.fire(timeout: fresh, at: t1.adding(seconds: 10))
        #expect(fired?.cause == .timeout)
        #expect(fired?.event == "expire")
        #expect(e.state == "Idle")
        #expect(e.fire(timeout: fresh, at: t1.adding(seconds: 10)) == nil)
    }

    @Test func snapshotShowsTheDefinitionByNameOrInline() throws {
        var e = MachineEngine(definition: .player, createdAt: t0)
        try e.fire("prepare", expectedVersion: nil, data: nil, at: t0.adding(seconds: 1.5))
        let named = e.snapshot(name: "jukebox", definitionName: "player")
        #expect(named.name == "jukebox" && named.definitionName == "player" && named.state == "Ready")
        #expect(named.version == t0.micros + 1 && named.allowedEvents == ["start"])
        #expect(named.enteredAt == t0.adding(seconds: 1.5) && named.history.map(\.event) == ["prepare"])
        let inline = e.snapshot(name: "jukebox", definitionName: nil)
        #expect(inline.definitionName == nil && inline.definition == .player)
        #expect(named.transaction == nil)
    }

    @Test func transitionResultCarriesTheNewVersion() throws {
        var e = MachineEngine(definition: .player, createdAt: t0)
        let r = TransitionResult(try e.fire("prepare", expectedVersion: nil, data: nil, at: t0))
        #expect(r.state == "Ready" && r.previousState == "NotReady" && r.event == "prepare")
        #expect(r.version == t0.micros + 1)
    }
}

extension MachineFixtures {
    /// Yields until `condition` holds (a waiter has parked, say); never sleeps.
    static func eventually(
        _ condition: () async -> Bool, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        await expectEventually(10, condition, sourceLocation: sourceLocation)
    }
}
