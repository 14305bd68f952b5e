import Foundation
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// One pool store on a test server, with a `ManualClock`.
struct PoolRig {
    let server: RedisServer
    let clock: ManualClock
    let store: RedisPoolStore

    static let channel = "usher:notices"

    init(server: RedisServer? = nil, name: String = "gpus", clock: ManualClock = ManualClock()) async throws {
        let server = if let server { server } else { try await RedisServer() }
        self.server = server
        self.clock = clock
        store = RedisPoolStore(
            keys: ResourceKeys(prefix: "usher:", kind: "pool", name: name),
            connections: RedisConnectionPool([server.connection()]), time: .clock(clock), channel: Self.channel,
            onDeadline: { _ in })
    }

    /// A pool of `config`, created now.
    func created(_ config: PoolConfig) async throws -> PoolConfig {
        let (made, created) = try await store.create(config)
        #expect(created)
        return made
    }

    static func elements(_ n: Int, _ prefix: String = "e") -> [PoolElementSpec] {
        (0..<n).map { PoolElementSpec(id: "\(prefix)\($0)") }
    }
}

/// `RedisPoolStore` and `pool.lua` against a real redis-server, with
/// `LeasePool`'s rules (UsherCoreTests' Pool* tests) as the spec.
@Suite(.serialized, .timeLimit(.minutes(2))) struct RedisPoolStoreTests {
    // MARK: - Create and config

    @Test func createKeepsTheConfigAndAnswersTheExistingPool() async throws {
        let rig = try await PoolRig()
        let data: JSONValue = .object([("big", .int(12_345_678_901_234_567)), ("tenth", .double(0.1))])
        let config = PoolConfig(
            elements: [PoolElementSpec(id: "a", data: data), PoolElementSpec(id: "b")], leaseSeconds: 30,
            maxWaiting: 7, grow: PoolGrow(maxSize: 5, prefix: "g-"))
        #expect(try await rig.created(config) == config)
        let (again, created) = try await rig.store.create(PoolConfig())
        #expect(!created && again == config)
        let state = try await rig.store.state(limit: 10)
        #expect(state.size == 2 && state.available == 2 && state.leased == 0 && state.waiting == 0)
        #expect(state.elements.map(\.id) == ["a", "b"])
        #expect(state.elements[0].data == data && state.elements[1].data == nil)
        #expect(state.nextExpiryAt == nil && state.config == config)
    }

    @Test func payloadNumbersRoundTripExactly() async throws {
        let rig = try await PoolRig()
        _ = try await rig.created(PoolConfig())
        let text = #"{"big":9223372036854775807,"tenth":0.1,"huge":1e+19,"s":"a/\"b\"\u00e9","l":[null,true,{}]}"#
        let data = try JSONValue.parse(text)
        let (element, created) = try await rig.store.putElement("a", data: data)
        #expect(created && element.data == data)
        let lease = try await rig.store.fetch(FetchRequest(id: "l1"))
        #expect(lease.elementData == data)
        #expect(try await rig.store.state(limit: 1).elements.first?.data == data)
    }

    // MARK: - Fetch, recycle, extend

    @Test func fetchTakesTheLeastRecentlyFreedElementAndCountsHolderChanges() async throws {
        let rig = try await PoolRig()
        _ = try await rig.created(PoolConfig(elements: PoolRig.elements(3), leaseSeconds: 10))
        let t0 = rig.clock.now()
        let a = try await rig.store.fetch(FetchRequest(id: "a", holder: "alice"))
        #expect(a.element == "e0" && a.status == .active && a.holder == "alice")
        #expect(a.grantedAt == t0 && a.expiresAt == t0.adding(seconds: 10) && a.finishedAt == nil)
        rig.clock.advance(by: 1)
        let b = try await rig.store.fetch(FetchRequest(id: "b", holder: "bob", leaseSeconds: 2))
        #expect(b.element == "e1" && b.expiresAt == rig.clock.now().adding(seconds: 2))
        #expect(try #require(b.fence) > (try #require(a.fence)))
        // A retried fetch with a known id answers the same lease.
        #expect(try await rig.store.fetch(FetchRequest(id: "a", holder: "x")) == a)
        let recycled = try await rig.store.recycle(lease: "a")
        #expect(recycled.status == .recycled && recycled.finishedAt == rig.clock.now() && recycled.element == "e0")
        // e2 was freed at creation, before e0 was recycled.
        #expect(try await rig.store.fetch(FetchRequest(id: "c", holder: "alice")).element == "e2")
        let d = try await rig.store.fetch(FetchRequest(id: "d", holder: "carol"))
        #expect(d.element == "e0")
        let state = try await rig.store.state(limit: 10)
        let e0 = try #require(state.elements.first)
        #expect(e0.lastHolder == "carol" && e0.leaseTransitions == 1 && e0.lease?.id == "d")
        // Nothing free: exhausted, naming the first expiry (b's).
        await #expect(throws: PoolError.exhausted(nextExpiryAt: b.expiresAt)) {
            try await rig.store.fetch(FetchRequest())
        }
        await #expect(throws: PoolError.notLeased("lease \"a\" is not active (it is recycled)", status: .recycled)) {
            try await rig.store.recycle(lease: "a")
        }
        await #expect(throws: PoolError.notFound("lease \"zz\"")) { try await rig.store.lease(id: "zz") }
        await #expect(throws: PoolError.notFound("element \"zz\"")) { try await rig.store.recycle(element: "zz") }
        let byElement = try await rig.store.recycle(element: "e2")
        #expect(byElement.id == "c" && byElement.status == .recycled)
        await #expect(throws: PoolError.notLeased("element \"e2\" is not leased", status: nil)) {
            try await rig.store.recycle(element: "e2")
        }
        let counts = try await rig.store.state(limit: 0).counts
        #expect(counts.fetchedTotal == 4 && counts.recycledTotal == 2)
    }

    @Test func leasesExpireAndExtendWithinThePoolsLeaseSeconds() async throws {
        let rig = try await PoolRig()
        _ = try await rig.created(PoolConfig(elements: PoolRig.elements(1), leaseSeconds: 10))
        let a = try await rig.store.fetch(FetchRequest(id: "a"))
        await #expect(
            throws: PoolError.invalid(field: "lease_seconds", message: "must be at most 10, the pool's lease_seconds")
        ) {
            try await rig.store.fetch(FetchRequest(leaseSeconds: 11))
        }
        await #expect(
            throws: PoolError.invalid(field: "lease_seconds", message: "must be at most 10, the pool's lease_seconds")
        ) {
            try await rig.store.extend(lease: "a", leaseSeconds: 11)
        }
        rig.clock.advance(by: 6)
        let extended = try await rig.store.extend(lease: "a", leaseSeconds: nil)
        #expect(extended.expiresAt == rig.clock.now().adding(seconds: 10) && extended.fence == a.fence)
        rig.clock.advance(by: 10)
        let expired = try await rig.store.lease(id: "a")
        #expect(expired.status == .expired && expired.finishedAt == extended.expiresAt)
        await #expect(throws: PoolError.notLeased("lease \"a\" is not active (it is expired)", status: .expired)) {
            try await rig.store.extend(lease: "a", leaseSeconds: nil)
        }
        let state = try await rig.store.state(limit: 10)
        #expect(state.available == 1 && state.counts.expiredTotal == 1)
    }

    @Test func aWaitingFetchGetsTheElementAnExpiryFrees() async throws {
        let rig = try await PoolRig()
        _ = try await rig.created(PoolConfig(elements: PoolRig.elements(1), leaseSeconds: 5, maxWaiting: 1))
        let a = try await rig.store.fetch(FetchRequest(id: "a", holder: "alice"))
        let w = try await rig.store.fetch(FetchRequest(id: "w", holder: "walt"), waiting: true)
        #expect(w.status == .waiting && w.element == nil && w.fence == nil)
        // The same id again finds the waiting fetch; without a wait it is exhausted.
        #expect(try await rig.store.fetch(FetchRequest(id: "w"), waiting: true) == w)
        await #expect(throws: PoolError.exhausted(nextExpiryAt: a.expiresAt)) {
            try await rig.store.fetch(FetchRequest(id: "w"))
        }
        await #expect(throws: PoolError.full(retryAfterSeconds: 5)) {
            try await rig.store.fetch(FetchRequest(), waiting: true)
        }
        var state = try await rig.store.state(limit: 10)
        #expect(state.waiting == 1 && state.waitingLeases.map(\.id) == ["w"])
        rig.clock.advance(by: 5)
        try await rig.store.tick()
        let granted = try await rig.store.lease(id: "w")
        #expect(granted.status == .active && granted.element == "e0" && granted.grantedAt == a.expiresAt)
        #expect(try await rig.store.withdraw(id: "w") == granted)
        state = try await rig.store.state(limit: 10)
        #expect(state.elements[0].leaseTransitions == 1 && state.elements[0].lastHolder == "walt")
        #expect(state.counts.expiredTotal == 1 && state.counts.fetchedTotal == 2)
    }

    @Test func aWithdrawnFetchLeavesAsIfItHadNeverCome() async throws {
        let rig = try await PoolRig()
        _ = try await rig.created(PoolConfig(elements: PoolRig.elements(1)))
        _ = try await rig.store.fetch(FetchRequest(id: "a"))
        _ = try await rig.store.fetch(FetchRequest(id: "w"), waiting: true)
        let exhausted = PoolError.exhausted(nextExpiryAt: rig.clock.now().adding(seconds: 60))
        await #expect(throws: exhausted) { try await rig.store.withdraw(id: "w") }
        await #expect(throws: PoolError.notFound("lease \"w\"")) { try await rig.store.lease(id: "w") }
        await #expect(throws: exhausted) { try await rig.store.withdraw(id: "w") }
        let state = try await rig.store.state(limit: 10)
        #expect(state.waiting == 0 && state.waitingLeases.isEmpty)
        // The id is free again.
        _ = try await rig.store.recycle(lease: "a")
        #expect(try await rig.store.fetch(FetchRequest(id: "w")).status == .active)
    }

    @Test func undeliveredRecyclesOnlyTheSameGrant() async throws {
        let rig = try await PoolRig()
        _ = try await rig.created(PoolConfig(elements: PoolRig.elements(1)))
        let a = try await rig.store.fetch(FetchRequest(id: "a"))
        #expect(try await rig.store.recycleUndelivered(lease: "a", fence: a.fence! + 1) == nil)
        let undone = try #require(try await rig.store.recycleUndelivered(lease: "a", fence: a.fence!))
        #expect(undone.status == .recycled && undone.reason == "undelivered")
        #expect(try await rig.store.recycleUndelivered(lease: "a", fence: a.fence!) == nil)
    }

    /// What `RedisPool.abandon` does for a fetch answered 503, after the
    /// client's retry with the same id found it waiting and then got the
    /// lease: the withdrawal finds it active and its recycle changes nothing.
    @Test func anAbandonedFetchKeepsTheLeaseARetryWasAnswered() async throws {
        let rig = try await PoolRig()
        _ = try await rig.created(PoolConfig(elements: PoolRig.elements(1)))
        _ = try await rig.store.fetch(FetchRequest(id: "held"))
        #expect(try await rig.store.fetch(FetchRequest(id: "w"), waiting: true).status == .waiting)
        #expect(try await rig.store.fetch(FetchRequest(id: "w"), waiting: true).status == .waiting)
        _ = try await rig.store.recycle(lease: "held")
        let w = try await rig.store.withdraw(id: "w")
        #expect(w.status == .active)
        #expect(try await rig.store.recycleUndelivered(lease: "w", fence: w.fence!) == nil)
        #expect(try await rig.store.lease(id: "w") == w)
        // A retry that found it active already: the same.
        let again = try await rig.store.fetch(FetchRequest(id: "w"))
        #expect(again == w)
        #expect(try await rig.store.recycleUndelivered(lease: "w", fence: w.fence!) == nil)
    }

    // MARK: - Elements and grow

    @Test func elementsAreAddedReplacedAndRemoved() async throws {
        let rig = try await PoolRig()
        _ = try await rig.created(PoolConfig(elements: PoolRig.elements(1)))
        let a = try await rig.store.fetch(FetchRequest(id: "a", holder: "alice"))
        _ = try await rig.store.fetch(FetchRequest(id: "w", holder: "walt"), waiting: true)
        // A new element goes to the waiting fetcher at once.
        let (added, created) = try await rig.store.putElement("x", data: .string("one"))
        #expect(created && added.lease?.id == "w" && added.lastHolder == "walt")
        let (replaced, again) = try await rig.store.putElement("x", data: .string("two"))
        #expect(!again && replaced.data == .string("two") && replaced.lease?.elementData == .string("two"))
        await #expect(throws: PoolError.elementLeased(element: "e0", lease: "a")) {
            try await rig.store.removeElement("e0", force: false)
        }
        let removal = try await rig.store.removeElement("e0", force: true)
        #expect(removal.element.id == "e0" && removal.element.lease == nil && removal.element.lastHolder == "alice")
        let ended = try #require(removal.endedLease)
        #expect(ended.id == "a" && ended.status == .revoked && ended.element == "e0" && ended.fence == a.fence)
        await #expect(throws: PoolError.notLeased("lease \"a\" is not active (it is revoked)", status: .revoked)) {
            try await rig.store.recycle(lease: "a")
        }
        await #expect(throws: PoolError.notFound("element \"e0\"")) {
            try await rig.store.removeElement("e0", force: true)
        }
        let state = try await rig.store.state(limit: 10)
        #expect(state.size == 1 && state.leased == 1 && state.counts.revokedTotal == 1)
        // Pages resume after the last element listed.
        _ = try await rig.store.putElement("y", data: nil)
        let first = try await rig.store.state(limit: 1)
        #expect(first.elements.map(\.id) == ["x"] && first.more)
        let next = try await rig.store.state(limit: 1, after: LeasePool.elementCursor(first.cursors[0]))
        #expect(next.elements.map(\.id) == ["y"] && !next.more && next.waitingLeases.isEmpty)
    }

    @Test func growCreatesElementsWhenNoneIsFree() async throws {
        let rig = try await PoolRig()
        _ = try await rig.created(
            PoolConfig(elements: [PoolElementSpec(id: "g-2")], grow: PoolGrow(maxSize: 3, prefix: "g-")))
        let ids = try await [1, 2, 3].asyncMap { try await rig.store.fetch(FetchRequest(id: "l\($0)")).element }
        #expect(ids == ["g-2", "g-1", "g-3"])
        await #expect(throws: PoolError.exhausted(nextExpiryAt: rig.clock.now().adding(seconds: 60))) {
            try await rig.store.fetch(FetchRequest(id: "l4"), waiting: false)
        }
        let w = try await rig.store.fetch(FetchRequest(id: "w"), waiting: true)
        #expect(w.status == .waiting)
        // A larger max_size grows for the fetcher already waiting.
        let config = try await rig.store.apply(PoolPatch(maxWaiting: 3, grow: PoolGrow(maxSize: 4, prefix: "g-")))
        #expect(config.grow?.maxSize == 4 && config.maxWaiting == 3)
        #expect(try await rig.store.lease(id: "w").element == "g-4")
        #expect(try await rig.store.state(limit: 0).counts.grownTotal == 3)
    }

    // MARK: - Redis specifics

    @Test func fencesNeverGoBackwardsWhenTheClockDoes() async throws {
        let rig = try await PoolRig()
        _ = try await rig.created(PoolConfig(elements: PoolRig.elements(1)))
        let a = try await rig.store.fetch(FetchRequest(id: "a"))
        _ = try await rig.store.recycle(lease: "a")
        rig.clock.advance(by: -3600)
        let b = try await rig.store.fetch(FetchRequest(id: "b"))
        #expect(b.fence == a.fence! + 1)
    }

    @Test func noticesCarryTheLeasesWithTheirElements() async throws {
        let rig = try await PoolRig()
        _ = try await rig.created(PoolConfig(elements: PoolRig.elements(1)))
        let events = AsyncStream<RedisSubscriber.Event>.makeStream()
        let subscriber = try RedisSubscriber(
            endpoint: rig.server.endpoint, connectTimeoutSeconds: 1, channels: [PoolRig.channel]
        ) { events.continuation.yield($0) }
        defer { subscriber.stop() }
        var received = events.stream.makeAsyncIterator()
        #expect(await received.next() == .subscribed(channel: PoolRig.channel))
        func nextNotice() async -> PoolNotice? {
            guard case .message(_, let payload) = await received.next() else { return nil }
            return RedisPoolStore.decodeNotice(payload)
        }
        let a = try await rig.store.fetch(FetchRequest(id: "a", holder: "alice"))
        var notice = try #require(await nextNotice())
        #expect(notice.changed.map(\.lease) == [a] && notice.changed[0].status == .granted)
        #expect(notice.next == a.expiresAt && notice.name == "gpus" && notice.time == rig.clock.now())
        _ = try await rig.store.fetch(FetchRequest(id: "w"), waiting: true)
        notice = try #require(await nextNotice())
        #expect(notice.changed.map(\.lease.status) == [.waiting])
        _ = try? await rig.store.withdraw(id: "w")
        notice = try #require(await nextNotice())
        #expect(notice.changed.isEmpty && notice.withdrawn.map(\.id) == ["w"])
        _ = try await rig.store.apply(PoolPatch(maxWaiting: 5))
        notice = try #require(await nextNotice())
        #expect(notice.updated?.before.maxWaiting == 1000 && notice.updated?.after.maxWaiting == 5)
        #expect(try await rig.store.delete())
        // The deletion revokes the lease first, and says so.
        notice = try #require(await nextNotice())
        #expect(notice.changed.map(\.lease.status) == [.revoked] && notice.changed[0].lease.reason == "deleted")
        notice = try #require(await nextNotice())
        #expect(notice.deleted)
    }

    @Test func tickIsIdempotentAndDeleteLeavesNothing() async throws {
        let rig = try await PoolRig()
        _ = try await rig.created(PoolConfig(elements: PoolRig.elements(2), leaseSeconds: 1))
        _ = try await rig.store.fetch(FetchRequest(id: "a"))
        rig.clock.advance(by: 2)
        try await rig.store.tick()
        let once = try await rig.store.state(limit: 10)
        try await rig.store.tick()
        #expect(try await rig.store.state(limit: 10) == once)
        #expect(once.counts.expiredTotal == 1 && once.available == 2)
        #expect(try await rig.store.delete())
        #expect(try await !rig.store.delete())
        await #expect(throws: PoolError.gone) { try await rig.store.fetch(FetchRequest()) }
        await #expect(throws: PoolError.gone) { try await rig.store.tick() }
        #expect(try await rig.server.connection().command(["KEYS", "*"]) == .array([]))
    }

    /// Every script reads all of `meta`: the declared elements, whose text grows
    /// with the pool, are kept apart and read only where the config is answered.
    @Test func theDeclaredElementsStayOutOfMeta() async throws {
        let rig = try await PoolRig()
        let made = try await rig.created(PoolConfig(elements: PoolRig.elements(500), leaseSeconds: 1))
        let redis = rig.server.connection()
        let meta = "usher:{pool:gpus}:meta"
        #expect(try await redis.command(["HEXISTS", meta, "elements"]) == .integer(0))
        let metaBytes = try #require(try await redis.command(["MEMORY", "USAGE", meta]).int)
        #expect(metaBytes < 2048, "meta holds \(metaBytes) bytes for 500 elements")
        #expect(try await redis.command(["STRLEN", "usher:{pool:gpus}:elements"]).int ?? 0 > 500 * 4)
        #expect(try await rig.store.config() == made)

        // A pool made when the elements were a meta field still answers its config.
        let text = try #require(try await redis.command(["GET", "usher:{pool:gpus}:elements"]).string)
        _ = try await redis.command(["HSET", meta, "elements", text])
        _ = try await redis.command(["DEL", "usher:{pool:gpus}:elements"])
        #expect(try await rig.store.config() == made)
    }

    @Test func everyKeyOfAPoolSharesOneSlot() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("usher-cluster-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // A one-node cluster: Redis itself refuses a script that touches another slot.
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
        let rig = try await PoolRig(server: server)
        _ = try await rig.created(PoolConfig(elements: PoolRig.elements(2), leaseSeconds: 1))
        _ = try await rig.store.fetch(FetchRequest(id: "a"))
        _ = try await rig.store.putElement("x", data: .int(1))
        _ = try await rig.store.fetch(FetchRequest(id: "b"))
        _ = try await rig.store.removeElement("x", force: true)
        _ = try await rig.store.fetch(FetchRequest(id: "w"), waiting: true)
        rig.clock.advance(by: 2)
        _ = try await rig.store.state(limit: 10)
        let keys = try #require(try await admin.command(["KEYS", "*"]).array).compactMap(\.string)
        #expect(keys.count >= 8 && keys.allSatisfy { $0.hasPrefix("usher:{pool:gpus}:") })
        var slots: Set<Int64> = []
        for key in keys { slots.insert(try #require(try await admin.command(["CLUSTER", "KEYSLOT", key]).int)) }
        #expect(slots.count == 1)
    }

    @Test func aStoppedServerIsUnavailable() async throws {
        let rig = try await PoolRig()
        _ = try await rig.created(PoolConfig(elements: PoolRig.elements(1)))
        rig.server.stop()
        await #expect {
            try await rig.store.fetch(FetchRequest())
        } throws: { error in
            if case .backendUnavailable = error as? PoolError { return true }
            return false
        }
    }
}

extension Array {
    fileprivate func asyncMap<T>(_ body: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for x in self { results.append(try await body(x)) }
        return results
    }
}
