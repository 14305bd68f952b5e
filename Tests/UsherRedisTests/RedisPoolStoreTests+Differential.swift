import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// The Redis pool store against the memory pool (`LeasePool`): the same
/// random operations at the same `ManualClock` times must give the same
/// answers. Fences are matched through a one-to-one map that keeps their order.
extension RedisPoolStoreTests {
    @Test(arguments: [UInt64(1), 2, 3])
    func answersLikeTheMemoryPool(seed: UInt64) async throws {
        var run = try await PoolDifferentialRun(seed: seed)
        try await run.play(operations: 1500)
        try run.checkFenceOrder()
        let counts = try await run.store.state(limit: 0).counts
        // The run went through every kind of ending, and grew.
        #expect(counts.expiredTotal > 0 && counts.recycledTotal > 0 && counts.revokedTotal > 0)
        #expect(counts.grownTotal > 0, "grown")
        #expect(run.withdrawn > 0, "withdrawn")
        #expect(run.waitedAndGranted > 0, "waited and granted")
        #expect(run.undelivered > 0, "undelivered")
    }
}

/// Synchronous steps on the memory pool, as `LeasePool.fetch(_:until:)`
/// takes them before and after its wait.
extension LeasePool {
    /// A fetch with a wait, up to where it parks: the lease (waiting, or active).
    func fetchEnteringLine(_ r: FetchRequest) throws(PoolError) -> Lease {
        try checkLease(r.leaseSeconds)
        try run(nil) { (e, now) in e.advance(to: now) }
        if let given = r.id, let known = engine.noteRetry(id: given) { return lease(known) }
        try grow(forWaiters: 1)
        let v = try run(nil) { (e, now) throws(QueueError) in try e.enqueue(r.visitorRequest, now: now).view }
        return leaseNow(v.id)
    }

    /// The wait ended: the lease it was given, or `exhausted` (out of the line, or not there).
    func withdrawFetch(_ id: String) throws(PoolError) -> Lease {
        do throws(PoolError) {
            guard try run(id, { (e, now) throws(QueueError) in try e.withdraw(id: id, now: now) }) != nil else {
                throw exhausted()
            }
        } catch .notFound { throw exhausted() }
        return leaseNow(id)
    }
}

struct PoolDifferentialRun {
    let clock = ManualClock()
    let server: RedisServer
    let store: RedisPoolStore
    let memory: LeasePool
    var rng: SplitMix
    var leaseIDs: [String] = ["nobody"]
    var elementIDs: [String] = ["e0", "e1", "e2", "nowhere"]
    /// Redis fence -> memory fence of every lease seen.
    var fences: [Int64: Int64] = [:]
    var withdrawn = 0
    /// Leases recycled `undelivered` (the others were retried, ended, or the fence was wrong).
    var undelivered = 0
    /// Fetches that entered the line, to withdraw most often.
    var waitingIDs: [String] = []
    var waitedAndGranted = 0

    init(seed: UInt64) async throws {
        server = try await RedisServer()
        rng = SplitMix(state: seed)
        let config = PoolConfig(
            elements: [
                PoolElementSpec(id: "e0", data: .object([("k", .double(0.1))])), PoolElementSpec(id: "e1"),
                PoolElementSpec(id: "e2", data: .string("x")),
            ], leaseSeconds: 10, maxWaiting: 3, grow: PoolGrow(maxSize: 5, prefix: "g"))
        memory = LeasePool(name: "diff", config: config, clock: clock)
        store = RedisPoolStore(
            keys: ResourceKeys(prefix: "usher:", kind: "pool", name: "diff"),
            connections: RedisConnectionPool([server.connection()]), time: .clock(clock),
            channel: "usher:notices", onDeadline: { _ in })
        let (made, created) = try await store.create(config)
        #expect(created && made == config)
    }

    mutating func pick<T>(_ list: [T]) -> T { list[Int(rng.next() % UInt64(list.count))] }
    mutating func chance(_ n: UInt64) -> Bool { rng.next() % n == 0 }

    func mem<T: Sendable>(_ body: (isolated LeasePool) throws(PoolError) -> T) -> Result<T, PoolError> {
        do throws(PoolError) { return .success(try memory.withIsolation(body)) } catch { return .failure(error) }
    }

    static func redis<T>(_ body: () async throws(PoolError) -> T) async -> Result<T, PoolError> {
        do throws(PoolError) { return .success(try await body()) } catch { return .failure(error) }
    }

