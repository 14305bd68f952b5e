import Foundation
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// Definitions shared by the Redis machine tests (as in UsherCoreTests' `MachineFixtures`).
enum RedisMachineFixtures {
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
}

/// One store on a test server, with a `ManualClock` and the deadlines it reported.
struct MachineRig {
    let server: RedisServer
    let clock: ManualClock
    let store: RedisMachineStore
    let deadlines: DeadlineLog

    final class DeadlineLog: @unchecked Sendable {
        private let lock = NSLock()
        private var values: [Timestamp?] = []
        func append(_ value: Timestamp?) { lock.withLock { values.append(value) } }
        var last: Timestamp?? { lock.withLock { values.last } }
    }

    static let channel = "usher:notices"

    init(server: RedisServer? = nil, name: String = "door", clock: ManualClock = ManualClock()) async throws {
        let server = if let server { server } else { try await RedisServer() }
        self.server = server
        self.clock = clock
        let deadlines = DeadlineLog()
        self.deadlines = deadlines
        store = RedisMachineStore(
            keys: ResourceKeys(prefix: "usher:", kind: "machine", name: name),
            connections: RedisConnectionPool([server.connection()]),
            time: .clock(clock), channel: Self.channel, onDeadline: { deadlines.append($0) })
    }

    /// A machine of `definition`, created now.
    func created(_ definition: MachineDefinition, named definitionName: String? = nil) async throws -> MachineSnapshot {
        let (snapshot, created) = try await store.create(definitionName: definitionName, definition: definition)
        #expect(created)
        return snapshot
    }
}

