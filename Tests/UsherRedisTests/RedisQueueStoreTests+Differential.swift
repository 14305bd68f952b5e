import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// The Redis store against the memory engine: the same random operations at
/// the same `ManualClock` times must give the same answers and notices.
/// Fences differ in value (memory counts from the creation time, Redis takes
/// max(last + 1, now)), so only their order is compared.
extension RedisQueueStoreTests {
    @Test(arguments: [
        (UInt64(1), DedupMode.key, DedupKeep.first), (2, .adjacent, .latest), (3, .off, .first), (4, .key, .latest),
    ])
    func answersLikeTheMemoryEngine(seed: UInt64, dedup: DedupMode, keep: DedupKeep) async throws {
        let server = try await RedisServer()
        var run = try await DifferentialRun(server: server, seed: seed, dedup: dedup, keep: keep)
        try await run.play(operations: 2500)
        try await run.finish()
        // The run went through every kind of ending (so the comparisons covered them).
        let totals = run.engine.counts
        #expect(totals.expiredTotal > 0 && totals.releasedTotal > 0 && totals.timedOutTotal > 0)
        #expect(totals.cancelledTotal > totals.timedOutTotal && totals.completedTotal > 0)
        #expect(dedup == .off || totals.mergedTotal > 0)
        #expect(totals.abandonedTotal > 0 && totals.unclaimedTotal > 0)
    }
}

/// A seeded SplitMix64: the same run for a seed.
/// A small seeded generator (SplitMix64), so a failing seed replays.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

struct DifferentialRun {
    let clock = ManualClock(start: RedisQueueStoreTests.start)
    let store: RedisQueueStore
    let notices = Recorder<QueueNotice>()
    let subscriber: RedisSubscriber
    var engine: QueueEngine
    var rng: SplitMix
    /// Every id either side answered, and some never used.
    var ids: [String] = ["nobody"]
    /// Memory fence -> Redis fence of each grant seen.
    var fences: [Int64: Int64] = [:]
    /// Each operation's changes on the memory side (non-empty ones), with the views after it.
    var expectedChanges: [[VisitorView]] = []
    var operations = 0

    init(server: RedisServer, seed: UInt64, dedup: DedupMode, keep: DedupKeep) async throws {
        let notices = self.notices
        subscriber = try RedisSubscriber(
            endpoint: server.endpoint, connectTimeoutSeconds: 1, channels: ["usher:notices"]
        ) { event in
            if case .message(_, let payload) = event, let n = RedisQueueStore.decodeNotice(payload) {
                notices.append(n)
            }
        }
        try await RedisQueueStoreTests.waitUntil { await RedisQueueStoreTests.subscribers(server) == 1 }
        rng = SplitMix(state: seed)
        let config = QueueConfig(
            capacity: 2, maxWaiting: 6, holdSeconds: 8, dedup: dedup, dedupKeep: keep, opposites: [["like", "unlike"]],
            history: 5, dedupSeconds: seed % 2 == 0 ? 3 : 0, idleSeconds: 6, claimSeconds: 4)
        store = RedisQueueStoreTests.store(server, clock)
        engine = QueueEngine(name: "q", config: config, createdAt: clock.now())
        #expect(try await store.create(config).created)
    }

    mutating func pick<T>(_ options: [T]) -> T { options[Int(rng.next() % UInt64(options.count))] }
    mutating func chance(_ percent: UInt64) -> Bool { rng.next() % 100 < percent }

