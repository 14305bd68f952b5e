import Testing

@testable import UsherCore

/// Extending a delivery, remembering pushed ids for `dedup_seconds`, and
/// pausing hand-outs: the engine with explicit times, the actor on a `ManualClock`.
@Suite struct PipelineExtendDedupPauseTests {
    let t0 = Timestamp(micros: 1_767_225_600_000_000)

    func engine(_ config: PipelineConfig = PipelineConfig()) -> PipelineEngine {
        PipelineEngine(config: config, createdAt: t0, seed: 42)
    }

    func at(_ seconds: Double) -> Timestamp { t0.adding(seconds: seconds) }

    // MARK: - Extend

    @Test func extendMovesTheAckDeadlineLaterAndNeverEarlier() throws {
        var e = engine(PipelineConfig(ackSeconds: 30))
        try e.add("a")
        let fence = try #require(try e.take(max: 1, now: t0).first?.fence)
        // now + ack_seconds when that is later: 5 + 30.
        let moved = try e.extend("a", ackSeconds: 30, fence: fence, now: at(5))
        #expect(moved.ackDeadline == at(35) && moved.status == .inFlight && moved.fence == fence)
        // Shorter than what is left: the deadline stays.
        #expect(try e.extend("a", ackSeconds: 1, now: at(6)).ackDeadline == at(35))
        // Longer than the pipeline's ack_seconds: capped at it.
        #expect(try e.extend("a", ackSeconds: 3600, now: at(10)).ackDeadline == at(40))
        // Without ack_seconds: the pipeline's.
        #expect(try e.extend("a", now: at(20)).ackDeadline == at(50))
        #expect(e.counts.extendedTotal == 4)
        // The old deadline no longer redelivers it; the new one does.
        e.expire(now: at(49.9))
        #expect(e.item("a")?.status == .inFlight && e.nextDeadline() == at(50))
        e.expire(now: at(50))
        #expect(e.item("a")?.status == .ready && e.counts.redeliveredTotal == 1)
    }