    mutating func play(operations: Int) async throws {
        for step in 0..<operations {
            let holder: String? = pick([nil, "ann", "bob", "cy"])
            let leaseID: String = chance(3) ? "l\(step)" : pick(leaseIDs)
            let element: String = chance(8) ? "x\(step % 7)" : pick(elementIDs)
            let seconds: Double? = pick([nil, nil, 2, 5, 0, 11, 0.5])
            let label: String
            switch rng.next() % 15 {
            case 0, 1, 2:
                label = "fetch \(leaseID)"
                let r = FetchRequest(id: leaseID, holder: holder, leaseSeconds: seconds)
                try same(
                    mem { p throws(PoolError) in try p.fetch(r) },
                    await Self.redis { () async throws(PoolError) in try await store.fetch(r) }, label, step)
            case 3, 4:
                label = "fetch waiting \(leaseID)"
                let r = FetchRequest(id: leaseID, holder: holder, leaseSeconds: seconds)
                let a = mem { p throws(PoolError) in try p.fetchEnteringLine(r) }
                if case .success(let l) = a, l.status == .waiting { waitingIDs.append(leaseID) }
                try same(
                    a,
                    await Self.redis { () async throws(PoolError) in try await store.fetch(r, waiting: true) }, label,
                    step)
            case 5:
                let leaseID = !waitingIDs.isEmpty && !chance(4) ? waitingIDs.removeLast() : leaseID
                label = "withdraw \(leaseID)"
                let a = mem { p throws(PoolError) in try p.withdrawFetch(leaseID) }
                let b = await Self.redis { () async throws(PoolError) in try await store.withdraw(id: leaseID) }
                switch a {
                case .failure(.exhausted): withdrawn += 1
                case .success(let l) where l.status == .active: waitedAndGranted += 1
                default: break
                }
                try same(a, b, label, step)
            case 6, 7:
                label = "recycle \(leaseID)"
                try same(
                    mem { p throws(PoolError) in try p.recycle(lease: leaseID) },
                    await Self.redis { () async throws(PoolError) in try await store.recycle(lease: leaseID) }, label,
                    step)
            case 8:
                label = "recycle element \(element)"
                try same(
                    mem { p throws(PoolError) in try p.recycle(element: element) },
                    await Self.redis { () async throws(PoolError) in try await store.recycle(element: element) }, label,
                    step)
            case 9:
                label = "extend \(leaseID)"
                try same(
                    mem { p throws(PoolError) in try p.extend(lease: leaseID, leaseSeconds: seconds) },
                    await Self.redis { () async throws(PoolError) in
                        try await store.extend(lease: leaseID, leaseSeconds: seconds)
                    }, label, step)
            case 10:
                label = "put element \(element)"
                let data: JSONValue? = pick([nil, .int(step), .string("d")])
                let a = mem { p throws(PoolError) in try p.putElement(element, data: data) }
                let b = await Self.redis { () async throws(PoolError) in try await store.putElement(element, data: data)
                }
                try same(a.map(\.element), b.map(\.element), label, step)
                #expect(a.map(\.created) == b.map(\.created), "\(label) at \(step)")
                if !elementIDs.contains(element) { elementIDs.append(element) }
            case 11:
                label = "remove element \(element)"
                let force = chance(2)
                try same(
                    mem { p throws(PoolError) in try p.removeElement(element, force: force) },
                    await Self.redis { () async throws(PoolError) in
                        try await store.removeElement(element, force: force)
                    }, label, step)
            case 12:
                label = "patch"
                let patch = PoolPatch(
                    leaseSeconds: pick([nil, 10, 4]), maxWaiting: pick([nil, 3, 1]),
                    grow: pick([nil, PoolGrow(maxSize: 5, prefix: "g"), PoolGrow(maxSize: 7, prefix: "g")]))
                try same(
                    mem { p throws(PoolError) in try p.apply(patch) },
                    await Self.redis { () async throws(PoolError) in try await store.apply(patch) }, label, step)
            case 13:
                // Mostly an active lease: most picks would find none to undo.
                let active =
                    (try? mem { p throws(PoolError) in try p.state(limit: 100) }.get())?.elements
                    .compactMap { $0.lease?.status == .active ? $0.lease?.id : nil } ?? []
                let leaseID = active.isEmpty || chance(4) ? leaseID : pick(active)
                label = "undelivered \(leaseID)"
                let memoryFence = memory.withIsolation { $0.engine.currentView(id: leaseID)?.fence }
                let redisFence = fences.first { $0.value == memoryFence }?.key
                let wrong: Int64 = chance(4) ? 1 : 0
                let a = mem { p throws(PoolError) in
                    try p.recycleUndelivered(lease: leaseID, fence: (memoryFence ?? 0) + wrong)
                }
                if case .success(_?) = a { undelivered += 1 }
                try same(
                    a,
                    await Self.redis { () async throws(PoolError) in
                        try await store.recycleUndelivered(lease: leaseID, fence: (redisFence ?? 0) + wrong)
                    }, label, step)
            default:
                label = "advance"
                if chance(2), let next = memory.withIsolation({ $0.engine.nextDeadline }) {
                    try await advance(to: next)  // exactly onto a deadline
                } else {
                    try await advance(to: clock.now().adding(seconds: pick([0.3, 1, 2.5, 6])))
                }
            }
            if !leaseIDs.contains(leaseID) { leaseIDs.append(leaseID) }
            do {  // the state after every operation
                let limit = pick([0, 2, 100])
                let a = mem { p throws(PoolError) in try p.state(limit: limit) }
                let b = await Self.redis { () async throws(PoolError) in try await store.state(limit: limit) }
                try same(a, b, "state after \(label)", step)
                if case .success(let s) = a, s.more, let cursor = s.cursors.last.flatMap(LeasePool.elementCursor) {
                    let a2 = mem { p throws(PoolError) in try p.state(limit: limit, after: cursor) }
                    let b2 = await Self.redis { () async throws(PoolError) in
                        try await store.state(limit: limit, after: cursor)
                    }
                    try same(a2, b2, "page after \(label)", step)
                }
            }
            if step % 7 == 0 {
                let a = mem { p throws(PoolError) in try p.lease(id: leaseID) }
                let b = await Self.redis { () async throws(PoolError) in try await store.lease(id: leaseID) }
                try same(a, b, "lease after \(label)", step)
            }
        }
    }

