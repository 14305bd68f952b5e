import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// Random operations on the memory machine (`StateMachine`) and the Redis
/// store, driven by one `ManualClock`: every answer, error and snapshot must
/// be the same. Versions and transaction ids differ by design (Redis's are
/// time-based), so they are matched through a strictly increasing one-to-one map.
@Suite(.serialized, .timeLimit(.minutes(2))) struct RedisMachineDifferentialTests {
    /// Timeouts that chain, tie (the first listed wins) and fall due during transactions.
    static let definition = try! MachineDefinition(
        initial: "Idle",
        transitions: [
            .init(event: "claim", from: "Idle", to: "Held"),
            .init(event: "renew", from: "Held", to: "Held"),
            .init(event: "release", from: ["Held", "Busy"], to: "Idle"),
            .init(event: "expire", from: "Held", to: "Idle"),
            .init(event: "work", from: "Held", to: "Busy"),
            .init(event: "finish", from: "Busy", to: "Done"),
            .init(event: "fail", from: "Busy", to: "Idle"),
            .init(event: "reset", from: "Done", to: "Idle"),
        ],
        timeouts: [
            .init(state: "Held", afterSeconds: 10, event: "expire"),
            .init(state: "Busy", afterSeconds: 5, event: "fail"),
            .init(state: "Busy", afterSeconds: 3, event: "finish"),
            .init(state: "Busy", afterSeconds: 3, event: "fail"),
            .init(state: "Done", afterSeconds: 2, event: "reset"),
        ])

    @Test(arguments: [1, 2, 3]) func theStoreAnswersAsTheMemoryMachineDoes(seed: UInt64) async throws {
        let rig = try await MachineRig(name: "diff")
        let memory = StateMachine(
            name: "diff", definitionName: "diff", definition: Self.definition, clock: rig.clock)
        let (created, _) = try await rig.store.create(definitionName: "diff", definition: Self.definition)
        var match = Matcher()
        try match.same(created, await memory.snapshot())
        var random = SplitMix(state: seed)
        let events = Self.definition.events + ["fly"]
        var seenIDs: [(memory: String, redis: String)] = [("42", "42")]
        var seenVersions: [(memory: Int64, redis: Int64)] = []
        var successes = 0
        /// Mostly an event allowed now, else any (refusals are compared too).
        func pickEvent(_ m: MachineSnapshot) -> String {
            let allowed = Self.definition.allowedEvents(in: m.state)
            return random.next(3) > 0 ? allowed[random.next(allowed.count)] : events[random.next(events.count)]
        }

        for step in 0..<400 {
            let m = await memory.snapshot()
            let r = try await rig.store.snapshot()
            try match.same(r, m)
            seenVersions.append((m.version, r.version))
            let expected: (memory: Int64, redis: Int64)? =
                switch random.next(4) {
                case 0: seenVersions[random.next(seenVersions.count)]
                case 1: (m.version, r.version)
                default: nil
                }
            let data: JSONValue? = random.next(3) == 0 ? .object([("step", .int(step)), ("x", .double(0.1))]) : nil
            switch random.next(7) {
            case 0, 1:
                let event = pickEvent(m)
                let a = await Self.result { () throws(MachineError) in
                    try await memory.fire(event: event, expectedVersion: expected?.memory, data: data)
                }
                let b = await Self.result { () throws(MachineError) in
                    try await rig.store.fire(event: event, expectedVersion: expected?.redis, data: data)
                }
                try match.same(b, a, step: step)
                if case .success = a { successes += 1 }
            case 2:
                let event = pickEvent(m)
                let seconds = [1.0, 3, 5, 12][random.next(4)]
                let a = await Self.result { () throws(MachineError) in
                    try await memory.open(event: event, expectedVersion: expected?.memory, data: data, seconds: seconds)
                }
                let b = await Self.result { () throws(MachineError) in
                    try await rig.store.open(
                        event: event, expectedVersion: expected?.redis, data: data, seconds: seconds)
                }
                try match.same(b, a, step: step)
                if case .success = a { successes += 1 }
                if case .success(let t) = a, case .success(let u) = b { seenIDs.append((t.id, u.id)) }
            case 3:
                let id = random.next(3) == 0 ? seenIDs[random.next(seenIDs.count)] : seenIDs[seenIDs.count - 1]
                let a = await Self.result { () throws(MachineError) in try await memory.commit(transaction: id.memory) }
                let b = await Self.result { () throws(MachineError) in
                    try await rig.store.commit(transaction: id.redis)
                }
                try match.same(b, a, step: step)
                if case .success = a { successes += 1 }
            case 4:
                let id = random.next(3) == 0 ? seenIDs[random.next(seenIDs.count)] : seenIDs[seenIDs.count - 1]
                let a = await Self.result { () throws(MachineError) in try await memory.abort(transaction: id.memory) }
                let b = await Self.result { () throws(MachineError) in
                    try await rig.store.abort(transaction: id.redis)
                }
                try match.same(b, a, step: step)
                if case .success = a { successes += 1 }
            default:
                rig.clock.advance(by: [0.5, 1, 2, 2.5, 3, 5, 7, 10, 20][random.next(9)])
                if random.next(2) == 0 { try await rig.store.tick() }
            }
            #expect(try await rig.store.transactionCounts() == memory.transactionCounts, "step \(step)")
        }
        #expect(successes > 60)
        let final = try await rig.store.snapshot()
        try match.same(final, await memory.snapshot())
        #expect(final.history.count == MachineEngine.historyLimit)
    }

    static func result<T>(_ body: () async throws(MachineError) -> T) async -> Result<T, MachineError> {
        do { return .success(try await body()) } catch { return .failure(error) }
    }
}