    mutating func play(operations count: Int) async throws {
        for _ in 0..<count {
            let roll = rng.next() % 100
            let now = clock.now()
            let id = pick(ids)
            switch roll {
            case 0..<30:
                let r = VisitorRequest(
                    id: chance(40) ? "c\(rng.next() % 15)" : nil, key: pick([nil, "k1", "k2", "k3"]),
                    action: pick([nil, "like", "unlike", "set"]), payload: chance(30) ? .object([("n", .int(7))]) : nil,
                    priority: pick([0, 0, 0, -1, 2]), holdSeconds: pick([nil, nil, nil, 3, 0, 20, 0.001]),
                    delaySeconds: pick([nil, nil, nil, 0, 1.5, 3]))
                let tryOnce = chance(10)
                let memory = outcome { () throws(QueueError) in
                    try (tryOnce ? engine.enqueueOrTimeOut(r, now: now) : engine.enqueue(r, now: now)).view
                }
                let redis = await awaitedOutcome { () async throws(QueueError) in
                    try await store.enqueue(r, tryOnce: tryOnce).view
                }
                compare(memory, redis, "enqueue \(r) tryOnce \(tryOnce)")
            case 30..<40:
                compare(
                    outcome { () throws(QueueError) in try engine.complete(id: id, now: now) },
                    await awaitedOutcome { () async throws(QueueError) in try await store.complete(id: id) },
                    "complete \(id)")
            case 40..<47:
                compare(
                    outcome { () throws(QueueError) in try engine.remove(id: id, byClient: true, now: now) },
                    await awaitedOutcome { () async throws(QueueError) in try await store.remove(id: id) },
                    "remove \(id)")
            case 47..<52:
                let hold = pick([nil, 3, 20, 0, 0.001] as [Double?])
                compare(
                    outcome { () throws(QueueError) in try engine.extend(id: id, holdSeconds: hold, now: now) },
                    await awaitedOutcome { () async throws(QueueError) in
                        try await store.extend(id: id, holdSeconds: hold)
                    },
                    "extend \(id) \(String(describing: hold))")
            case 52..<56:
                compare(
                    outcome { () throws(QueueError) in try engine.timeOut(id: id, now: now) },
                    await awaitedOutcome { () async throws(QueueError) in try await store.timeOut(id: id) },
                    "timeOut \(id)")
            case 56..<59:
                let memory = outcome { () throws(QueueError) in try engine.disconnect(id: id, now: now) }
                let redis = await awaitedOutcome { () async throws(QueueError) in try await store.disconnect(id: id) }
                if case .failure(.notFound) = memory {
                    #expect(redis == .success(nil), "disconnect \(id)")
                } else {
                    compare(memory, redis.map { $0! }, "disconnect \(id)")
                }
            case 59..<62:
                let known = fences.first { pair in engine.currentView(id: id)?.fence == pair.key }
                let wrong: Int64 = chance(30) ? 1 : 0
                let memory = engine.undoGrant(id: id, fence: (known?.key ?? 0) + wrong, now: now)
                let redis = await awaitedOutcome { () async throws(QueueError) in
                    try await store.undoGrant(id: id, fence: (known?.value ?? 0) + wrong)
                }
                #expect((memory == nil) == ((try? redis.get()) ?? nil == nil), "undoGrant \(id)")
                if let memory, case .success(let view?) = redis { compare(.success(memory), .success(view), "undo") }
            case 62..<65:
                compare(
                    outcome { () throws(QueueError) in try engine.visitor(id: id, now: now) },
                    await awaitedOutcome { () async throws(QueueError) in try await store.visitor(id: id) },
                    "visitor \(id)")
            case 65..<67:
                // A long-poll parks on it: heard of until its wait ends.
                let until = now.adding(seconds: pick([0.5, 2, 5]))
                let memory = outcome { () throws(QueueError) in
                    let view = try engine.visitor(id: id, now: now)
                    engine.hear(id: id, until: until)
                    return view
                }
                compare(
                    memory,
                    await awaitedOutcome { () async throws(QueueError) in
                        try await store.visitor(id: id, heardUntil: until)
                    }, "park on \(id)")
            case 67..<72:
                try await comparePages(limit: Int(rng.next() % 4), now: now)
            case 72..<74:
                engine.advance(to: now)
                let redis = try await store.counts()
                #expect(redis.counts == engine.counts && redis.oldestWaitingSince == engine.oldestWaitingSince)
            case 74..<76:
                engine.advance(to: now)
                try await store.tick()
            case 76..<78:
                let patch = QueuePatch(
                    capacity: chance(50) ? Int(rng.next() % 4) : nil, maxWaiting: chance(20) ? 3 : nil,
                    holdSeconds: chance(30) ? pick([5, 8, 0]) : nil,
                    dedupKeep: chance(10) ? pick(DedupKeep.allCases) : nil,
                    history: chance(30) ? Int(rng.next() % 7) : nil, dedupSeconds: chance(10) ? pick([0, 2, 5]) : nil,
                    idleSeconds: chance(15) ? pick([0, 3, 6]) : nil, claimSeconds: chance(15) ? pick([0, 2, 4]) : nil)
                let memory = engine.apply(patch, now: now)
                #expect(try await store.apply(patch) == memory)
            default:
                if chance(30), let next = engine.nextDeadline, next > now {
                    clock.advance(by: now.seconds(until: next))  // exactly onto a deadline
                } else {
                    clock.advance(by: Double(rng.next() % 3000) / 1000)
                }
            }
            drainChanges()
            operations += 1
        }
    }

