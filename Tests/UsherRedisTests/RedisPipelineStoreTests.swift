import Foundation
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// `RedisPipelineStore` and `pipeline.lua` against a real redis-server:
/// `PipelineEngine`'s rules (UsherCoreTests' Pipeline* tests) and what Redis adds.
@Suite(.serialized, .timeLimit(.minutes(2))) struct RedisPipelineStoreTests {
    static func created(_ rig: PipelineRig, _ config: PipelineConfig = PipelineConfig()) async throws {
        let (_, created) = try await rig.store.create(config)
        #expect(created)
    }

    @Test func createAnswersAnExistingPipelineAsItIs() async throws {
        let rig = try await PipelineRig()
        let config = PipelineConfig(
            capacity: 3, maxInFlight: 2, ackSeconds: 0.25, maxDeliveries: 4,
            filters: ["d": PipelineFilter(action: .remove(field: JSONPointer(tokens: ["a/b", "~c"])))], history: 7,
            dedupSeconds: 1.5)
        let (first, created) = try await rig.store.create(config)
        #expect(created && first == config)
        let (again, createdAgain) = try await rig.store.create(PipelineConfig())
        #expect(!createdAgain && again == config)
        #expect(try await rig.store.filters() == PipelineFilters(config.filters))
    }

    @Test func pushTakeConsumeInPriorityOrder() async throws {
        let rig = try await PipelineRig()
        try await Self.created(rig, PipelineConfig(maxInFlight: 10))
        let low = try await rig.store.push(PipelinePushRequest(id: "low", payload: .int(1)))
        #expect(low.created && low.position == 1 && low.item.status == .ready)
        let high = try await rig.store.push(PipelinePushRequest(id: "high", payload: .int(2), priority: 5))
        #expect(high.position == 1)
        #expect(try await rig.store.item("low").position == 2)
        let taken = try await rig.store.take(max: 5)
        #expect(taken.map(\.id) == ["high", "low"])
        #expect(taken[0].fence < taken[1].fence)
        #expect(taken[0].ackDeadline == rig.clock.now().adding(seconds: 30))
        let consumed = try await rig.store.consume("high", fence: taken[0].fence)
        #expect(consumed.status == .consumed && consumed.payload == .int(2))
        await #expect(throws: PipelineError.notInFlight(current: "consumed")) {
            try await rig.store.consume("high")
        }
        await #expect(throws: PipelineError.notInFlight(current: "in_flight")) {
            try await rig.store.consume("low", fence: taken[0].fence)
        }
        await #expect(throws: PipelineError.notFound("nope")) { try await rig.store.consume("nope") }
    }

    @Test func payloadsRoundTripExactly() async throws {
        let rig = try await PipelineRig()
        try await Self.created(rig)
        let payload = JSONValue.object([
            ("big", .int(Int.max)), ("small", .int(-12_345_678_901_234_567)), ("odd", .int(12_345_678_901_234_567)),
            ("tenth", .double(0.1)), ("s", .string("é\u{0}\"")),
            ("n", .null), ("a", .array([.bool(true), .double(-2.5e-7)])),
        ])
        _ = try await rig.store.push(PipelinePushRequest(id: "x", payload: payload))
        #expect(try await rig.store.item("x").item.payload == payload)
        #expect(try await rig.store.take(max: 1).first?.payload == payload)
    }

    @Test func ackDeadlineRedeliversToTheFrontThenTheDeadList() async throws {
        let rig = try await PipelineRig()
        try await Self.created(rig, PipelineConfig(ackSeconds: 5, maxDeliveries: 2))
        _ = try await rig.store.pushBatch([
            PipelinePushRequest(id: "a", payload: .int(1)), PipelinePushRequest(id: "b", payload: .int(2)),
        ])
        let first = try await rig.store.take(max: 1)
        #expect(first.map(\.id) == ["a"])
        rig.clock.advance(by: 5)
        try await rig.store.tick()
        try await rig.store.tick()
        let second = try await rig.store.take(max: 1)
        #expect(second.map(\.id) == ["a"] && second[0].deliveries == 2 && second[0].fence > first[0].fence)
        rig.clock.advance(by: 5)
        let dead = try await rig.store.deadPage(limit: 10, after: nil)
        #expect(dead.items.map(\.id) == ["a"] && dead.items[0].deadAt == rig.clock.now())
        let state = try await rig.store.state(limit: 10)
        #expect(state.counts.redeliveredTotal == 1 && state.counts.deadTotal == 1 && state.dead == 1)
        #expect(try await rig.store.redrive() == (moved: 1, dead: 0))
        let items = try await rig.store.state(limit: 10).items
        #expect(items.map(\.id) == ["b", "a"] && items[1].deliveries == 0)
    }

    @Test func fullThenDedupWithinDedupSeconds() async throws {
        let rig = try await PipelineRig()
        try await Self.created(rig, PipelineConfig(capacity: 1, dedupSeconds: 10))
        _ = try await rig.store.push(PipelinePushRequest(id: "a", payload: .int(1)))
        await #expect(throws: PipelineError.full(retryAfterSeconds: 1)) {
            try await rig.store.push(PipelinePushRequest(payload: .int(2)))
        }
        // A repeat of a held id needs no room.
        #expect(try await rig.store.push(PipelinePushRequest(id: "a", payload: .int(9))).created == false)
        let taken = try await rig.store.take(max: 1)
        try await rig.store.consume("a", fence: taken[0].fence)
        #expect(try await rig.store.push(PipelinePushRequest(id: "a", payload: .int(3))).item.status == .consumed)
        rig.clock.advance(by: 10)
        let again = try await rig.store.push(PipelinePushRequest(id: "a", payload: .int(4)))
        #expect(again.created && again.item.payload == .int(4))
    }

    @Test func aBatchIsCheckedAsMemoryChecksIt() async throws {
        let rig = try await PipelineRig()
        let config = PipelineConfig(capacity: 2)
        try await Self.created(rig, config)
        var memory = PipelineEngine(config: config, createdAt: rig.clock.now())
        let bad = PipelinePushRequest(id: "bad id", payload: .int(1))
        let good = PipelinePushRequest(payload: .int(2))
        for batch in [
            [good, good, bad], [good, bad], [good, PipelinePushRequest(payload: .int(3), priority: 2_000_000)],
        ] {
            let now = rig.clock.now()
            let expected = try #require(throws: PipelineError.self) { try memory.pushBatch(batch, now: now) }
            await #expect(throws: expected) { try await rig.store.pushBatch(batch) }
        }
        #expect(try await rig.store.state(limit: 0).counts.pushedTotal == 0)
        #expect(try await rig.store.pushBatch([good, good]).count == 2)
    }

    @Test func filtersDropAndChangeWhatIsDelivered() async throws {
        let rig = try await PipelineRig()
        try await Self.created(rig, PipelineConfig(maxInFlight: 10))
        let heartbeat = PipelineFilter(
            priority: 1, when: .init(field: JSONPointer(tokens: ["type"]), test: .equals(.string("hb"))),
            action: .drop)
        #expect(try await rig.store.putFilter(name: "hb", heartbeat))
        #expect(
            try await rig.store.putFilter(
                name: "tag", PipelineFilter(action: .set(field: JSONPointer(tokens: ["by"]), value: .string("u")))))
        #expect(try await rig.store.putFilter(name: "hb", heartbeat) == false)
        for (i, type) in ["hb", "job", "hb", "job"].enumerated() {
            _ = try await rig.store.push(
                PipelinePushRequest(id: "i\(i)", payload: .object([("type", .string(type))])))
        }
        let taken = try await rig.store.take(max: 2)
        #expect(taken.map(\.id) == ["i1", "i3"])
        #expect(taken[0].payload == .object([("type", .string("job")), ("by", .string("u"))]))
        #expect(try await rig.store.item("i1").item.payload == .object([("type", .string("job"))]))
        let state = try await rig.store.state(limit: 10)
        #expect(state.counts.filteredTotal == 2 && state.counts.deliveredTotal == 2 && state.inFlight == 2)
        await #expect(throws: PipelineError.notFound("i0")) { try await rig.store.item("i0") }
        try await rig.store.removeFilter(name: "hb")
        await #expect(throws: PipelineError.notFound("hb")) { try await rig.store.removeFilter(name: "hb") }
        #expect(try await rig.store.filters().count == 1)
    }

    @Test func fencesNeverGoBackwardsWhenTheClockDoes() async throws {
        let rig = try await PipelineRig()
        try await Self.created(rig, PipelineConfig(maxInFlight: 10))
        _ = try await rig.store.push(PipelinePushRequest(payload: .int(1)))
        let first = try await rig.store.take(max: 1)[0]
        rig.clock.advance(by: -60)
        let pushed = try await rig.store.push(PipelinePushRequest(payload: .int(2)))
        let second = try await rig.store.take(max: 1)[0]
        #expect(second.fence > first.fence)
        #expect(Int64(pushed.item.id)! > Int64(first.id)!)
    }

    @Test func tickIsIdempotentAndUndeliverTakesBackAHandOut() async throws {
        let rig = try await PipelineRig()
        try await Self.created(rig, PipelineConfig(ackSeconds: 5))
        _ = try await rig.store.push(PipelinePushRequest(id: "a", payload: .int(1), delaySeconds: 2))
        rig.clock.advance(by: 2)
        try await rig.store.tick()
        try await rig.store.tick()
        let taken = try await rig.store.take(max: 1)[0]
        let back = try await rig.store.undeliver([(taken.id, taken.fence), ("a", 1)])
        #expect(back.count == 1 && back[0].status == .ready && back[0].deliveries == 0 && back[0].fence == nil)
        #expect(try await rig.store.state(limit: 0).counts.deliveredTotal == 1)
    }

    @Test func noticesTellWhatChanged() async throws {
        let rig = try await PipelineRig()
        let events = AsyncStream<RedisSubscriber.Event>.makeStream()
        let subscriber = try RedisSubscriber(
            endpoint: rig.server.endpoint, connectTimeoutSeconds: 1, channels: ["usher:notices"]
        ) { events.continuation.yield($0) }
        defer { subscriber.stop() }
        var received = events.stream.makeAsyncIterator()
        #expect(await received.next() == .subscribed(channel: "usher:notices"))
        func nextNotice() async -> PipelineNotice? {
            guard case .message(_, let payload) = await received.next() else { return nil }
            return RedisPipelineStore.decodeNotice(payload)
        }
        try await Self.created(rig, PipelineConfig(ackSeconds: 5))
        _ = try await rig.store.push(PipelinePushRequest(id: "a", payload: .int(1)))
        let pushed = await nextNotice()
        #expect(pushed?.events.map(\.type) == ["pushed"] && pushed?.itemsAvailable == true)
        let taken = try await rig.store.take(max: 1)[0]
        let delivered = await nextNotice()
        #expect(delivered?.events.map(\.type) == ["delivered"])
        #expect(delivered?.next == taken.ackDeadline)
        rig.clock.advance(by: 5)
        try await rig.store.tick()
        let redelivered = await nextNotice()
        #expect(redelivered?.redelivered == 1 && redelivered?.itemsAvailable == true)
        try await rig.store.apply(PipelinePatch(capacity: 9, paused: true))
        let updated = await nextNotice()
        #expect(updated?.updated?.after.capacity == 9 && updated?.updated?.paused == true)
        #expect(updated?.updated?.before.capacity == 1000 && updated?.updated?.wasPaused == false)
        #expect(try await rig.store.delete())
        #expect(await nextNotice()?.deleted == true)
    }

    @Test func goneAfterDeleteAndUnavailableWhenStopped() async throws {
        let rig = try await PipelineRig()
        try await Self.created(rig)
        #expect(try await rig.store.delete())
        #expect(try await rig.store.delete() == false)
        await #expect(throws: PipelineError.gone) { try await rig.store.take(max: 1) }
        let keys = try #require(try await rig.server.connection().command(["KEYS", "*"]).array)
        #expect(keys.isEmpty)
        rig.server.stop()
        await #expect {
            try await rig.store.push(PipelinePushRequest(payload: .int(1)))
        } throws: { error in
            if case .backendUnavailable = error as? PipelineError { return true }
            return false
        }
    }

    @Test func everyKeyOfAPipelineSharesOneHashSlot() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("usher-cluster-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
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
        let rig = try await PipelineRig(server: server)
        try await Self.created(
            rig, PipelineConfig(ackSeconds: 1, maxDeliveries: 1, filters: ["f": PipelineFilter(action: .drop)]))
        _ = try await rig.store.pushBatch([
            PipelinePushRequest(id: "a", payload: .int(1)), PipelinePushRequest(id: "b", payload: .int(2)),
            PipelinePushRequest(id: "c", payload: .int(3), delaySeconds: 9),
        ])
        try await rig.store.removeFilter(name: "f")
        _ = try await rig.store.putFilter(
            name: "g", PipelineFilter(priority: 3, action: .remove(field: .init(tokens: ["x"]))))
        let taken = try await rig.store.take(max: 1)
        try await rig.store.consume(taken[0].id)
        _ = try await rig.store.take(max: 1)
        rig.clock.advance(by: 1)
        try await rig.store.tick()
        _ = try await rig.store.push(PipelinePushRequest(id: "d", payload: .int(4)))
        let keys = try #require(try await admin.command(["KEYS", "*"]).array).compactMap(\.string)
        #expect(keys.count == 7)
        var slots: Set<Int64> = []
        for key in keys { slots.insert(try #require(try await admin.command(["CLUSTER", "KEYSLOT", key]).int)) }
        #expect(slots.count == 1)
    }
}
