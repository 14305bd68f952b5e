import Foundation
import Locking
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// `queue.lua` and `RedisQueueStore` against a real redis-server: the memory
/// engine's rules, Redis specifics, and a differential run against `QueueEngine`.
@Suite(.serialized, .timeLimit(.minutes(3))) struct RedisQueueStoreTests {
    static let start = Timestamp(micros: 1_767_225_600_000_000)

    /// A store on `server` for queue `name`, its time from `clock`.
    static func store(
        _ server: RedisServer, _ clock: ManualClock, name: String = "q", connection: RedisConnection? = nil,
        deadlines: Recorder<Timestamp?>? = nil
    ) -> RedisQueueStore {
        RedisQueueStore(
            keys: ResourceKeys(prefix: "usher:", kind: "queue", name: name),
            connections: RedisConnectionPool([connection ?? server.connection()]),
            time: .clock(clock), channel: "usher:notices", onDeadline: { next in deadlines?.append(next) })
    }

    @Test func grantsInPriorityThenArrivalOrderAndPassesSlotsOn() async throws {
        let server = try await RedisServer()
        let clock = ManualClock(start: Self.start)
        let q = Self.store(server, clock)
        #expect(try await q.create(QueueConfig(capacity: 1)).created)
        #expect(try await q.create(QueueConfig(capacity: 5)) == (QueueConfig(capacity: 1), false))
        let a = try await q.enqueue(VisitorRequest(id: "a")).view
        #expect(a.status == .granted && a.fence == Self.start.micros)
        #expect(a.expiresAt == Timestamp(micros: Self.start.micros + 30_000_000))
        let b = try await q.enqueue(VisitorRequest(id: "b")).view
        let c = try await q.enqueue(VisitorRequest(id: "c", priority: 5)).view
        #expect(b.status == .waiting && b.position == 1 && b.estimatedWaitSeconds == 30)
        #expect(c.position == 1)
        #expect(try await q.visitor(id: "b").position == 2)
        clock.advance(by: 2)
        let done = try await q.complete(id: "a")
        #expect(done.status == .completed && done.finishedAt == clock.now())
        let next = try await q.visitor(id: "c")
        // Redis fences are max(last + 1, now µs).
        #expect(next.status == .granted && next.fence == Self.start.micros + 2_000_000)
        // c's expiry now drives the estimate of the one behind.
        #expect(try await q.visitor(id: "b").estimatedWaitSeconds == 30)
        await #expect(throws: QueueError.notGranted(current: .waiting)) { try await q.complete(id: "b") }
        await #expect(throws: QueueError.notFound("visitor \"zz\"")) { try await q.complete(id: "zz") }
        let counts = try await q.counts()
        #expect(counts.counts.waiting == 1 && counts.counts.holding == 1 && counts.counts.completedTotal == 1)
        #expect(counts.oldestWaitingSince == Self.start)
    }

    @Test func refusesWhatTheEngineRefusesWithTheSameErrors() async throws {
        let server = try await RedisServer()
        let clock = ManualClock(start: Self.start)
        let q = Self.store(server, clock)
        let config = QueueConfig(capacity: 1, maxWaiting: 1, holdSeconds: 10)
        _ = try await q.create(config)
        var engine = QueueEngine(name: "q", config: config, createdAt: clock.now())
        let requests = [
            VisitorRequest(id: "bad id"), VisitorRequest(key: ""), VisitorRequest(priority: 2_000_000),
            VisitorRequest(delaySeconds: 0.001), VisitorRequest(holdSeconds: -1), VisitorRequest(holdSeconds: 11),
            VisitorRequest(holdSeconds: 0), VisitorRequest(id: "a"), VisitorRequest(id: "b"), VisitorRequest(id: "c"),
        ]
        for r in requests {
            let memory = outcome { () throws(QueueError) in try engine.enqueue(r, now: clock.now()).view }
            let redis = await awaitedOutcome { () async throws(QueueError) in try await q.enqueue(r).view }
            #expect(memory == redis, "\(r)")
        }
        await #expect(throws: QueueError.full(retryAfterSeconds: 10)) { try await q.enqueue(VisitorRequest(id: "d")) }
        await #expect(
            throws: QueueError.invalid(field: "hold_seconds", message: "must be at most 10, the queue's hold_seconds")
        ) {
            try await q.extend(id: "a", holdSeconds: 20)
        }
        // An existing id answers the visitor, whatever else the request says.
        let again = try await q.enqueue(VisitorRequest(id: "a", priority: 9_000_000))
        #expect(again.created == false && again.view.id == "a")
    }

    @Test func payloadsRoundTripExactly() async throws {
        let server = try await RedisServer()
        let q = Self.store(server, ManualClock(start: Self.start))
        _ = try await q.create(QueueConfig())
        let text = #"{"big":9223372036854775807,"tenth":0.1,"huge":1e+19,"s":"a/\"b\"\u00e9","l":[null,true,{}]}"#
        let payload = try JSONValue.parse(text)
        let v = try await q.enqueue(VisitorRequest(payload: payload)).view
        #expect(v.payload == payload)
        #expect(try await q.visitor(id: v.id).payload == payload)
        #expect(v.id == IDGenerator.format(Self.start.micros + 1))
    }

    @Test func delaysExpiriesExtendsAndTicks() async throws {
        let server = try await RedisServer()
        let clock = ManualClock(start: Self.start)
        let deadlines = Recorder<Timestamp?>()
        let q = Self.store(server, clock, deadlines: deadlines)
        _ = try await q.create(QueueConfig(capacity: 1, holdSeconds: 10))
        _ = try await q.enqueue(VisitorRequest(id: "h", holdSeconds: 4))
        let d = try await q.enqueue(VisitorRequest(id: "d", delaySeconds: 2)).view
        #expect(d.status == .delayed)
        #expect(deadlines.items.last == Timestamp(micros: Self.start.micros + 2_000_000))
        clock.advance(by: 3)
        try await q.tick()
        try await q.tick()
        #expect(try await q.visitor(id: "d").status == .waiting)
        _ = try await q.extend(id: "h", holdSeconds: 5)  // until start + 8
        clock.advance(by: 4.5)
        #expect(try await q.visitor(id: "h").status == .granted)
        clock.advance(by: 1)
        try await q.tick()
        let h = try await q.visitor(id: "h")
        #expect(h.status == .expired && h.finishedAt == Timestamp(micros: Self.start.micros + 8_000_000))
        #expect(try await q.visitor(id: "d").grantedAt == clock.now())
        let counts = try await q.counts().counts
        #expect(counts.expiredTotal == 1 && counts.grantedTotal == 2 && counts.enqueuedTotal == 2)
    }

    @Test func fencesNeverGoBackwardsWhenTheClockDoes() async throws {
        let server = try await RedisServer()
        let late = Self.store(server, ManualClock(start: Timestamp(micros: Self.start.micros + 10_000_000)))
        let early = Self.store(server, ManualClock(start: Self.start))
        _ = try await late.create(QueueConfig(capacity: 5))
        let first = try await late.enqueue(VisitorRequest()).view
        let second = try await early.enqueue(VisitorRequest()).view
        #expect(try #require(second.fence) > #require(first.fence))
        #expect(second.id > first.id)
    }

    @Test func noticesTellEveryChangeAndConfigUpdate() async throws {
        let server = try await RedisServer()
        let clock = ManualClock(start: Self.start)
        let notices = Recorder<QueueNotice>()
        let subscriber = try RedisSubscriber(
            endpoint: server.endpoint, connectTimeoutSeconds: 1, channels: ["usher:notices"]
        ) { event in
            if case .message(_, let payload) = event, let n = RedisQueueStore.decodeNotice(payload) {
                notices.append(n)
            }
        }
        defer { subscriber.stop() }
        try await Self.waitUntil { await Self.subscribers(server) == 1 }
        let q = Self.store(server, clock)
        _ = try await q.create(QueueConfig(capacity: 1))
        _ = try await q.enqueue(VisitorRequest(id: "a"))
        _ = try await q.enqueue(VisitorRequest(id: "b"))
        _ = try await q.complete(id: "a")
        _ = try await q.apply(QueuePatch(capacity: 3, dedup: .key))
        #expect(try await q.delete())
        #expect(try await q.delete() == false)
        try await Self.waitUntil { notices.items.count == 6 }
        let got = notices.items
        #expect(got.map { $0.changed.map(\.id) } == [["a"], ["b"], ["a", "b"], [], ["b"], []])
        #expect(got[1].changed[0].status == .waiting && got[1].changed[0].enqueuedAt == got[1].time)
        #expect(got[2].changed.map(\.status) == [.completed, .granted])
        // b was granted with nobody waiting on it: its claim deadline comes first.
        #expect(got[2].next == Timestamp(micros: Self.start.micros + 10_000_000))
        #expect(got[0].grantWaits == [0] && got[1].grantWaits.isEmpty && got[2].grantWaits == [0])
        #expect(got[3].updated?.fields.map(\.field) == ["capacity", "dedup"])
        // The deletion ends the holder first, and says so.
        #expect(got[4].changed.map(\.status) == [.released] && got[4].changed[0].reason == "deleted")
        #expect(got[5].deleted && got[5].name == "q")
        await #expect(throws: QueueError.gone) { try await q.visitor(id: "a") }
    }

    @Test func aTickAppliesWhatIsDueOnceAndThenFindsNothing() async throws {
        let server = try await RedisServer()
        let clock = ManualClock(start: Self.start)
        let notices = Recorder<QueueNotice>()
        let subscriber = try RedisSubscriber(
            endpoint: server.endpoint, connectTimeoutSeconds: 1, channels: ["usher:notices"]
        ) { event in
            if case .message(_, let payload) = event, let n = RedisQueueStore.decodeNotice(payload) {
                notices.append(n)
            }
        }
        defer { subscriber.stop() }
        try await Self.waitUntil { await Self.subscribers(server) == 1 }
        let deadlines = Recorder<Timestamp?>()
        let q = Self.store(server, clock, deadlines: deadlines)
        _ = try await q.create(QueueConfig(capacity: 1, holdSeconds: 5))
        _ = try await q.enqueue(VisitorRequest(id: "a"))
        clock.advance(by: 1)
        _ = try await q.enqueue(VisitorRequest(id: "b"))
        clock.advance(by: 10)
        try await q.tick()
        try await q.tick()
        try await Self.waitUntil { notices.items.count == 3 }
        try await Task.sleep(for: .milliseconds(50))
        let tick = notices.items[2]
        #expect(notices.items.count == 3)
        #expect(tick.changed.map(\.id) == ["a", "b"])
        #expect(tick.changed.map(\.status) == [.expired, .granted] && tick.grantWaits == [10_000_000])
        #expect(tick.next == Timestamp(micros: Self.start.micros + 16_000_000))
        #expect(deadlines.items.suffix(2) == [tick.next, tick.next])
    }

    @Test func everyKeySharesOneSlotAndDeleteRemovesThemAll() async throws {
        let server = try await RedisServer()
        let connection = server.connection()
        let clock = ManualClock(start: Self.start)
        let q = Self.store(server, clock, connection: connection)
        _ = try await q.create(QueueConfig(capacity: 1, history: 1))
        _ = try await q.enqueue(VisitorRequest(key: "k", action: "like"))
        _ = try await q.enqueue(VisitorRequest(key: "k", action: "like", payload: .int(1)))
        _ = try await q.enqueue(VisitorRequest(key: "k", action: "set"))
        _ = try await q.enqueue(VisitorRequest(delaySeconds: 5))
        _ = try await q.remove(id: IDGenerator.format(Self.start.micros + 1))
        let keys = try await connection.command(["KEYS", "*"]).array?.compactMap(\.string) ?? []
        #expect(keys.count >= 9)
        // A standalone server refuses CLUSTER KEYSLOT: compute Redis Cluster's slot here.
        #expect(Self.slot("foo") == 12182 && Self.slot("a{foo}b") == 12182)
        #expect(Set(keys.map(Self.slot)).count == 1)
        #expect(keys.allSatisfy { $0.hasPrefix("usher:{queue:q}:") })
        #expect(try await q.delete())
        #expect(try await connection.command(["DBSIZE"]).int == 0)
    }

    /// Four "instances" (own connections, Redis time) on one queue at once:
    /// never more holders than slots, fences in grant order, totals balanced.
    @Test func instancesSharingAQueueKeepItsRules() async throws {
        let server = try await RedisServer()
        let keys = ResourceKeys(prefix: "usher:", kind: "queue", name: "shared")
        func instance() -> RedisQueueStore {
            // Longer timeouts than the test server's: four workers on a loaded two-core machine.
            let connection = RedisConnection(
                endpoint: server.endpoint, connectTimeoutSeconds: 5, commandTimeoutSeconds: 20)
            return RedisQueueStore(
                keys: keys, connections: RedisConnectionPool([connection]), time: .server, channel: "usher:notices",
                onDeadline: { _ in })
        }
        _ = try await instance().create(QueueConfig(capacity: 3, holdSeconds: 5))
        let fences = Recorder<Int64>()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<4 {
                let q = instance()
                group.addTask {
                    for i in 0..<100 {
                        let v = try await q.enqueue(VisitorRequest(id: "w\(worker)-\(i)", key: "k\(i % 7)")).view
                        if v.status == .granted, let fence = v.fence { fences.append(fence) }
                        let state = try await q.state(limit: 10)
                        #expect(state.holding.count <= 3)
                        let fenceOrder = state.holding.compactMap(\.fence)
                        #expect(fenceOrder == fenceOrder.sorted())
                        for holder in state.holding.prefix(1) { _ = try? await q.complete(id: holder.id) }
                    }
                }
            }
            try await group.waitForAll()
        }
        let c = try await instance().counts().counts
        #expect(c.holding <= 3 && c.grantedTotal >= fences.items.count)
        #expect(
            c.enqueuedTotal
                == c.waiting + c.holding + c.delayed + c.completedTotal + c.releasedTotal + c.expiredTotal
                + c.cancelledTotal + c.mergedTotal)
        #expect(Set(fences.items).count == fences.items.count)
    }

    @Test func aStoppedServerIsUnavailable() async throws {
        let server = try await RedisServer()
        let q = Self.store(server, ManualClock(start: Self.start))
        _ = try await q.create(QueueConfig())
        server.stop()
        await #expect {
            try await q.enqueue(VisitorRequest())
        } throws: { error in
            if case .backendUnavailable = error as? QueueError { return true }
            return false
        }
    }

    /// Redis Cluster's hash slot of `key`: CRC16/XMODEM of its hash tag (or of it all) mod 16384.
    static func slot(_ key: String) -> Int {
        var bytes = Array(key.utf8)
        if let open = bytes.firstIndex(of: UInt8(ascii: "{")),
            let close = bytes[(open + 1)...].firstIndex(of: UInt8(ascii: "}")), close > open + 1
        {
            bytes = Array(bytes[(open + 1)..<close])
        }
        var crc: UInt16 = 0
        for byte in bytes {
            crc ^= UInt16(byte) << 8
            for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        }
        return Int(crc) % 16384
    }

    static func subscribers(_ server: RedisServer) async -> Int64 {
        let reply = try? await server.connection().command(["PUBSUB", "NUMSUB", "usher:notices"])
        return reply?.array?.last?.int ?? 0
    }

    static func waitUntil(_ condition: () async -> Bool) async throws {
        for _ in 0..<500 {
            if await condition() { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("timed out")
    }
}

/// `body`'s value or error, for comparing answers.
func outcome<T>(_ body: () throws(QueueError) -> T) -> Result<T, QueueError> {
    do { return .success(try body()) } catch { return .failure(error) }
}

/// `body`'s value or error, for comparing answers.
func awaitedOutcome<T>(_ body: () async throws(QueueError) -> T) async -> Result<T, QueueError> {
    do { return .success(try await body()) } catch { return .failure(error) }
}

/// Values appended from any thread, read in order.
final class Recorder<T: Sendable>: Sendable {
    private let list = Locked<[T]>([])
    func append(_ item: T) { list.withLock { $0.append(item) } }
    var items: [T] { list.withLock { $0 } }
}
