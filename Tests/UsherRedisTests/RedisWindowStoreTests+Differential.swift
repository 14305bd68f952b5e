import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// The Redis store against the memory window's engine (a `QueueEngine` with
/// the window's config and `.ownOverrides`, driven as `WindowSlot` drives
/// it): the same random operations at the same `ManualClock` times must give
/// the same answers and notices. Fences differ in value, so only their order
/// is compared.
extension RedisWindowStoreTests {
    @Test(arguments: [
        (UInt64(1), DedupMode.key, DedupKeep.first), (2, .adjacent, .latest), (3, .off, .first), (4, .key, .latest),
    ])
    func answersLikeTheMemoryWindow(seed: UInt64, dedup: DedupMode, keep: DedupKeep) async throws {
        let server = try await RedisServer()
        var run = try await WindowDifferentialRun(server: server, seed: seed, dedup: dedup, keep: keep)
        try await run.play(operations: 2000)
        try await run.finish()
        // The run went through every kind of ending (so the comparisons covered them).
        let totals = WindowCounts(run.engine.counts)
        #expect(totals.expiredTotal > 0 && totals.dismissedTotal > 0 && totals.shownTotal > 30)
        #expect(dedup == .off || totals.mergedTotal > 0)
    }
}

struct WindowDifferentialRun {
    let clock = ManualClock(start: RedisWindowStoreTests.start)
    let store: RedisWindowStore
    let notices: Recorder<WindowNotice>
    let subscriber: RedisSubscriber
    var engine: QueueEngine
    var config: WindowConfig
    var rng: SplitMix
    /// Every id either side answered, and some never used.
    var ids: [String] = ["nobody"]
    /// Memory fence -> Redis fence of each showing seen.
    var fences: [Int64: Int64] = [:]
    /// Each operation's changes on the memory side (non-empty ones), as items after it.
    var expectedChanges: [[WindowItem]] = []
    var operations = 0

    init(server: RedisServer, seed: UInt64, dedup: DedupMode, keep: DedupKeep) async throws {
        (notices, subscriber) = try await RedisWindowStoreTests.listen(server)
        rng = SplitMix(state: seed)
        config = WindowConfig(maxWaiting: 5, displaySeconds: 4, dedup: dedup, dedupKeep: keep)
        store = RedisWindowStoreTests.store(server, clock)
        engine = QueueEngine(
            name: "w", config: config.queueConfig, createdAt: clock.now(), holdPolicy: .ownOverrides)
        #expect(try await store.create(config).created)
    }

    mutating func pick<T>(_ options: [T]) -> T { options[Int(rng.next() % UInt64(options.count))] }
    mutating func chance(_ percent: UInt64) -> Bool { rng.next() % 100 < percent }

    func item(_ v: VisitorView) -> WindowItem { WindowItem(v, window: "w") }

    /// The memory side's answer, as `WindowSlot.run` maps it.
    func memory<T>(_ id: String?, _ body: () throws(QueueError) -> T) -> Result<T, WindowError> {
        do throws(QueueError) { return .success(try body()) } catch { return .failure(WindowError(error, item: id)) }
    }

    func redis<T>(_ body: () async throws(WindowError) -> T) async -> Result<T, WindowError> {
        do throws(WindowError) { return .success(try await body()) } catch { return .failure(error) }
    }