    @Test func extendRefusesWhatIsNotInFlightAndAStaleFence() throws {
        var e = engine(PipelineConfig(ackSeconds: 10, history: 10))
        try e.add("a")
        try e.add("b")
        #expect(throws: PipelineError.notInFlight(current: "ready")) { try e.extend("a", now: t0) }
        #expect(throws: PipelineError.notFound("zz")) { try e.extend("zz", now: t0) }
        let first = try #require(try e.take(max: 1, now: t0).first)
        // The deadline passed: the item came back, and an extend is too late.
        #expect(throws: PipelineError.notInFlight(current: "ready")) { try e.extend("a", now: at(10)) }
        let second = try #require(try e.take(max: 1, now: at(11)).first)
        #expect(second.id == "a" && second.fence != first.fence)
        // The first delivery's fence is stale, as for consume.
        #expect(throws: PipelineError.notInFlight(current: "in_flight")) {
            try e.extend("a", fence: first.fence, now: at(12))
        }
        #expect(throws: PipelineError.invalid(field: "ack_seconds", message: Durations.range())) {
            try e.extend("a", ackSeconds: -1, now: at(12))
        }
        try e.consume("a", fence: second.fence, now: at(13))
        #expect(throws: PipelineError.notInFlight(current: "consumed")) { try e.extend("a", now: at(14)) }
        #expect(e.counts.extendedTotal == 0)
    }

    @Test func withoutAPipelineLimitAnExtendCanRemoveTheDeadline() throws {
        var e = engine(PipelineConfig(ackSeconds: 0))
        try e.add("a")
        _ = try e.take(max: 1, ackSeconds: 5, now: t0)
        #expect(try e.extend("a", ackSeconds: 100, now: at(1)).ackDeadline == at(101))
        // 0: no limit, the longest of all.
        #expect(try e.extend("a", ackSeconds: 0, now: at(2)).ackDeadline == nil)
        #expect(try e.extend("a", ackSeconds: 5, now: at(3)).ackDeadline == nil)
        e.expire(now: at(1000))
        #expect(e.item("a")?.status == .inFlight)
    }

    @Test func aReleasedDeliverysDeadlineDoesNotReturnTheNextOneWithoutALimit() throws {
        var e = engine(PipelineConfig(ackSeconds: 0))
        try e.add("a")
        _ = try e.take(max: 1, ackSeconds: 5, now: t0)
        try e.release("a", now: at(1))
        // Taken again without a limit: the first delivery's deadline is stale.
        #expect(try e.take(max: 1, now: at(2)).first?.ackDeadline == nil)
        e.expire(now: at(1000))
        #expect(e.item("a")?.status == .inFlight && e.counts.redeliveredTotal == 0)
        #expect(e.nextDeadline() == nil)
    }

    @Test func anUndeliveredDeliverysDeadlineDoesNotReturnTheNextOneWithoutALimit() throws {
        var e = engine(PipelineConfig(ackSeconds: 0))
        try e.add("a")
        let first = try #require(try e.take(max: 1, ackSeconds: 5, now: t0).first)
        _ = e.undeliver("a", fence: first.fence, now: at(1))
        _ = try e.take(max: 1, now: at(2))
        e.expire(now: at(1000))
        #expect(e.item("a")?.status == .inFlight && e.counts.redeliveredTotal == 0)
    }

    @Test func aRedrivenItemInItsOldSlotIsNotReturnedByItsOldDeadline() throws {
        var e = engine(PipelineConfig(ackSeconds: 0, maxDeliveries: 1))
        try e.add("a")
        _ = try e.take(max: 1, ackSeconds: 5, now: t0)
        // Its last delivery released: dead, its slot free; redriven into the same slot.
        try e.release("a", now: at(1))
        #expect(e.redrive(now: at(2)) == 1)
        _ = try e.take(max: 1, now: at(3))
        e.expire(now: at(1000))
        #expect(e.item("a")?.status == .inFlight && e.counts.deadTotal == 1)
    }

    // MARK: - Dedup

    @Test func aFinishedIdIsAnsweredWithinDedupSecondsAndPushableAfter() throws {
        var e = engine(PipelineConfig(history: 10, dedupSeconds: 300))
        _ = try e.push(PipelinePushRequest(id: "a", payload: .int(1)), now: t0)
        _ = try e.take(max: 1, now: at(1))
        try e.consume("a", now: at(2))
        // Retried within 300 s of the first push: what became of it, nothing enqueued.
        let retried = try e.push(PipelinePushRequest(id: "a", payload: .int(2)), now: at(299))
        #expect(!retried.created && retried.item.status == .consumed && retried.item.deliveries == 1)
        #expect(e.count == 0 && e.counts.pushedTotal == 1 && e.counts.deduplicatedTotal == 1)
        // From 300 s on, the id is free: a new item, and the record is forgotten.
        let bytes = e.storage.bytes
        let fresh = try e.push(PipelinePushRequest(id: "a", payload: .int(3)), now: at(300))
        #expect(fresh.created && fresh.item.status == .ready && fresh.item.payload == .int(3))
        #expect(e.item("a")?.payload == .int(3) && e.counts.pushedTotal == 2)
        #expect(
            e.storage.bytes == bytes - StorageBudget.cost("a") + PipelineEngine.storedBytes(fresh.item))
    }

    @Test func dedupSecondsZeroFreesAFinishedIdAtOnceButNeverALiveOne() throws {
        var e = engine(PipelineConfig(history: 10, dedupSeconds: 0))
        _ = try e.push(PipelinePushRequest(id: "a", payload: .int(1)), now: t0)
        // A live id is one item whatever dedup_seconds says.
        #expect(!(try e.push(PipelinePushRequest(id: "a", payload: .int(2)), now: at(1))).created)
        try e.cancel("a", now: at(2))
        #expect(try e.push(PipelinePushRequest(id: "a", payload: .int(3)), now: at(2)).created)
        #expect(e.counts.pushedTotal == 2 && e.counts.deduplicatedTotal == 1)
    }

    @Test func aBatchNeedsRoomForAnIdPastItsDedupWindow() throws {
        var e = engine(PipelineConfig(capacity: 1, history: 10, dedupSeconds: 60))
        _ = try e.push(PipelinePushRequest(id: "a", payload: .int(1)), now: t0)
        try e.cancel("a", now: t0)
        _ = try e.push(PipelinePushRequest(id: "b", payload: .int(1)), now: t0)
        // Within the window "a" needs no room; after it, it does.
        let within = try e.pushBatch([PipelinePushRequest(id: "a", payload: .null)], now: at(59))
        #expect(within.map(\.created) == [false])
        #expect(throws: PipelineError.full(retryAfterSeconds: 1)) {
            try e.pushBatch([PipelinePushRequest(id: "a", payload: .null)], now: at(60))
        }
        // Refused: nothing changed, the record is still there.
        #expect(e.item("a")?.status == .cancelled)
    }

    @Test func rememberedIdsAreBoundedByHistoryOldestFirst() throws {
        var e = engine(PipelineConfig(maxInFlight: 10, history: 2, dedupSeconds: 300))
        for id in ["a", "b", "c"] { _ = try e.push(PipelinePushRequest(id: id, payload: .null), now: t0) }
        for id in ["a", "b", "c"] { try e.cancel(id, now: at(1)) }
        // "a" was the oldest finished and is forgotten: pushed again, even within the window.
        #expect(try e.push(PipelinePushRequest(id: "a", payload: .null), now: at(2)).created)
        #expect(!(try e.push(PipelinePushRequest(id: "b", payload: .null), now: at(2))).created)
    }

    // MARK: - Pause

    @Test func aPausedEngineHandsOutNothingButTakesPushesAndRunsItsClocks() throws {
        var e = engine(PipelineConfig(maxInFlight: 5, ackSeconds: 10))
        try e.add("a")
        _ = try e.take(max: 1, now: t0)
        e.apply(PipelinePatch(paused: true), now: t0)
        #expect(e.paused)
        try e.add("b", at: at(1))
        _ = try e.push(PipelinePushRequest(id: "d", payload: .null, delaySeconds: 2), now: at(1))
        #expect(try e.take(max: 5, now: at(2)).isEmpty && !e.canDeliver)
        // The ack deadline and the delay run on while paused.
        e.expire(now: at(10))
        #expect(e.item("a")?.status == .ready && e.item("d")?.status == .ready)
        #expect(try e.take(max: 5, now: at(10)).isEmpty)
        _ = e.takeChanges()
        e.apply(PipelinePatch(paused: false), now: at(11))
        #expect(e.takeChanges().contains(.itemsAvailable))
        #expect(try e.take(max: 5, now: at(11)).map(\.id) == ["a", "b", "d"])
    }

    @Test func aParkedConsumerWaitsWhilePausedAndWakesOnResume() async throws {
        let clock = ManualClock()
        let p = Pipeline(name: "gifts", config: PipelineConfig(), clock: clock)
        _ = try await p.apply(PipelinePatch(paused: true))
        _ = try await p.push(PipelinePushRequest(id: "a", payload: .null))
        #expect(try await p.take(max: 1).isEmpty)
        let consumer = Task { try await p.takeWaiting(max: 1, until: clock.now().adding(seconds: 30)) }
        await PipelineFixtures.eventually { await p.waitingConsumers == 1 }
        clock.advance(by: 5)
        #expect(await p.waitingConsumers == 1)
        #expect(await p.state().paused)
        _ = try await p.apply(PipelinePatch(paused: false))
        #expect(try await consumer.value.map(\.id) == ["a"])
        #expect(await !p.state().paused)
    }

    @Test func anExtendOnTheActorPostponesTheRedelivery() async throws {
        let clock = ManualClock()
        let p = Pipeline(name: "gifts", config: PipelineConfig(ackSeconds: 10), clock: clock)
        _ = try await p.push(PipelinePushRequest(id: "a", payload: .null))
        _ = try await p.take(max: 1)
        clock.advance(by: 8)
        #expect(try await p.extend("a", ackSeconds: 10).ackDeadline == clock.now().adding(seconds: 10))
        clock.advance(by: 9)
        #expect(await p.state().inFlight == 1)
        clock.advance(by: 1)
        let s = await p.state()
        #expect(s.inFlight == 0 && s.ready == 1 && s.counts.redeliveredTotal == 1 && s.counts.extendedTotal == 1)
    }
}
