import TestSupport
import Testing

@testable import UsherCore

/// The `Pipeline` actor: the timer, parked consumers and producers, close and shutdown.
@Suite struct PipelineActorTests {
    let clock = ManualClock()

    func pipeline(_ config: PipelineConfig = PipelineConfig()) -> Pipeline {
        Pipeline(name: "gifts", config: config, clock: clock)
    }

    func later(_ seconds: Double) -> Timestamp { clock.now().adding(seconds: seconds) }

    @Test func synchronousCallersRunIsolatedWithoutAwaiting() throws {
        let p = pipeline()
        let r = try p.withIsolation { p throws(PipelineError) in
            try p.push(PipelinePushRequest(id: "a", payload: .int(1)))
        }
        #expect(r.created && r.position == 1)
        let taken = try p.withIsolation { p throws(PipelineError) in try p.take(max: 1) }
        #expect(taken.map(\.id) == ["a"])
        let s = p.withIsolation { $0.state() }
        #expect(s.inFlight == 1 && s.ready == 0 && s.counts.deliveredTotal == 1)
    }

    @Test func theTimerRedeliversAtTheAckDeadline() async throws {
        let p = pipeline(PipelineConfig(ackSeconds: 10))
        _ = try await p.push(PipelinePushRequest(id: "a", payload: .null))
        _ = try await p.take(max: 1)
        clock.advance(by: 9.9)
        #expect(await p.state().inFlight == 1)
        clock.advance(by: 0.1)
        let s = await p.state()
        #expect(s.inFlight == 0 && s.ready == 1 && s.counts.redeliveredTotal == 1)
        #expect(try await p.take(max: 1).first?.deliveries == 2)
    }

    @Test func aWaitOnAnItemIgnoresAnExtendAndSeesARedeliveryTakenAgain() async throws {
        let p = pipeline(PipelineConfig(ackSeconds: 5))
        _ = try await p.push(PipelinePushRequest(id: "x", payload: .null))
        let first = try #require(try await p.take(max: 1).first)
        let inFlight = try await p.item("x")
        let watch = Task { try await p.waitForChange(id: "x", from: inFlight, until: later(30)) }
        await PipelineFixtures.eventually { await p.itemWatchers.count == 1 }
        _ = try await p.extend("x", ackSeconds: 5)
        #expect(await p.itemWatchers.count == 1)  // an extend is not a move
        // A parked consumer takes the redelivered item in the same step: the fence tells.
        let consumer = Task { try await p.takeWaiting(max: 1, until: later(30)) }
        await PipelineFixtures.eventually { await p.waitingConsumers == 1 }
        clock.advance(by: 5)
        let second = try #require(try await consumer.value.first)
        let seen = try await watch.value
        #expect(seen.status == .inFlight && seen.fence == second.fence && second.fence != first.fence)
        #expect(await p.itemWatchers.isEmpty)
        let tracking = await p.engine.tracksMoves
        #expect(!tracking)  // nobody waits: moves are no longer collected
    }

    @Test func waitsOnItemsEndWithTheirItemOrWithThePipeline() async throws {
        let p = pipeline(PipelineConfig(history: 0))
        _ = try await p.push(PipelinePushRequest(id: "x", payload: .null))
        _ = try await p.push(PipelinePushRequest(id: "y", payload: .null))
        let x = try await p.item("x")
        let y = try await p.item("y")
        let forgotten = Task { try await p.waitForChange(id: "x", from: x, until: later(30)) }
        let closed = Task { try await p.waitForChange(id: "y", from: y, until: later(30)) }
        await PipelineFixtures.eventually { await p.itemWatchers.count == 2 }
        // Cancelled with history 0: nothing is left to answer.
        _ = try await p.cancel("x")
        await #expect(throws: PipelineError.notFound("x")) { try await forgotten.value }
        await p.close()
        await #expect(throws: PipelineError.gone) { try await closed.value }
    }