    mutating func play(operations count: Int) async throws {
        for _ in 0..<count {
            let roll = rng.next() % 100
            let now = clock.now()
            let id = pick(ids)
            switch roll {
            case 0..<35:
                let r = ShowRequest(
                    id: chance(40) ? "c\(rng.next() % 15)" : nil, key: pick([nil, "k1", "k2", "k3"]),
                    title: chance(50) ? "t" : nil, payload: chance(30) ? .object([("n", .int(7))]) : nil,
                    priority: pick([0, 0, 0, -1, 2]), displaySeconds: pick([nil, nil, nil, 3, 0, 20, 0.001]),
                    delaySeconds: pick([nil, nil, nil, 0, 1.5, 3]))
                let m = memory(r.id) { () throws(QueueError) in
                    item(try engine.enqueue(r.visitorRequest, now: now).view)
                }
                let s = await redis { () async throws(WindowError) in try await store.show(r).item }
                compare(m, s, "show \(r)")
            case 35..<50:
                let target: String? = chance(50) ? nil : id
                let m = memory(target) { () throws(QueueError) -> Dismissal? in
                    let dismissed: VisitorView? =
                        if let target { try engine.remove(id: target, now: now) } else {
                            engine.removeFirstHolder(now: now)
                        }
                    return dismissed.map { Dismissal(dismissed: item($0), showing: engine.firstHolderView.map(item)) }
                }
                let s = await redis { () async throws(WindowError) in try await store.dismiss(id: target) }
                switch m {
                case .success(nil): #expect(s == .failure(.nothingShowing), "dismiss at \(operations)")
                case .success(let d?):
                    guard case .success(let r) = s else {
                        Issue.record("dismiss \(String(describing: target)): \(s) at \(operations)")
                        break
                    }
                    compare(.success(d.dismissed), .success(r.dismissed), "dismissed")
                    #expect((d.showing == nil) == (r.showing == nil), "showing after dismiss at \(operations)")
                    if let ms = d.showing, let rs = r.showing { compare(.success(ms), .success(rs), "showing") }
                case .failure(let error): #expect(s.map(\.dismissed) == .failure(error), "dismiss at \(operations)")
                }
            case 50..<60:
                engine.advance(to: now)
                let m = engine.firstHolderView.map(item)
                let s = try await store.showing()
                #expect((m == nil) == (s == nil), "showing at \(operations)")
                if let m, let s { compare(.success(m), .success(s), "showing") }
            case 60..<68:
                compare(
                    memory(id) { () throws(QueueError) in item(try engine.visitor(id: id, now: now)) },
                    await redis { () async throws(WindowError) in try await store.item(id: id) }, "item \(id)")
            case 68..<74:
                try await comparePages(limit: Int(rng.next() % 4), now: now)
            case 74..<76:
                engine.advance(to: now)
                try await store.tick()
            case 76..<78:
                let patch = WindowPatch(
                    maxWaiting: chance(30) ? Int(rng.next() % 6) : nil,
                    displaySeconds: chance(50) ? pick([2, 4, 0]) : nil,
                    dedup: chance(20) ? pick([.key, .adjacent, .off]) : nil,
                    dedupKeep: chance(10) ? pick(DedupKeep.allCases) : nil)
                _ = engine.apply(patch.queuePatch, now: now)
                config = patch.applied(to: config)
                #expect(try await store.apply(patch) == config)
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
        if !changed.isEmpty { expectedChanges.append(changed.compactMap { engine.currentView(id: $0) }.map(item)) }
    }

    /// Every page of the state, each side following its own cursors.
    mutating func comparePages(limit: Int, now: Timestamp) async throws {
        var memoryCursor: QueueCursor = .waiting(priority: .max, seq: .min)
        var redisCursor: QueueCursor?
        for _ in 0..<4 {
            let m = engine.state(limit: limit, after: memoryCursor, now: now)
            drainChanges()
            let r = try await store.state(limit: limit, after: redisCursor)
            #expect(r.counts == WindowCounts(m.counts) && r.more == m.more && r.config == config)
            #expect(r.queued.count == m.waiting.count, "page at \(operations)")
            for (a, b) in zip(m.waiting.map(item), r.queued) { compare(.success(a), .success(b), "state") }
            #expect(r.cursors == m.cursors.map(\.text))
            let shown = engine.firstHolderView.map(item)
            #expect((shown == nil) == (r.showing == nil))
            if let shown, let s = r.showing { compare(.success(shown), .success(s), "state showing") }
            guard m.more, let mc = m.cursors.last, let rc = r.cursors.last else { return }
            memoryCursor = mc
            redisCursor = QueueCursor(rc)
        }
    }

    /// Equal answers, fences compared through the pairs seen so far.
    mutating func compare(
        _ memory: Result<WindowItem, WindowError>, _ redis: Result<WindowItem, WindowError>, _ what: String
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
    }
}
