import Foundation
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// One pipeline store on a test server, with a `ManualClock`.
struct PipelineRig {
    let server: RedisServer
    let clock: ManualClock
    let store: RedisPipelineStore

    init(server: RedisServer? = nil, name: String = "work", clock: ManualClock = ManualClock()) async throws {
        let server = if let server { server } else { try await RedisServer() }
        self.server = server
        self.clock = clock
        store = RedisPipelineStore(
            keys: ResourceKeys(prefix: "usher:", kind: "pipeline", name: name),
            connections: RedisConnectionPool([server.connection()]), time: .clock(clock),
            channel: "usher:notices", onDeadline: { _ in })
    }

    /// A store for another pipeline on the same server and clock.
    func store(named name: String) -> RedisPipelineStore {
        RedisPipelineStore(
            keys: ResourceKeys(prefix: "usher:", kind: "pipeline", name: name),
            connections: RedisConnectionPool([server.connection()]), time: .clock(clock),
            channel: "usher:notices", onDeadline: { _ in })
    }
}

/// Random operations on `PipelineEngine` and the Redis store, driven by one
/// `ManualClock`: every answer, error and state must be the same. Fences
/// differ by design (Redis's are time-based), so they are matched through a
/// strictly increasing one-to-one map.
@Suite(.serialized, .timeLimit(.minutes(3))) struct RedisPipelineDifferentialTests {
    /// Filters that drop one payload in ten and mark the rest.
    static let config = PipelineConfig(
        capacity: 6, maxInFlight: 3, ackSeconds: 5, maxDeliveries: 2,
        filters: [
            "skip7": PipelineFilter(
                priority: 2, when: .init(field: JSONPointer(tokens: ["n"]), test: .equals(.int(7))), action: .drop),
            "mark": PipelineFilter(action: .set(field: JSONPointer(tokens: ["seen"]), value: .bool(true))),
        ], history: 4, dedupSeconds: 10)

    @Test(arguments: [1, 2, 4]) func theStoreAnswersAsTheMemoryEngineDoes(seed: UInt64) async throws {
        let c = try await Self.run(seed: seed, steps: 500)
        // The run reached the rules that matter.
        #expect(c.filteredTotal > 0 && c.redeliveredTotal > 0 && c.deadTotal > 0 && c.deduplicatedTotal > 0, "\(c)")
        #expect(c.consumedTotal > 0 && c.cancelledTotal > 0 && c.extendedTotal > 0, "\(c)")
    }

    /// More seeds, run by hand: `USHER_PIPELINE_SEEDS=200 swift test --filter manySeeds`.
    @Test(.timeLimit(.minutes(30))) func manySeeds() async throws {
        guard let text = ProcessInfo.processInfo.environment["USHER_PIPELINE_SEEDS"], let seeds = UInt64(text) else {
            return
        }
        for seed in 100..<(100 + seeds) { _ = try await Self.run(seed: seed, steps: 1000) }
    }

    static func run(seed: UInt64, steps: Int) async throws -> PipelineCounts {
        let rig = try await PipelineRig(name: "diff\(seed)")
        var memory = PipelineEngine(config: config, createdAt: rig.clock.now())
        let (_, created) = try await rig.store.create(config)
        #expect(created)
        var random = SplitMix(state: seed)
        var fences = FenceMap()
        var handed: [(id: String, memory: Int64, redis: Int64)] = []
        let ids = ["a", "b", "c", "d", "e", "f", "g", "h"]
        var successes = 0
        func anyID() -> String { random.next(5) == 0 ? "zz" : ids[random.next(ids.count)] }
        func pushRequest() -> PipelinePushRequest {
            PipelinePushRequest(
                id: random.next(4) == 0 ? nil : anyID(),
                payload: .object([("n", .int(random.next(10))), ("x", .double(0.1))]),
                priority: random.next(3) - 1, delaySeconds: [nil, 0, 2, 3][random.next(4)])
        }
        /// A fence pair: mostly the latest hand-out of `id`, sometimes a stale or none.
        func fence(for id: String) -> (memory: Int64?, redis: Int64?) {
            guard random.next(3) > 0, let h = handed.last(where: { $0.id == id }) ?? handed.last else {
                return (nil, nil)
            }
            return (h.memory, h.redis)
        }
        /// An id that was handed out, mostly.
        func takenID() -> String { random.next(4) > 0 ? handed.last.map(\.id) ?? anyID() : anyID() }

        for step in 0..<steps {
            let now = rig.clock.now()
            let what = "seed \(seed) step \(step)"
            switch random.next(16) {
            case 0, 1, 2:
                let r = pushRequest()
                let a = answer { () throws(PipelineError) in try memory.push(r, now: now) }
                let b = await result { () async throws(PipelineError) in try await rig.store.push(r) }
                try fences.same(b, a, what)
                if case .success = a { successes += 1 }
            case 3:
                let rs = (0..<(1 + random.next(3))).map { _ in pushRequest() }
                let a = answer { () throws(PipelineError) in try memory.pushBatch(rs, now: now) }
                let b = await result { () async throws(PipelineError) in try await rig.store.pushBatch(rs) }
                try fences.same(b, a, what)
            case 4, 5, 6:
                let max = 1 + random.next(3)
                let ack: Double? = [nil, 2, 0, 9][random.next(4)]
                let a = answer { () throws(PipelineError) in try memory.take(max: max, ackSeconds: ack, now: now) }
                let b = await result { () async throws(PipelineError) in
                    try await rig.store.take(max: max, ackSeconds: ack)
                }
                try fences.same(b, a, what)
                if case .success(let ma) = a, case .success(let rb) = b {
                    for (m, r) in zip(ma, rb) { handed.append((m.id, m.fence, r.fence)) }
                    if !ma.isEmpty { successes += 1 }
                }
            case 7, 8:
                let id = takenID()
                let f = fence(for: id)
                let a = answer { () throws(PipelineError) in try memory.consume(id, fence: f.memory, now: now) }
                let b = await result { () async throws(PipelineError) in try await rig.store.consume(id, fence: f.redis)
                }
                try fences.same(b, a, what)
            case 9:
                let id = takenID()
                let f = fence(for: id)
                let delay: Double? = [nil, 0, 1][random.next(3)]
                let a = answer { () throws(PipelineError) in
                    try memory.release(id, delaySeconds: delay, fence: f.memory, now: now)
                }
                let b = await result { () async throws(PipelineError) in
                    try await rig.store.release(id, delaySeconds: delay, fence: f.redis)
                }
                try fences.same(b, a, what)
            case 10:
                let id = takenID()
                let f = fence(for: id)
                let ack: Double? = [nil, 1, 4, 0][random.next(4)]
                let a = answer { () throws(PipelineError) in
                    try memory.extend(id, ackSeconds: ack, fence: f.memory, now: now)
                }
                let b = await result { () async throws(PipelineError) in
                    try await rig.store.extend(id, ackSeconds: ack, fence: f.redis)
                }
                try fences.same(b, a, what)
            case 11:
                let id = anyID()
                let a = answer { () throws(PipelineError) in try memory.cancel(id, now: now) }
                let b = await result { () async throws(PipelineError) in try await rig.store.cancel(id) }
                try fences.same(b, a, what)
            case 12:
                if let h = handed.last {
                    let a = memory.undeliver(h.id, fence: h.memory, now: now).map { [$0] } ?? []
                    let b = try await rig.store.undeliver([(h.id, h.redis)])
                    try fences.same(Result<[PipelineItem], PipelineError>.success(b), .success(a), what)
                }
            case 13:
                let a = memory.redrive(now: now)
                let b = try await rig.store.redrive()
                #expect(b.moved == a, "\(what)")
                #expect(b.dead == memory.deadCount, "\(what)")
            case 14:
                let patch = PipelinePatch(
                    capacity: random.next(3) == 0 ? 3 + random.next(6) : nil,
                    maxInFlight: random.next(3) == 0 ? 1 + random.next(3) : nil,
                    maxDeliveries: random.next(4) == 0 ? 1 + random.next(3) : nil,
                    history: random.next(4) == 0 ? random.next(5) : nil,
                    dedupSeconds: random.next(4) == 0 ? [0, 10][random.next(2)] : nil,
                    paused: random.next(5) == 0 ? random.next(3) == 0 : nil)
                memory.apply(patch, now: now)
                let config = try await rig.store.apply(patch)
                #expect(config == memory.config, "\(what)")
            default:
                rig.clock.advance(by: [0.5, 1, 2, 3, 5, 6][random.next(6)])
                if random.next(2) == 0 { try await rig.store.tick() }
            }
            memory.expire(now: rig.clock.now())
            try await compareState(memory: &memory, redis: rig.store, fences: &fences, what)
        }
        #expect(successes > steps / 12)
        return memory.counts
    }

    static func compareState(
        memory: inout PipelineEngine, redis: RedisPipelineStore, fences: inout FenceMap, _ what: String
    ) async throws {
        let s = try await redis.state(limit: 100)
        let page = memory.readyPage(limit: 100, after: nil)
        #expect(s.ready == memory.readyCount, "\(what) ready")
        #expect(s.delayed == memory.delayedCount, "\(what) delayed")
        #expect(s.inFlight == memory.inFlightCount, "\(what) in flight")
        #expect(s.dead == memory.deadCount, "\(what) dead")
        #expect(s.paused == memory.paused, "\(what) paused")
        #expect(s.counts == memory.counts, "\(what) counts")
        #expect(s.cursors == page.cursors, "\(what) cursors")
        #expect(s.more == page.more, "\(what) more")
        try fences.same(
            Result<[PipelineItem], PipelineError>.success(s.items), .success(page.items), "\(what) ready items")
        let dead = try await redis.deadPage(limit: 100, after: nil)
        let memoryDead = memory.deadPage(limit: 100, after: nil)
        #expect(dead.cursors == memoryDead.cursors, "\(what) dead cursors")
        try fences.same(
            Result<[PipelineItem], PipelineError>.success(dead.items), .success(memoryDead.items), "\(what) dead items")
        if s.counts != memory.counts || s.ready != memory.readyCount || s.inFlight != memory.inFlightCount {
            throw FenceMap.Mismatch(description: "\(what): state \(s) vs memory")
        }
    }

    static func answer<T>(_ body: () throws(PipelineError) -> T) -> Result<T, PipelineError> {
        do { return .success(try body()) } catch { return .failure(error) }
    }

    static func result<T>(_ body: () async throws(PipelineError) -> T) async -> Result<T, PipelineError> {
        do { return .success(try await body()) } catch { return .failure(error) }
    }
}