extension SplitMix {
    /// A number in `0..<bound`.
    mutating func next(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
}

/// Compares Redis answers with memory ones, translating Redis versions and
/// ids into memory's through maps that must stay one-to-one and strictly increasing.
struct Matcher {
    struct Mismatch: Error, CustomStringConvertible {
        var description: String
    }

    private var versions: [Int64: Int64] = [:]
    private var ids: [Int64: Int64] = [:]

    /// Redis `r`'s counterpart in memory, given that it stands where memory has `m`.
    mutating func version(_ r: Int64, as m: Int64) throws -> Int64 {
        try Self.pair(r, m, in: &versions, what: "version")
    }

    mutating func id(_ r: String, as m: String) throws -> String {
        guard let rn = Int64(r), let mn = Int64(m) else { return r }
        return String(try Self.pair(rn, mn, in: &ids, what: "transaction id"))
    }

    private static func pair(_ r: Int64, _ m: Int64, in map: inout [Int64: Int64], what: String) throws -> Int64 {
        if let known = map[r] { return known }
        for (r2, m2) in map where (r < r2) != (m < m2) || m == m2 {
            throw Mismatch(description: "\(what) \(r) ↔ \(m) breaks the order of \(r2) ↔ \(m2)")
        }
        map[r] = m
        return m
    }

    mutating func same(_ r: MachineSnapshot, _ m: MachineSnapshot) throws {
        guard r.history.count == m.history.count else {
            throw Mismatch(description: "history \(r.history) vs \(m.history)")
        }
        let translated = MachineSnapshot(
            name: r.name, definitionName: r.definitionName, definition: r.definition, state: r.state,
            version: try version(r.version, as: m.version), allowedEvents: r.allowedEvents, enteredAt: r.enteredAt,
            history: try zip(r.history, m.history).map { try translate($0, as: $1) },
            transaction: try r.transaction.map { try translate($0, as: m.transaction ?? $0) })
        #expect(translated == m)
        if translated != m { throw Mismatch(description: "snapshot \(r) vs \(m)") }
    }

    mutating func same<T: Equatable>(_ r: Result<T, MachineError>, _ m: Result<T, MachineError>, step: Int) throws {
        let translated: Result<T, MachineError>
        switch (r, m) {
        case (.success(let rv as TransitionResult), .success(let mv as TransitionResult)):
            translated = .success(TransitionResult(try translate(rv.transition, as: mv.transition)) as! T)
        case (.success(let rv as MachineTransaction), .success(let mv as MachineTransaction)):
            translated = .success(try translate(rv, as: mv) as! T)
        case (.failure(.versionMismatch(let rc)), .failure(.versionMismatch(let mc))):
            translated = .failure(.versionMismatch(current: try version(rc, as: mc)))
        case (.failure(.transactionOpen(let rt)), .failure(.transactionOpen(let mt))):
            translated = .failure(.transactionOpen(try translate(rt, as: mt)))
        default:
            translated = r
        }
        #expect(translated == m, "step \(step)")
        if translated != m { throw Mismatch(description: "step \(step): \(r) vs \(m)") }
    }

    private mutating func translate(_ r: MachineTransition, as m: MachineTransition) throws -> MachineTransition {
        MachineTransition(
            event: r.event, from: r.from, to: r.to, version: try version(r.version, as: m.version), at: r.at,
            cause: r.cause, data: r.data, transaction: try r.transaction.map { try id($0, as: m.transaction ?? $0) },
            attempted: r.attempted)
    }

    private mutating func translate(_ r: MachineTransaction, as m: MachineTransaction) throws -> MachineTransaction {
        MachineTransaction(
            id: try id(r.id, as: m.id), event: r.event, from: r.from, to: r.to, data: r.data, openedAt: r.openedAt,
            expiresAt: r.expiresAt, status: r.status, version: try version(r.version, as: m.version))
    }
}