    /// Moves the clock to `target`; at each deadline on the way the memory
    /// pool's timer fires, and the Redis store ticks as its manager's timer would.
    func advance(to target: Timestamp) async throws {
        while let next = memory.withIsolation({ $0.engine.nextDeadline }), next > clock.now(), next <= target {
            clock.advance(by: clock.now().seconds(until: next))
            try await store.tick()
        }
        if target > clock.now() { clock.advance(by: clock.now().seconds(until: target)) }
    }

    // MARK: - Comparing

    mutating func same<T: Equatable & FencedValue>(
        _ a: Result<T, PoolError>, _ b: Result<T, PoolError>, _ label: String, _ step: Int
    ) throws {
        switch (a, b) {
        case (.success(let m), .success(var r)):
            let (ml, rl) = (m.leases, r.leases)
            if ml.count == rl.count {
                for (x, y) in zip(ml, rl) where x.id == y.id {
                    guard let mf = x.fence, let rf = y.fence else { continue }
                    #expect(fences[rf] == nil || fences[rf] == mf, "fence \(rf) of \(y.id) at step \(step)")
                    fences[rf] = mf
                }
            }
            let known = fences
            r.mapFences { known[$0] ?? $0 }
            #expect(m == r, "\(label) at step \(step)")
            if m != r { throw Mismatch() }
        case (.failure(let m), .failure(let r)):
            #expect(m == r, "\(label) at step \(step)")
            if m != r { throw Mismatch() }
        default:
            #expect(Bool(false), "\(label) at step \(step): memory \(a), redis \(b)")
            throw Mismatch()
        }
    }

    struct Mismatch: Error {}

    /// Every fence pair keeps its order.
    func checkFenceOrder() throws {
        let pairs = fences.sorted { $0.key < $1.key }
        for (x, y) in zip(pairs, pairs.dropFirst()) { #expect(x.value < y.value) }
        #expect(pairs.count > 10)
    }
}

/// A value holding leases, whose fences the comparison maps.
protocol FencedValue {
    var leases: [Lease] { get }
    mutating func mapFences(_ map: (Int64) -> Int64)
}

extension Lease: FencedValue {
    var leases: [Lease] { [self] }
    mutating func mapFences(_ map: (Int64) -> Int64) { fence = fence.map(map) }
}

extension Optional: FencedValue where Wrapped: FencedValue {
    var leases: [Lease] { self?.leases ?? [] }
    mutating func mapFences(_ map: (Int64) -> Int64) { self?.mapFences(map) }
}

extension Array: FencedValue where Element: FencedValue {
    var leases: [Lease] { flatMap(\.leases) }
    mutating func mapFences(_ map: (Int64) -> Int64) { for i in indices { self[i].mapFences(map) } }
}

extension PoolElement: FencedValue {
    var leases: [Lease] { lease.leases }
    mutating func mapFences(_ map: (Int64) -> Int64) { lease.mapFences(map) }
}

extension ElementRemoval: FencedValue {
    var leases: [Lease] { element.leases + endedLease.leases }
    mutating func mapFences(_ map: (Int64) -> Int64) {
        element.mapFences(map)
        endedLease.mapFences(map)
    }
}

extension PoolState: FencedValue {
    var leases: [Lease] { elements.leases + waitingLeases.leases }
    mutating func mapFences(_ map: (Int64) -> Int64) {
        elements.mapFences(map)
        waitingLeases.mapFences(map)
    }
}

extension PoolConfig: FencedValue {
    var leases: [Lease] { [] }
    mutating func mapFences(_ map: (Int64) -> Int64) {}
}