/// Redis fences matched to memory's: one-to-one and in the same order.
struct FenceMap {
    struct Mismatch: Error, CustomStringConvertible {
        var description: String
    }

    private var map: [Int64: Int64] = [:]

    mutating func fence(_ r: Int64?, as m: Int64?) throws -> Int64? {
        guard let r, let m else { return r }
        if let known = map[r] { return known }
        for (r2, m2) in map where (r < r2) != (m < m2) || m == m2 {
            throw Mismatch(description: "fence \(r) ↔ \(m) breaks the order of \(r2) ↔ \(m2)")
        }
        map[r] = m
        return m
    }

    /// The fields a client sees, fences translated.
    mutating func view(_ r: PipelineItem, as m: PipelineItem?) throws -> String {
        let fence = try self.fence(r.fence, as: m?.fence)
        return
            "\(r.id) \(r.payload) p\(r.priority) \(r.status) d\(r.deliveries) \(r.createdAt.micros) \(r.availableAt.micros) "
            + "\(r.takenAt?.micros ?? -1) \(r.ackDeadline?.micros ?? -1) f\(fence ?? -1) \(r.deadAt?.micros ?? -1)"
    }

    mutating func view(_ r: PipelineDelivery, as m: PipelineDelivery?) throws -> String {
        let fence = try self.fence(r.fence, as: m?.fence)
        return
            "\(r.id) \(r.payload) p\(r.priority) d\(r.deliveries) \(r.takenAt.micros) \(r.ackDeadline?.micros ?? -1) f\(fence ?? -1)"
    }