/// `RedisMachineStore` and `machine.lua` against a real redis-server, with
/// `MachineEngine`'s rules (UsherCoreTests' Machine* tests) as the spec.
@Suite(.serialized, .timeLimit(.minutes(2))) struct RedisMachineStoreTests {
    // MARK: - Create, fire, refusals

    @Test func createStartsInTheInitialStateAndAnswersAnExistingMachine() async throws {
        let rig = try await MachineRig()
        let t0 = rig.clock.now()
        let s = try await rig.created(.player, named: "player")
        #expect(
            s
                == MachineSnapshot(
                    name: "door", definitionName: "player", definition: .player, state: "NotReady",
                    version: t0.micros, allowedEvents: ["prepare"], enteredAt: t0, history: [], transaction: nil))
        try await rig.store.fire(event: "prepare")
        // Another definition: the existing machine is answered, unchanged.
        let (again, created) = try await rig.store.create(definitionName: nil, definition: RedisMachineFixtures.lock)
        #expect(!created)
        #expect(again.definition == .player)
        #expect(again.definitionName == "player")
        #expect(again.state == "Ready")
        // An inline definition has no name; its timeouts round-trip.
        let other = try await MachineRig(server: rig.server, name: "other", clock: rig.clock)
        let inline = try await other.created(RedisMachineFixtures.chain)
        #expect(inline.definitionName == nil)
        #expect(inline.definition == RedisMachineFixtures.chain)
    }

    @Test func walksThePlayerCycleWithVersionsThatOnlyGrow() async throws {
        let rig = try await MachineRig()
        let t0 = rig.clock.now()
        let v0 = try await rig.created(.player).version
        var expected: [MachineTransition] = []
        var version = v0
        for (event, to) in [("prepare", "Ready"), ("start", "Running"), ("teardown", "NotReady"), ("prepare", "Ready")]
        {
            let from = try await rig.store.snapshot().state
            let result = try await rig.store.fire(event: event)
            // Without time passing, +1 as in memory.
            version += 1
            #expect(
                result
                    == TransitionResult(
                        MachineTransition(
                            event: event, from: from, to: to, version: version, at: t0, cause: .event, data: nil)))
            expected.append(
                MachineTransition(event: event, from: from, to: to, version: version, at: t0, cause: .event, data: nil))
        }
        let s = try await rig.store.snapshot()
        #expect(s.history == expected)
        #expect(s.version == v0 + 4)
        // Time passed: the version jumps to the clock's µs (time-based, like fences).
        rig.clock.advance(by: 1)
        let later = try await rig.store.fire(event: "start")
        #expect(later.version == rig.clock.now().micros)
    }

    @Test func refusalsComeInTheEnginesOrderAndChangeNothing() async throws {
        let rig = try await MachineRig()
        let v0 = try await rig.created(.player).version
        await #expect(throws: MachineError.invalidTransition(state: "NotReady", allowedEvents: ["prepare"])) {
            try await rig.store.fire(event: "start")
        }
        await #expect(throws: MachineError.unknownEvent(allowedEvents: ["prepare"])) {
            try await rig.store.fire(event: "fly")
        }
        // Unknown event before If-Match, If-Match before the state's rules.
        await #expect(throws: MachineError.unknownEvent(allowedEvents: ["prepare"])) {
            try await rig.store.fire(event: "fly", expectedVersion: v0 - 1)
        }
        await #expect(throws: MachineError.versionMismatch(current: v0)) {
            try await rig.store.fire(event: "start", expectedVersion: v0 - 1)
        }
        let s = try await rig.store.snapshot()
        #expect(s.version == v0)
        #expect(s.history.isEmpty)
        let moved = try await rig.store.fire(event: "prepare", expectedVersion: v0)
        #expect(moved.version == v0 + 1)
        await #expect(throws: MachineError.versionMismatch(current: v0 + 1)) {
            try await rig.store.fire(event: "start", expectedVersion: v0)
        }
    }

    @Test func dataRoundTripsExactly() async throws {
        let rig = try await MachineRig()
        _ = try await rig.created(.player)
        let text =
            #"{"big":-9223372036854775808,"max":9223372036854775807,"e20":100000000000000000000,"#
            + #""tenth":0.1,"list":[1,"two",null,true,{"x":"a/b \"q\" \u00e9 \ud83d\ude00"}],"empty":{}}"#
        let data = try JSONValue.parse(text)
        try await rig.store.fire(event: "prepare", data: data)
        let opened = try await rig.store.open(event: "start", data: .string("</script>"), seconds: 30)
        #expect(opened.data == .string("</script>"))
        let s = try await rig.store.snapshot()
        #expect(s.history.first?.data == data)
        #expect(s.transaction?.data == .string("</script>"))
        if case .object(let members) = s.history.first?.data {
            #expect(members.first { $0.0 == "tenth" }?.1 == .double(0.1))
            #expect(members.first { $0.0 == "max" }?.1 == .int(Int.max))
        } else {
            Issue.record("data is not an object")
        }
    }

    // MARK: - Timeouts

    @Test func aTimeoutIsAppliedByTickAtItsDeadline() async throws {
        let rig = try await MachineRig()
        _ = try await rig.created(RedisMachineFixtures.lock, named: "lock")
        #expect(rig.deadlines.last == .some(nil))
        let t0 = rig.clock.now()
        let claimed = try await rig.store.fire(event: "claim")
        #expect(rig.deadlines.last == t0.adding(seconds: 10))
        rig.clock.advance(by: 9.999)
        try await rig.store.tick()
        #expect(try await rig.store.snapshot().state == "Held")
        rig.clock.advance(by: 0.5)
        try await rig.store.tick()
        #expect(rig.deadlines.last == .some(nil))
        let s = try await rig.store.snapshot()
        #expect(s.state == "Idle")
        #expect(s.enteredAt == t0.adding(seconds: 10))
        #expect(s.version == rig.clock.now().micros)
        #expect(
            s.history.last
                == MachineTransition(
                    event: "expire", from: "Held", to: "Idle", version: s.version, at: t0.adding(seconds: 10),
                    cause: .timeout, data: nil))
        #expect(s.version > claimed.version)
        // Idempotent: the second tick finds nothing due.
        try await rig.store.tick()
        try await rig.store.tick()
        #expect(try await rig.store.snapshot() == s)
    }

    @Test func leavingOrReEnteringTheStateRestartsTheTimer() async throws {
        let rig = try await MachineRig()
        _ = try await rig.created(RedisMachineFixtures.lock)
        let t0 = rig.clock.now()
        try await rig.store.fire(event: "claim")
        rig.clock.advance(by: 6)
        try await rig.store.fire(event: "renew")
        rig.clock.advance(by: 6)  // 12 s after the claim, 6 after the renewal
        #expect(try await rig.store.snapshot().state == "Held")
        rig.clock.advance(by: 4)
        var s = try await rig.store.snapshot()
        #expect(s.state == "Idle")
        #expect(s.history.last?.at == t0.adding(seconds: 16))
        #expect(s.history.map(\.event) == ["claim", "renew", "expire"])
        try await rig.store.fire(event: "claim")
        rig.clock.advance(by: 5)
        try await rig.store.fire(event: "release")
        rig.clock.advance(by: 60)
        s = try await rig.store.snapshot()
        #expect(s.history.map(\.event) == ["claim", "renew", "expire", "claim", "release"])
    }

    @Test func theInitialStatesTimeoutsStartAtCreationAndChainInOneCall() async throws {
        let rig = try await MachineRig()
        let t0 = rig.clock.now()
        _ = try await rig.created(RedisMachineFixtures.chain)
        #expect(rig.deadlines.last == t0.adding(seconds: 10))
        rig.clock.advance(by: 15)
        let s = try await rig.store.snapshot()
        #expect(s.state == "C")
        #expect(s.history.map(\.event) == ["next", "finish"])
        #expect(s.history.map(\.at) == [t0.adding(seconds: 10), t0.adding(seconds: 15)])
        #expect(s.history.allSatisfy { $0.cause == .timeout })
        #expect(s.enteredAt == t0.adding(seconds: 15))
        #expect(rig.deadlines.last == .some(nil))
    }

    @Test func aLongIdleCycleOfTimeoutsCatchesUpOverSeveralCalls() async throws {
        let pingPong = try MachineDefinition(
            initial: "Ping",
            transitions: [
                .init(event: "hit", from: "Ping", to: "Pong"), .init(event: "back", from: "Pong", to: "Ping"),
            ],
            timeouts: [
                .init(state: "Ping", afterSeconds: 0.01, event: "hit"),
                .init(state: "Pong", afterSeconds: 0.01, event: "back"),
            ])
        let rig = try await MachineRig()
        let t0 = rig.clock.now()
        _ = try await rig.created(pingPong)
        rig.clock.advance(by: 25)  // 2,500 steps due; one call applies at most 1,000
        let started = ContinuousClock.now
        try await rig.store.tick()
        let elapsed = ContinuousClock.now - started
        #expect(rig.deadlines.last == t0.adding(seconds: 10.01))
        try await rig.store.tick()
        #expect(rig.deadlines.last == t0.adding(seconds: 20.01))
        let s = try await rig.store.snapshot()
        #expect(s.enteredAt == t0.adding(seconds: 25))
        #expect(s.state == "Ping")
        #expect(s.history.count == MachineEngine.historyLimit)
        #expect(rig.deadlines.last == t0.adding(seconds: 25.01))
        print("1,000 due timeouts in one call: \(elapsed)")
    }

    // MARK: - Transactions

    @Test func openThenCommitMakesTheTransitionAsAnEventWould() async throws {
        let rig = try await MachineRig()
        let v0 = try await rig.created(.player).version
        let t0 = rig.clock.now()
        let opened = try await rig.store.open(event: "prepare", data: .string("side A"), seconds: 30)
        #expect(
            opened
                == MachineTransaction(
                    id: String(t0.micros + 1), event: "prepare", from: "NotReady", to: "Ready",
                    data: .string("side A"), openedAt: t0, expiresAt: t0.adding(seconds: 30), status: .open,
                    version: v0 + 1))
        #expect(rig.deadlines.last == t0.adding(seconds: 30))
        let held = try await rig.store.snapshot()
        #expect(held.state == "NotReady")
        #expect(held.transaction == opened)
        #expect(held.allowedEvents == [])
        #expect(held.history == [])

        rig.clock.advance(by: 2)
        let committed = try await rig.store.commit(transaction: opened.id)
        let now = rig.clock.now()
        #expect(committed.state == "Ready")
        #expect(committed.previousState == "NotReady")
        #expect(committed.version == now.micros)
        let s = try await rig.store.snapshot()
        #expect(s.transaction == nil)
        #expect(s.allowedEvents == ["start"])
        #expect(s.enteredAt == now)
        #expect(
            s.history == [
                MachineTransition(
                    event: "prepare", from: "NotReady", to: "Ready", version: committed.version, at: now,
                    cause: .event, data: .string("side A"), transaction: opened.id)
            ])
        #expect(try await rig.store.transactionCounts() == TransactionCounts(committed: 1))
        #expect(rig.deadlines.last == .some(nil))
    }

    @Test func abortKeepsTheStateAndExpiryEndsIt() async throws {
        let rig = try await MachineRig()
        _ = try await rig.created(.player)
        let opened = try await rig.store.open(event: "prepare", seconds: 30)
        rig.clock.advance(by: 1)
        let aborted = try await rig.store.abort(transaction: opened.id)
        #expect(aborted.status == .aborted)
        #expect(aborted.version == rig.clock.now().micros)
        var s = try await rig.store.snapshot()
        #expect(s.state == "NotReady")
        #expect(s.allowedEvents == ["prepare"])
        #expect(
            s.history == [
                MachineTransition(
                    event: "prepare", from: "NotReady", to: "NotReady", version: aborted.version,
                    at: rig.clock.now(), cause: .aborted, data: nil, transaction: opened.id, attempted: "Ready")
            ])

        let second = try await rig.store.open(event: "prepare", seconds: 5)
        rig.clock.advance(by: 4.999)
        #expect(try await rig.store.snapshot().transaction?.id == second.id)
        rig.clock.advance(by: 0.001)
        s = try await rig.store.snapshot()
        #expect(s.transaction == nil)
        #expect(s.history.last?.cause == .expired)
        #expect(s.history.last?.at == second.expiresAt)
        #expect(s.history.last?.attempted == "Ready")
        #expect(try await rig.store.transactionCounts() == TransactionCounts(aborted: 1, expired: 1))
        await #expect(throws: MachineError.transactionEnded(.expired)) {
            try await rig.store.commit(transaction: second.id)
        }
    }

    @Test func anOpenTransactionRefusesEveryOtherEventAndTransaction() async throws {
        let rig = try await MachineRig()
        _ = try await rig.created(.player)
        let opened = try await rig.store.open(event: "prepare", seconds: 30)
        await #expect(throws: MachineError.transactionOpen(opened)) { try await rig.store.fire(event: "prepare") }
        await #expect(throws: MachineError.transactionOpen(opened)) { try await rig.store.fire(event: "start") }
        await #expect(throws: MachineError.transactionOpen(opened)) {
            try await rig.store.open(event: "prepare", seconds: 30)
        }
        await #expect(throws: MachineError.unknownEvent(allowedEvents: [])) { try await rig.store.fire(event: "fly") }
        await #expect(throws: MachineError.versionMismatch(current: opened.version)) {
            try await rig.store.fire(event: "prepare", expectedVersion: opened.version - 1)
        }
        #expect(try await rig.store.snapshot().version == opened.version)
    }

    @Test func endedAndUnknownTransactions() async throws {
        let rig = try await MachineRig()
        _ = try await rig.created(.player)
        await #expect(throws: MachineError.unknownTransaction) { try await rig.store.commit(transaction: "42") }
        let first = try await rig.store.open(event: "prepare", seconds: 30)
        try await rig.store.commit(transaction: first.id)
        await #expect(throws: MachineError.transactionEnded(.committed)) {
            try await rig.store.commit(transaction: first.id)
        }
        await #expect(throws: MachineError.transactionEnded(.committed)) {
            try await rig.store.abort(transaction: first.id)
        }
        let second = try await rig.store.open(event: "start", seconds: 30)
        #expect(second.id != first.id)
        await #expect(throws: MachineError.unknownTransaction) { try await rig.store.abort(transaction: "42") }
        try await rig.store.abort(transaction: second.id)
        await #expect(throws: MachineError.transactionEnded(.aborted)) {
            try await rig.store.commit(transaction: second.id)
        }
    }

    @Test func aStateTimeoutWaitsForTheTransactionAndFiresAtItsEnd() async throws {
        let rig = try await MachineRig()
        _ = try await rig.created(RedisMachineFixtures.lock)
        try await rig.store.fire(event: "claim")  // Held times out after 10 s
        let opened = try await rig.store.open(event: "release", seconds: 30)
        rig.clock.advance(by: 10)
        var s = try await rig.store.snapshot()
        #expect(s.state == "Held")
        #expect(s.transaction?.id == opened.id)
        #expect(rig.deadlines.last == opened.expiresAt)
        rig.clock.advance(by: 5)
        try await rig.store.abort(transaction: opened.id)
        s = try await rig.store.snapshot()
        #expect(s.state == "Idle")
        #expect(s.history.map(\.event) == ["claim", "release", "expire"])
        #expect(s.history.map(\.cause) == [.event, .aborted, .timeout])
        #expect(s.history.last?.at == rig.clock.now())

        // Due during a transaction that then expires: both in one step, at the expiry.
        try await rig.store.fire(event: "claim")
        let second = try await rig.store.open(event: "release", seconds: 12)
        rig.clock.advance(by: 20)
        try await rig.store.tick()
        s = try await rig.store.snapshot()
        #expect(s.state == "Idle")
        #expect(s.history.suffix(3).map(\.cause) == [.event, .expired, .timeout])
        #expect(s.history.last?.at == second.expiresAt)
    }

    @Test func aCommitLeavesTheStateAndDropsItsDueTimeout() async throws {
        let rig = try await MachineRig()
        _ = try await rig.created(RedisMachineFixtures.lock)
        try await rig.store.fire(event: "claim")
        let opened = try await rig.store.open(event: "renew", seconds: 30)
        rig.clock.advance(by: 11)
        #expect(try await rig.store.snapshot().state == "Held")
        try await rig.store.commit(transaction: opened.id)
        #expect(rig.deadlines.last == rig.clock.now().adding(seconds: 10))
        rig.clock.advance(by: 9.999)
        #expect(try await rig.store.snapshot().history.map(\.event) == ["claim", "renew"])
        rig.clock.advance(by: 0.001)
        let s = try await rig.store.snapshot()
        #expect(s.state == "Idle")
        #expect(s.history.map(\.event) == ["claim", "renew", "expire"])
    }

    @Test func theHistoryKeepsTheLastFiftyEntries() async throws {
        let rig = try await MachineRig()
        _ = try await rig.created(.player)
        let first = try await rig.store.open(event: "prepare", seconds: 30)
        try await rig.store.abort(transaction: first.id)
        for _ in 0..<60 {
            let state = try await rig.store.snapshot().state
            try await rig.store.fire(event: MachineDefinition.player.allowedEvents(in: state)[0])
        }
        let s = try await rig.store.snapshot()
        #expect(s.history.count == MachineEngine.historyLimit)
        #expect(s.history.last?.version == s.version)
        #expect(zip(s.history, s.history.dropFirst()).allSatisfy { $0.to == $1.from && $0.version + 1 == $1.version })
        // The aborted transaction left the history: its id is unknown now.
        await #expect(throws: MachineError.unknownTransaction) { try await rig.store.abort(transaction: first.id) }
    }

    // MARK: - Redis specifics

    @Test func versionsAndIdsNeverGoBackwardsWhenTheClockDoes() async throws {
        let rig = try await MachineRig()
        _ = try await rig.created(.player)
        rig.clock.advance(by: 100)
        let ahead = try await rig.store.open(event: "prepare", seconds: 30)
        // Another instance whose clock is 50 s behind (or a failover to a slower host).
        let behind = ManualClock(start: rig.clock.now().adding(seconds: -50))
        let late = try await MachineRig(server: rig.server, clock: behind)
        let committed = try await late.store.commit(transaction: ahead.id)
        #expect(committed.version == ahead.version + 1)
        let again = try await late.store.open(event: "start", seconds: 30)
        #expect(Int64(again.id)! == Int64(ahead.id)! + 1)
        #expect(again.version == committed.version + 1)
    }

    @Test func noticesTellWhatChanged() async throws {
        let rig = try await MachineRig()
        let events = AsyncStream<RedisSubscriber.Event>.makeStream()
        let subscriber = try RedisSubscriber(
            endpoint: rig.server.endpoint, connectTimeoutSeconds: 1, channels: [MachineRig.channel]
        ) { events.continuation.yield($0) }
        defer { subscriber.stop() }
        var received = events.stream.makeAsyncIterator()
        #expect(await received.next() == .subscribed(channel: MachineRig.channel))
        func nextNotice() async -> MachineNotice? {
            guard case .message(_, let payload) = await received.next() else { return nil }
            return RedisMachineStore.decodeNotice(payload)
        }
        let t0 = rig.clock.now()
        let created = try await rig.created(RedisMachineFixtures.lock)
        #expect(
            await nextNotice()
                == MachineNotice(
                    name: "door", version: created.version, transitions: [], transactions: [], next: nil,
                    deleted: false))
        let claimed = try await rig.store.fire(event: "claim", data: .int(7))
        #expect(
            await nextNotice()
                == MachineNotice(
                    name: "door", version: claimed.version,
                    transitions: [
                        MachineTransition(
                            event: "claim", from: "Idle", to: "Held", version: claimed.version, at: t0,
                            cause: .event, data: .int(7))
                    ], transactions: [], next: t0.adding(seconds: 10), deleted: false))
        let opened = try await rig.store.open(event: "release", seconds: 20)
        #expect(await nextNotice()?.transactions == [opened])
        // A refusal changes nothing and publishes nothing; the tick after the
        // expiry publishes the expired transaction and the deferred timeout together.
        await #expect(throws: MachineError.self) { try await rig.store.fire(event: "claim") }
        rig.clock.advance(by: 20)
        try await rig.store.tick()
        try await rig.store.tick()
        let expired = await nextNotice()
        #expect(expired?.transactions.map(\.status) == [.expired])
        #expect(expired?.transitions.map(\.cause) == [.timeout])
        #expect(expired?.transitions.first?.version == (expired?.transactions.first?.version).map { $0 + 1 })
        #expect(expired?.next == nil)
        #expect(try await rig.store.delete())
        #expect(
            await nextNotice()
                == MachineNotice(name: "door", version: 0, transitions: [], transactions: [], next: nil, deleted: true))
        #expect(RedisMachineStore.decodeNotice(Array(#"{"kind":"queue","name":"q"}"#.utf8)) == nil)
    }

    @Test func goneAfterDelete() async throws {
        let rig = try await MachineRig()
        _ = try await rig.created(.player)
        let opened = try await rig.store.open(event: "prepare", seconds: 30)
        #expect(try await rig.store.delete())
        #expect(try await !rig.store.delete())
        await #expect(throws: MachineError.gone) { try await rig.store.snapshot() }
        await #expect(throws: MachineError.gone) { try await rig.store.fire(event: "prepare") }
        await #expect(throws: MachineError.gone) { try await rig.store.commit(transaction: opened.id) }
        await #expect(throws: MachineError.gone) { try await rig.store.abort(transaction: opened.id) }
        await #expect(throws: MachineError.gone) { try await rig.store.tick() }
        await #expect(throws: MachineError.gone) { try await rig.store.transactionCounts() }
        let keys = try await rig.server.connection().command(["KEYS", "*"])
        #expect(keys == .array([]))
        // Created again later: a fresh machine, its version still ahead of the old one's.
        rig.clock.advance(by: 1)
        let again = try await rig.created(RedisMachineFixtures.lock)
        #expect(again.history.isEmpty)
        #expect(again.version == rig.clock.now().micros)
        #expect(again.version > opened.version)
    }

    @Test func racingIfMatchClientsOnSeveralConnectionsLeaveAValidPath() async throws {
        let rig = try await MachineRig(name: "race")
        _ = try await rig.created(.player)
        // Four "instances", each with its own connection, 25 attempts each.
        let stores = try await (0..<4).asyncMap { _ in try await MachineRig(server: rig.server, name: "race").store }
        let wins = try await withThrowingTaskGroup(of: Int.self) { group in
            for store in stores {
                group.addTask {
                    var wins = 0
                    for _ in 0..<25 {
                        let s = try await store.snapshot()
                        let event = MachineDefinition.player.allowedEvents(in: s.state)[0]
                        do {
                            try await store.fire(event: event, expectedVersion: s.version)
                            wins += 1
                        } catch MachineError.versionMismatch {
                        }
                    }
                    return wins
                }
            }
            return try await group.reduce(0, +)
        }
        let s = try await rig.store.snapshot()
        #expect(wins > 0)
        #expect(s.history.count == min(wins, MachineEngine.historyLimit))
        #expect(zip(s.history, s.history.dropFirst()).allSatisfy { $0.to == $1.from && $0.version < $1.version })
    }

    @Test func aFlushedScriptCacheIsRefilled() async throws {
        let rig = try await MachineRig()
        _ = try await rig.created(.player)
        #expect(try await rig.server.connection().command(["SCRIPT", "FLUSH"]) == .status("OK"))
        #expect(try await rig.store.fire(event: "prepare").state == "Ready")
    }

    @Test func unavailableWhenTheServerIsStopped() async throws {
        let rig = try await MachineRig()
        _ = try await rig.created(.player)
        rig.server.stop()
        await #expect {
            try await rig.store.fire(event: "prepare")
        } throws: { error in
            if case .backendUnavailable = error as? MachineError { return true }
            return false
        }
    }

    @Test func everyKeyOfAMachineSharesOneHashSlot() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("usher-cluster-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // A one-node cluster: Redis itself refuses a script that touches another slot.
        // Its bus port must be given: the default, port + 10000, may pass 65535.
        let server = try await RedisServer(arguments: [
            "--cluster-enabled", "yes", "--cluster-config-file", directory.appendingPathComponent("nodes.conf").path,
            "--cluster-port", String(try RedisServer.freePort()),
        ])
        let admin = server.connection()
        #expect(try await admin.command(["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]) == .status("OK"))
        var ready = false
        for _ in 0..<200 where !ready {
            ready = try await admin.command(["CLUSTER", "INFO"]).string?.contains("cluster_state:ok") == true
            if !ready { try await Task.sleep(for: .milliseconds(20)) }
        }
        let rig = try await MachineRig(server: server)
        _ = try await rig.created(RedisMachineFixtures.lock)
        try await rig.store.fire(event: "claim")
        let opened = try await rig.store.open(event: "release", seconds: 5)
        try await rig.store.commit(transaction: opened.id)
        let keys = try #require(try await admin.command(["KEYS", "*"]).array).compactMap(\.string)
        #expect(Set(keys) == ["usher:{machine:door}:meta", "usher:{machine:door}:history"])
        var slots: Set<Int64> = []
        for key in keys { slots.insert(try #require(try await admin.command(["CLUSTER", "KEYSLOT", key]).int)) }
        #expect(slots.count == 1)
    }
}

extension Range<Int> {
    fileprivate func asyncMap<T>(_ body: (Int) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for i in self { results.append(try await body(i)) }
        return results
    }
}