    /// Notes what the last memory operation changed, as its notice should tell it.
    mutating func drainChanges() {
        let changed = engine.drainChanges()
        if !changed.isEmpty { expectedChanges.append(changed.compactMap { engine.currentView(id: $0) }) }
    }

    /// Every page of the state, each side following its own cursors.
    mutating func comparePages(limit: Int, now: Timestamp) async throws {
        var memoryCursor: QueueCursor?
        var redisCursor: QueueCursor?
        for _ in 0..<4 {
            let memory = engine.state(limit: limit, after: memoryCursor, now: now)
            drainChanges()
            let redis = try await store.state(limit: limit, after: redisCursor)
            #expect(redis.counts == memory.counts && redis.config == memory.config && redis.more == memory.more)
            for (m, r) in zip(
                memory.holding + memory.waiting + memory.delayed, redis.holding + redis.waiting + redis.delayed)
            {
                compare(.success(m), .success(r), "state")
            }
            #expect(redis.holding.count == memory.holding.count && redis.waiting.count == memory.waiting.count)
            #expect(redis.delayed.count == memory.delayed.count)
            #expect(redis.cursors.count == memory.cursors.count)
            for (m, r) in zip(memory.cursors, redis.cursors) {
                if case .waiting = m { #expect(m == r) }
            }
            guard memory.more, let m = memory.cursors.last, let r = redis.cursors.last else { return }
            memoryCursor = m
            redisCursor = r
        }
    }

    /// Equal answers, fences compared through the pairs seen so far.
    mutating func compare(
        _ memory: Result<VisitorView, QueueError>, _ redis: Result<VisitorView, QueueError>, _ what: String
    ) {
        guard case .success(var m) = memory, case .success(var r) = redis else {
            #expect(memory == redis, "\(what) at operation \(operations)")
            return
        }
        if !ids.contains(m.id) { ids.append(m.id) }
        if let mf = m.fence, let rf = r.fence {
            if let known = fences[mf] {
                #expect(known == rf, "\(what): fence \(mf) was \(known), now \(rf)")
            } else {
                fences[mf] = rf
            }
            m.fence = nil
            r.fence = nil
        }
        #expect(m == r, "\(what) at operation \(operations)")
    }

    /// Fences in the same order on both sides; the same changes told, in the same order.
    func finish() async throws {
        let pairs = fences.sorted { $0.key < $1.key }
        #expect(zip(pairs, pairs.dropFirst()).allSatisfy { $0.value < $1.value })
        #expect(pairs.count > 30)
        try await RedisQueueStoreTests.waitUntil {
            notices.items.count { !$0.changed.isEmpty } >= expectedChanges.count
        }
        try await Task.sleep(for: .milliseconds(50))
        subscriber.stop()
        let told = notices.items.map(\.changed).filter { !$0.isEmpty }
        #expect(told.count == expectedChanges.count)
        for (expected, got) in zip(expectedChanges, told) {
            #expect(expected.map(\.id) == got.map(\.id))
            #expect(expected.map(\.status) == got.map(\.status))
            #expect(expected.map(\.position) == got.map(\.position))
        }
        var waits = WaitHistogram()
        for notice in notices.items { for wait in notice.grantWaits { waits.observe(micros: wait) } }
        #expect(waits == engine.waitHistogram && waits.count > 30)
    }
}