    @Test func aConsumerIsWokenByAPush() async throws {
        let p = pipeline()
        let consumer = Task { try await p.takeWaiting(max: 5, until: later(30)) }
        await PipelineFixtures.eventually { await p.waitingConsumers == 1 }
        _ = try await p.push(PipelinePushRequest(id: "a", payload: .string("hi")))
        let got = try await consumer.value
        #expect(got.map(\.id) == ["a"])
        #expect(got.first?.payload == .string("hi"))
        #expect(await p.waitingConsumers == 0)
        // The deadline timer was cancelled when the consumer woke; the
        // pipeline's own timer (ack deadline) is the one left.
        #expect(clock.pendingCount == 1)
    }

    @Test func aConsumerIsWokenWhenADelayEnds() async throws {
        let p = pipeline()
        _ = try await p.push(PipelinePushRequest(id: "later", payload: .null, delaySeconds: 3))
        let consumer = Task { try await p.takeWaiting(max: 1, until: later(30)) }
        await PipelineFixtures.eventually { await p.waitingConsumers == 1 }
        clock.advance(by: 3)
        #expect(try await consumer.value.map(\.id) == ["later"])
    }

    @Test func oneTimerServesEveryDeadline() async throws {
        let p = pipeline(PipelineConfig(maxInFlight: 3, ackSeconds: 10))
        for id in ["a", "b", "c"] {
            _ = try await p.push(PipelinePushRequest(id: id, payload: .null))
            _ = try await p.take(max: 1)
            clock.advance(by: 1)
        }
        _ = try await p.push(PipelinePushRequest(id: "d", payload: .null, delaySeconds: 1))
        #expect(clock.pendingCount == 1)
        clock.advance(by: 1)  // d ready
        clock.advance(by: 6)  // a (taken at 0) comes back at 10
        let s = await p.state()
        #expect(s.ready == 2 && s.inFlight == 2 && s.counts.redeliveredTotal == 1)
        #expect(clock.pendingCount == 1)
    }

    @Test func aConsumerIsWokenByARelease() async throws {
        let p = pipeline(PipelineConfig(maxInFlight: 1))
        _ = try await p.push(PipelinePushRequest(id: "a", payload: .null))
        _ = try await p.take(max: 1)
        let consumer = Task { try await p.takeWaiting(max: 1, until: later(30)) }
        await PipelineFixtures.eventually { await p.waitingConsumers == 1 }
        try await p.release("a")
        let got = try await consumer.value
        #expect(got.map(\.id) == ["a"] && got.first?.deliveries == 2)
    }

    @Test func aConsumerIsWokenByARedelivery() async throws {
        let p = pipeline(PipelineConfig(ackSeconds: 5))
        _ = try await p.push(PipelinePushRequest(id: "a", payload: .null))
        _ = try await p.take(max: 1)
        let consumer = Task { try await p.takeWaiting(max: 1, until: later(30)) }
        await PipelineFixtures.eventually { await p.waitingConsumers == 1 }
        clock.advance(by: 5)
        let got = try await consumer.value
        #expect(got.map(\.id) == ["a"] && got.first?.deliveries == 2)
        #expect(await p.state().counts.redeliveredTotal == 1)
    }

    @Test func aConsumerIsWokenByAConsumeFreeingTheInFlightSlot() async throws {
        let p = pipeline()
        _ = try await p.pushBatch([
            PipelinePushRequest(id: "a", payload: .null), PipelinePushRequest(id: "b", payload: .null),
        ])
        _ = try await p.take(max: 1)
        let consumer = Task { try await p.takeWaiting(max: 1, until: later(30)) }
        await PipelineFixtures.eventually { await p.waitingConsumers == 1 }
        try await p.consume("a")
        #expect(try await consumer.value.map(\.id) == ["b"])
    }