    mutating func views(_ r: Any, as m: Any) throws -> [String] {
        switch (r, m) {
        case (let r as PipelineItem, let m as PipelineItem): return [try view(r, as: m)]
        case (let r as PipelinePushResult, let m as PipelinePushResult):
            return [try view(r.item, as: m.item) + " @\(r.position ?? -1) \(r.created)"]
        case (let r as [PipelinePushResult], let m as [PipelinePushResult]):
            return try zip(r, m).map { try views($0, as: $1)[0] } + ["n\(r.count)"]
        case (let r as [PipelineItem], let m as [PipelineItem]):
            return try zip(r, m).map { try view($0, as: $1) } + ["n\(r.count)"]
        case (let r as [PipelineDelivery], let m as [PipelineDelivery]):
            return try zip(r, m).map { try view($0, as: $1) } + ["n\(r.count)"]
        default: return ["\(r)"]
        }
    }

    mutating func same<T>(_ r: Result<T, PipelineError>, _ m: Result<T, PipelineError>, _ what: String) throws {
        switch (r, m) {
        case (.success(let rv), .success(let mv)):
            let rs = try views(rv, as: mv)
            var identity = FenceMap()
            let ms = try identity.views(mv, as: mv)
            #expect(rs == ms, "\(what)")
            if rs != ms { throw Mismatch(description: "\(what): \(rs) vs \(ms)") }
        case (.failure(let re), .failure(let me)):
            #expect(re == me, "\(what)")
            if re != me { throw Mismatch(description: "\(what): \(re) vs \(me)") }
        default:
            Issue.record("\(what): \(r) vs \(m)")
            throw Mismatch(description: "\(what): \(r) vs \(m)")
        }
    }
}
