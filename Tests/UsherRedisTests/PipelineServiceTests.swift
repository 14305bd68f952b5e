import Foundation
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// `PipelineService` on both backends with a `ManualClock`: the same calls,
/// the same answers, the same events, the same waits.
@Suite struct PipelineServiceTests {
    typealias Backend = TestBackend
    typealias Rig = ServiceRig<any PipelineService>

    @Test(arguments: Backend.allCases)
    func pushTakeConsumeEmitTheSameEvents(_ backend: Backend) async throws {
        let rig = try await Rig(backend, config: PipelineConfig(maxInFlight: 2, ackSeconds: 5, maxDeliveries: 1))
        let p = rig.pipeline
        _ = try await p.pushItem(PipelinePushRequest(id: "a", payload: .object([("n", .int(1))]))).value()
        _ = try await p.pushItems([PipelinePushRequest(id: "b", payload: .int(2))]).value()
        let taken = try await p.takeItems(max: 2, ackSeconds: nil).value()
        #expect(taken.map(\.id) == ["a", "b"])
        _ = try await p.consumeItem("a", fence: taken[0].fence).value()
        _ = try await p.extendItem("b", ackSeconds: 2, fence: nil).value()
        rig.clock.advance(by: 5)
        #expect(await poll { (try? await p.readState(limit: 0, after: nil).value().dead) == 1 })
        _ = try await p.applyPatch(PipelinePatch(capacity: 9)).value()
        #expect(
            await poll {
                rig.eventTypes == [
                    "pushed", "pushed", "delivered", "delivered", "consumed", "extended", "dead-lettered", "updated",
                ]
            }, "\(rig.eventTypes)")
        let dead = try await p.readDead(limit: 10, after: nil).value()
        #expect(dead.items.map(\.id) == ["b"] && dead.dead == 1)
        #expect(try await p.redriveDead().value() == (moved: 1, dead: 0))
        await rig.stop()
    }

    @Test(arguments: Backend.allCases)
    func aParkedTakeIsWokenByAPush(_ backend: Backend) async throws {
        let rig = try await Rig(backend, config: PipelineConfig())
        let p = rig.pipeline
        let deadline = rig.clock.now().adding(seconds: 30)
        let waiting = Task { try await p.parkTake(max: 1, ackSeconds: nil, until: deadline) }
        #expect(await poll { (try? await p.readState(limit: 0, after: nil).value().waitingConsumers) == 1 })
        _ = try await p.pushItem(PipelinePushRequest(id: "x", payload: .int(1))).value()
        let items = try await waiting.value
        #expect(items.map(\.id) == ["x"])
        await rig.stop()
    }

    @Test(arguments: Backend.allCases)
    func aParkedPushGetsRoomWhenAnItemLeaves(_ backend: Backend) async throws {
        let rig = try await Rig(backend, config: PipelineConfig(capacity: 1))
        let p = rig.pipeline
        _ = try await p.pushItem(PipelinePushRequest(id: "a", payload: .int(1))).value()
        await #expect(throws: PipelineError.full(retryAfterSeconds: 1)) {
            try await p.pushItem(PipelinePushRequest(id: "b", payload: .int(2))).value()
        }
        let deadline = rig.clock.now().adding(seconds: 30)
        let waiting = Task { try await p.parkPush(PipelinePushRequest(id: "b", payload: .int(2)), until: deadline) }
        #expect(await poll { (try? await p.readState(limit: 0, after: nil).value().waitingProducers) == 1 })
        _ = try await p.cancelItem("a").value()
        let pushed = try await waiting.value
        #expect(pushed.item.id == "b" && pushed.created)
        await rig.stop()
    }

    @Test(arguments: Backend.allCases)
    func aParkedTakeAnswersEmptyAtItsDeadline(_ backend: Backend) async throws {
        let rig = try await Rig(backend, config: PipelineConfig())
        let p = rig.pipeline
        let deadline = rig.clock.now().adding(seconds: 2)
        let waiting = Task { try await p.parkTake(max: 1, ackSeconds: nil, until: deadline) }
        #expect(await poll { (try? await p.readState(limit: 0, after: nil).value().waitingConsumers) == 1 })
        rig.clock.advance(by: 2)
        #expect(try await waiting.value.isEmpty)
        await rig.stop()
    }

    @Test(arguments: Backend.allCases)
    func aWaitOnAnItemAnswersWhenItMoves(_ backend: Backend) async throws {
        let rig = try await Rig(backend, config: PipelineConfig(ackSeconds: 5))
        let p = rig.pipeline
        let ready = try await p.pushItem(PipelinePushRequest(id: "x", payload: .int(1))).value().item
        let deadline = rig.clock.now().adding(seconds: 30)
        let taking = Task { try await p.parkUntilChange(id: "x", from: ready, until: deadline) }
        let fence = try #require(try await p.takeItems(max: 1, ackSeconds: nil).value().first?.fence)
        let taken = try await taking.value
        #expect(taken.status == .inFlight && taken.fence == fence)
        // The ack deadline runs out: back to ready, a move.
        let redelivering = Task { try await p.parkUntilChange(id: "x", from: taken, until: deadline) }
        rig.clock.advance(by: 5)
        let back = try await redelivering.value
        #expect(back.status == .ready && back.deliveries == 1)
        // No move before the deadline: the item as it is.
        let soon = rig.clock.now().adding(seconds: 2)
        let quiet = Task { try await p.parkUntilChange(id: "x", from: back, until: soon) }
        rig.clock.advance(by: 2)
        #expect(try await quiet.value.status == .ready)
        await #expect(throws: PipelineError.notFound("nobody")) {
            try await p.parkUntilChange(id: "nobody", from: back, until: deadline)
        }
        await rig.stop()
    }

    @Test(arguments: Backend.allCases)
    func filtersAndUndeliverWorkThroughTheService(_ backend: Backend) async throws {
        let rig = try await Rig(backend, config: PipelineConfig(maxInFlight: 5))
        let p = rig.pipeline
        let drop = PipelineFilter(when: .init(field: .init(tokens: ["t"]), test: .equals(.string("hb"))), action: .drop)
        #expect(try await p.storeFilter(name: "hb", drop).value())
        _ = try await p.pushItems([
            PipelinePushRequest(id: "h", payload: .object([("t", .string("hb"))])),
            PipelinePushRequest(id: "j", payload: .object([("t", .string("job"))])),
        ]).value()
        let taken = try await p.takeItems(max: 5, ackSeconds: nil).value()
        #expect(taken.map(\.id) == ["j"])
        p.undeliverItems([(id: "j", fence: taken[0].fence)])
        #expect(await poll { (try? await p.readItem("j").value().status) == .ready })
        #expect(try await p.readFilters().value().count == 1)
        try await p.dropFilter(name: "hb").value()
        let state = try await p.readState(limit: 10, after: nil).value()
        #expect(state.counts.filteredTotal == 1 && state.filters.isEmpty && state.items.map(\.id) == ["j"])
        await rig.stop()
    }
}

extension ServiceRig<any PipelineService> {
    /// A pipeline on one backend, its clock and the events it emitted.
    convenience init(_ backend: TestBackend, config: PipelineConfig) async throws {
        try await self.init(backend) { clock, events in
            Pipeline(name: "p", config: config, clock: clock, events: events)
        } shared: { redis, events in
            let made = RedisPipeline(name: "p", backend: redis.backend, events: events)
            _ = try await made.create(config)
            await redis.listen(made)
            return made
        }
    }

    var pipeline: any PipelineService { service }

    /// The types of the events emitted so far.
    var eventTypes: [String] { events.buffered().map(\.type) }
}