    @Test func consumersAreServedInArrivalOrder() async throws {
        let p = pipeline(PipelineConfig(maxInFlight: 10))
        let first = Task { try await p.takeWaiting(max: 1, until: later(30)) }
        await PipelineFixtures.eventually { await p.waitingConsumers == 1 }
        let second = Task { try await p.takeWaiting(max: 1, until: later(30)) }
        await PipelineFixtures.eventually { await p.waitingConsumers == 2 }
        _ = try await p.push(PipelinePushRequest(id: "a", payload: .null))
        #expect(try await first.value.map(\.id) == ["a"])
        #expect(await p.waitingConsumers == 1)
        _ = try await p.push(PipelinePushRequest(id: "b", payload: .null))
        #expect(try await second.value.map(\.id) == ["b"])
    }

    @Test func aConsumerGetsNothingAtTheDeadline() async throws {
        let p = pipeline()
        let consumer = Task { try await p.takeWaiting(max: 1, until: later(5)) }
        await PipelineFixtures.eventually { await p.waitingConsumers == 1 }
        clock.advance(by: 4.999)
        #expect(await p.waitingConsumers == 1)
        clock.advance(by: 0.001)
        #expect(try await consumer.value.isEmpty)
        #expect(await p.waitingConsumers == 0)
    }

    @Test func aConsumerStaysParkedWhileFiltersDropEverything() async throws {
        var config = PipelineConfig()
        config.filters["drop-noise"] = PipelineFilter(
            when: .init(field: JSONPointer(tokens: ["noise"]), test: .exists(true)), action: .drop)
        let p = pipeline(config)
        let consumer = Task { try await p.takeWaiting(max: 1, until: later(30)) }
        await PipelineFixtures.eventually { await p.waitingConsumers == 1 }
        _ = try await p.push(PipelinePushRequest(payload: .object([("noise", .bool(true))])))
        #expect(await p.waitingConsumers == 1)
        _ = try await p.push(PipelinePushRequest(id: "real", payload: .object([])))
        #expect(try await consumer.value.map(\.id) == ["real"])
        #expect(await p.state().counts.filteredTotal == 1)
    }

    @Test func producersWaitInArrivalOrderAndAreWokenByAConsume() async throws {
        let p = pipeline(PipelineConfig(capacity: 1))
        _ = try await p.push(PipelinePushRequest(id: "a", payload: .null))
        await #expect(throws: PipelineError.full(retryAfterSeconds: 1)) {
            try await p.push(PipelinePushRequest(id: "x", payload: .null))
        }
        let first = Task { try await p.pushWaiting(PipelinePushRequest(id: "b", payload: .null), until: later(30)) }
        await PipelineFixtures.eventually { await p.waitingProducers == 1 }
        let second = Task { try await p.pushWaiting(PipelinePushRequest(id: "c", payload: .null), until: later(30)) }
        await PipelineFixtures.eventually { await p.waitingProducers == 2 }

        _ = try await p.take(max: 1)
        #expect(await p.waitingProducers == 2)  // in flight still counts against capacity
        try await p.consume("a")
        let b = try await first.value
        #expect(b.item.id == "b" && b.created && b.position == 1)
        #expect(await p.waitingProducers == 1)

        _ = try await p.take(max: 1)
        try await p.consume("b")
        #expect(try await second.value.item.id == "c")
    }

    @Test func aWaitingProducerGetsFullAtTheDeadline() async throws {
        let p = pipeline(PipelineConfig(capacity: 1))
        _ = try await p.push(PipelinePushRequest(payload: .null))
        let producer = Task { try await p.pushWaiting(PipelinePushRequest(payload: .null), until: later(2)) }
        await PipelineFixtures.eventually { await p.waitingProducers == 1 }
        clock.advance(by: 2)
        await #expect(throws: PipelineError.full(retryAfterSeconds: 1)) { try await producer.value }
        #expect(await p.state().counts.pushedTotal == 1)
    }

    @Test func raisingTheCapacityLetsAWaitingProducerIn() async throws {
        let p = pipeline(PipelineConfig(capacity: 1))
        _ = try await p.push(PipelinePushRequest(payload: .null))
        let producer = Task { try await p.pushWaiting(PipelinePushRequest(id: "b", payload: .null), until: later(30)) }
        await PipelineFixtures.eventually { await p.waitingProducers == 1 }
        try await p.apply(PipelinePatch(capacity: 2))
        #expect(try await producer.value.item.id == "b")
    }

    @Test func closeAnswersParkedCallersWithGone() async throws {
        let p = pipeline(PipelineConfig(capacity: 1))
        _ = try await p.push(PipelinePushRequest(payload: .null))
        let producer = Task { try await p.pushWaiting(PipelinePushRequest(payload: .null), until: later(30)) }
        let q = pipeline()
        let consumer = Task { try await q.takeWaiting(max: 1, until: later(30)) }
        await PipelineFixtures.eventually { await p.waitingProducers == 1 }
        await PipelineFixtures.eventually { await q.waitingConsumers == 1 }
        await p.close()
        await q.close()
        await #expect(throws: PipelineError.gone) { try await producer.value }
        await #expect(throws: PipelineError.gone) { try await consumer.value }
        await #expect(throws: PipelineError.gone) { try await p.take(max: 1) }
        #expect(clock.pendingCount == 0)
    }

    @Test func shutdownAnswersParkedCallersWithShuttingDown() async throws {
        let p = pipeline()
        let consumer = Task { try await p.takeWaiting(max: 1, until: later(30)) }
        await PipelineFixtures.eventually { await p.waitingConsumers == 1 }
        await p.shutdown()
        await #expect(throws: PipelineError.shuttingDown) { try await consumer.value }
        await #expect(throws: PipelineError.shuttingDown) { try await p.push(PipelinePushRequest(payload: .null)) }
        await p.close()
        await #expect(throws: PipelineError.gone) { try await p.push(PipelinePushRequest(payload: .null)) }
    }

    @Test func aCancelledConsumerReturnsNothingAndLeavesNothingBehind() async throws {
        let p = pipeline()
        let consumer = Task { try await p.takeWaiting(max: 1, until: later(30)) }
        await PipelineFixtures.eventually { await p.waitingConsumers == 1 }
        consumer.cancel()
        #expect(try await consumer.value.isEmpty)
        await PipelineFixtures.eventually { await p.waitingConsumers == 0 }
        #expect(clock.pendingCount == 0)
    }

    @Test func stateShowsTheDocumentedShape() async throws {
        let p = pipeline(PipelineConfig(capacity: 5))
        _ = try await p.push(PipelinePushRequest(id: "lo", payload: .int(1)))
        _ = try await p.push(PipelinePushRequest(id: "hi", payload: .int(2), priority: 9))
        _ = try await p.putFilter(
            name: "stamp", PipelineFilter(action: .set(field: JSONPointer(tokens: ["x"]), value: .int(1))))
        let s = await p.state()
        #expect(s.items.map(\.id) == ["hi", "lo"])
        #expect(s.filters.ordered.map(\.name) == ["stamp"])
        #expect(s.source == nil)
        // Filters added through their own route are not part of the config.
        #expect(await p.config.filters.isEmpty)
    }

    @Test func deadItemsAndRedriveThroughTheActor() async throws {
        let p = pipeline(PipelineConfig(maxDeliveries: 1))
        _ = try await p.push(PipelinePushRequest(id: "a", payload: .null))
        _ = try await p.take(max: 1)
        try await p.release("a")
        #expect(await p.dead().map(\.id) == ["a"])
        #expect(try await p.redrive() == 1)
        #expect(try await p.item("a").status == .ready)
        await #expect(throws: PipelineError.notFound("zz")) { try await p.item("zz") }
    }
}

enum PipelineFixtures {
    /// Yields until `condition` holds (parked callers register asynchronously).
    static func eventually(
        _ condition: () async -> Bool, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        await expectEventually(10, condition, sourceLocation: sourceLocation)
    }
}
