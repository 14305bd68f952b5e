import Testing

@testable import UsherCore

/// The value-type engine: ordering, in-flight limit, acks, dead list, batches.
@Suite struct PipelineEngineTests {
    let t0 = Timestamp(micros: 1_767_225_600_000_000)

    func engine(_ config: PipelineConfig = PipelineConfig()) -> PipelineEngine {
        PipelineEngine(config: config, createdAt: t0, seed: 42)
    }

    func at(_ seconds: Double) -> Timestamp { t0.adding(seconds: seconds) }

    @Test func handsOutByPriorityThenArrival() throws {
        var e = engine(PipelineConfig(maxInFlight: 10))
        try e.add("a", priority: 0)
        try e.add("b", priority: 5)
        try e.add("c", priority: 0)
        try e.add("d", priority: 5)
        #expect(e.position(of: "a") == 3)
        #expect(e.position(of: "d") == 2)
        let ids = try e.take(max: 10, now: at(1)).map(\.id)
        #expect(ids == ["b", "d", "a", "c"])
    }

    @Test func pushAnswersStatusAndPosition() throws {
        var e = engine()
        let first = try e.push(PipelinePushRequest(id: "x", payload: .int(1)), now: t0)
        #expect(first.created && first.item.status == .ready && first.position == 1)
        let delayed = try e.push(PipelinePushRequest(payload: .int(2), delaySeconds: 5), now: t0)
        #expect(delayed.item.status == .delayed && delayed.position == nil)
        #expect(delayed.item.availableAt == at(5))
        // Server-made ids count up from the creation time.
        #expect(delayed.item.id == String(t0.micros + 1))
    }

    @Test func anExistingIdReturnsTheExistingItem() throws {
        var e = engine(PipelineConfig(capacity: 1))
        _ = try e.push(PipelinePushRequest(id: "x", payload: .string("first")), now: t0)
        // Even when full: a retried request happens once.
        let again = try e.push(PipelinePushRequest(id: "x", payload: .string("second")), now: at(1))
        #expect(!again.created)
        #expect(again.item.payload == .string("first"))
        #expect(e.counts.pushedTotal == 1)
        #expect(throws: PipelineError.full(retryAfterSeconds: 1)) {
            try e.push(PipelinePushRequest(id: "y", payload: .null), now: at(1))
        }
    }

    @Test func nothingMoreIsHandedOutUntilTheInFlightItemIsConsumed() throws {
        var e = engine()
        try e.add("a")
        try e.add("b")
        let first = try e.take(max: 5, now: t0)
        #expect(first.map(\.id) == ["a"])
        #expect(try e.take(max: 5, now: at(1)).isEmpty)
        try e.consume("a", now: at(2))
        #expect(try e.take(max: 5, now: at(3)).map(\.id) == ["b"])
        #expect(e.counts.consumedTotal == 1 && e.counts.deliveredTotal == 2)
    }

    @Test func eachDeliveryGetsAFenceDeliveriesAndAnAckDeadline() throws {
        var e = engine(PipelineConfig(ackSeconds: 10))
        try e.add("a")
        let d = try #require(try e.take(max: 1, now: at(1)).first)
        #expect(d.fence == t0.micros + 1)
        #expect(d.deliveries == 1)
        #expect(d.takenAt == at(1))
        #expect(d.ackDeadline == at(11))
        #expect(e.nextDeadline() == at(11))
    }

    @Test func anAckTimeoutRedeliversToTheFrontWithDeliveriesKept() throws {
        var e = engine(PipelineConfig(ackSeconds: 10))
        try e.add("a")
        try e.add("b")
        _ = try e.take(max: 1, now: t0)
        e.expire(now: at(9.999))
        #expect(e.inFlightCount == 1)
        e.expire(now: at(10))
        #expect(e.inFlightCount == 0 && e.readyCount == 2)
        #expect(e.counts.redeliveredTotal == 1)
        let again = try #require(try e.take(max: 1, now: at(11)).first)
        #expect(again.id == "a")
        #expect(again.deliveries == 2)
        #expect(again.fence == t0.micros + 2)
        // The stale fence of the first delivery no longer consumes it.
        #expect(throws: PipelineError.notInFlight(current: "in_flight")) {
            try e.consume("a", fence: t0.micros + 1, now: at(12))
        }
        try e.consume("a", fence: t0.micros + 2, now: at(12))
    }

    @Test func ackSecondsZeroNeverRedelivers() throws {
        var e = engine(PipelineConfig(ackSeconds: 0))
        try e.add("a")
        let d = try #require(try e.take(max: 1, now: t0).first)
        #expect(d.ackDeadline == nil)
        #expect(e.nextDeadline() == nil)
        e.expire(now: at(1_000_000))
        #expect(e.inFlightCount == 1)
    }

    @Test func aShorterAckCanBeAskedNeverALongerOne() throws {
        var e = engine(PipelineConfig(ackSeconds: 10))
        try e.add("a")
        try e.add("b")
        #expect(throws: PipelineError.self) { try e.take(max: 1, ackSeconds: 0, now: t0) }
        let d = try #require(try e.take(max: 1, ackSeconds: 3, now: t0).first)
        #expect(d.ackDeadline == at(3))
        try e.consume("a", now: t0)
        #expect(try e.take(max: 1, ackSeconds: 60, now: t0).first?.ackDeadline == at(10))
    }

    @Test func afterMaxDeliveriesATimeoutMovesTheItemToTheDeadList() throws {
        var e = engine(PipelineConfig(ackSeconds: 1, maxDeliveries: 2))
        try e.add("a")
        _ = try e.take(max: 1, now: t0)
        e.expire(now: at(1))
        #expect(try e.take(max: 1, now: at(1)).first?.deliveries == 2)
        e.expire(now: at(2))
        #expect(e.readyCount == 0 && e.inFlightCount == 0 && e.deadCount == 1)
        #expect(e.counts.deadTotal == 1 && e.counts.redeliveredTotal == 1)
        let dead = try #require(e.deadItems(limit: 10).first)
        #expect(dead.status == .dead && dead.deliveries == 2 && dead.deadAt == at(2))
        #expect(throws: PipelineError.notInFlight(current: "dead")) { try e.consume("a", now: at(3)) }
    }

    @Test func afterMaxDeliveriesAReleaseMovesTheItemToTheDeadList() throws {
        var e = engine(PipelineConfig(maxDeliveries: 1))
        try e.add("a")
        _ = try e.take(max: 1, now: t0)
        let released = try e.release("a", now: at(1))
        #expect(released.status == .dead)
        #expect(e.deadCount == 1 && e.count == 0)
    }

    @Test func releaseGoesToTheFrontOfItsPriority() throws {
        var e = engine(PipelineConfig(maxInFlight: 2))
        try e.add("a")
        try e.add("b")
        try e.add("hi", priority: 1)
        _ = try e.take(max: 2, now: t0)  // hi, a
        try e.add("c")
        let r = try e.release("a", now: at(1))
        #expect(r.status == .ready && e.position(of: "a") == 1)
        try e.release("hi", now: at(2))
        // Higher priority stays ahead of a released item of lower priority.
        #expect(try e.take(max: 2, now: at(3)).map(\.id) == ["hi", "a"])
        try e.consume("hi", now: at(4))
        try e.consume("a", now: at(4))
        #expect(try e.take(max: 2, now: at(5)).map(\.id) == ["b", "c"])
    }

    @Test func releaseWithADelayComesBackToTheFrontWhenTheDelayEnds() throws {
        var e = engine()
        try e.add("a")
        try e.add("b")
        _ = try e.take(max: 1, now: t0)
        let r = try e.release("a", delaySeconds: 5, now: at(1))
        #expect(r.status == .delayed && r.availableAt == at(6))
        #expect(e.nextDeadline() == at(6))
        try e.add("c")
        e.expire(now: at(6))
        #expect(e.readyItems(limit: 10).map(\.id) == ["a", "b", "c"])
    }

    @Test func aDelayedPushJoinsTheBackWhenItsDelayEnds() throws {
        var e = engine(PipelineConfig(maxInFlight: 10))
        _ = try e.push(PipelinePushRequest(id: "late", payload: .null, delaySeconds: 2), now: t0)
        try e.add("a", at: at(1))
        #expect(try e.take(max: 10, now: at(1.5)).map(\.id) == ["a"])
        try e.add("b", at: at(1.5))
        #expect(try e.take(max: 10, now: at(2)).map(\.id) == ["b", "late"])
    }

    @Test func consumeOrReleaseOfAnItemNotInFlightIsRefused() throws {
        var e = engine()
        try e.add("a")
        #expect(throws: PipelineError.notInFlight(current: "ready")) { try e.consume("a", now: t0) }
        #expect(throws: PipelineError.notInFlight(current: "ready")) { try e.release("a", now: t0) }
        #expect(throws: PipelineError.notFound("zz")) { try e.consume("zz", now: t0) }
        _ = try e.push(PipelinePushRequest(id: "d", payload: .null, delaySeconds: 9), now: t0)
        #expect(throws: PipelineError.notInFlight(current: "delayed")) { try e.release("d", now: t0) }
    }

    @Test func aFinishedItemIsRememberedUpToHistory() throws {
        var e = engine(PipelineConfig(maxInFlight: 10, history: 2))
        try e.add("a")
        try e.add("b")
        try e.add("c")
        _ = try e.take(max: 3, now: t0)
        let before = e.storage.bytes
        let consumed = try e.consume("a", now: at(1))
        #expect(consumed.status == .consumed && consumed.payload == .string("a"))
        // The remembered record keeps no payload: it costs only its id.
        #expect(e.storage.bytes == before - PipelineEngine.storedBytes(consumed) + StorageBudget.cost("a"))
        // A retried consume or release learns what happened.
        #expect(throws: PipelineError.notInFlight(current: "consumed")) { try e.consume("a", now: at(2)) }
        #expect(throws: PipelineError.notInFlight(current: "consumed")) { try e.release("a", now: at(2)) }
        let remembered = try #require(e.item("a"))
        #expect(remembered.status == .consumed && remembered.payload == .null && remembered.deliveries == 1)
        // A push of its id answers it, needing no room; a cancel answers it as it is.
        let again = try e.push(PipelinePushRequest(id: "a", payload: .int(9)), now: at(2))
        #expect(!again.created && again.item.status == .consumed)
        #expect(try e.cancel("a", now: at(2)).status == .consumed)
        #expect(e.counts.pushedTotal == 3 && e.counts.cancelledTotal == 0)
        // Past `history`, the oldest is forgotten.
        try e.consume("b", now: at(3))
        try e.release("c", now: at(3))
        try e.cancel("c", now: at(3))
        #expect(e.item("a") == nil && e.item("b")?.status == .consumed && e.item("c")?.status == .cancelled)
        #expect(throws: PipelineError.notFound("a")) { try e.consume("a", now: at(4)) }
        #expect(throws: PipelineError.notInFlight(current: "cancelled")) { try e.consume("c", now: at(4)) }
        // A smaller history forgets at once and gives the bytes back.
        e.apply(PipelinePatch(history: 0), now: at(5))
        #expect(e.item("b") == nil && e.item("c") == nil && e.storage.bytes == 0)
    }

    @Test func cancelRemovesReadyDelayedAndDeadItemsButNotInFlightOnes() throws {
        var e = engine(PipelineConfig(maxDeliveries: 1))
        try e.add("a")
        try e.add("b")
        _ = try e.push(PipelinePushRequest(id: "d", payload: .null, delaySeconds: 9), now: t0)
        _ = try e.take(max: 1, now: t0)
        #expect(throws: PipelineError.inFlight) { try e.cancel("a", now: t0) }
        try e.cancel("b", now: t0)
        try e.cancel("d", now: t0)
        try e.release("a", now: t0)  // dead after one delivery
        try e.cancel("a", now: t0)
        #expect(e.count == 0 && e.deadCount == 0 && e.counts.cancelledTotal == 3)
        // A cancelled item is remembered: cancelling it again answers it as it is.
        #expect(try e.cancel("b", now: t0).status == .cancelled && e.counts.cancelledTotal == 3)
        #expect(throws: PipelineError.notFound("zz")) { try e.cancel("zz", now: t0) }
    }

    @Test func aBatchIsAllOrNothing() throws {
        var e = engine(PipelineConfig(capacity: 3))
        try e.add("a")
        let batch = ["x", "y", "z"].map { PipelinePushRequest(id: $0, payload: .string($0)) }
        #expect(throws: PipelineError.full(retryAfterSeconds: 1)) { try e.pushBatch(batch, now: t0) }
        #expect(e.count == 1 && e.item("x") == nil)
        // Ids already held need no room.
        let ok = try e.pushBatch([PipelinePushRequest(id: "a", payload: .null)] + batch.prefix(2), now: t0)
        #expect(ok.map(\.created) == [false, true, true])
        #expect(e.count == 3)
    }

    @Test func aBatchLargerThanTheCapacityIsInvalid() throws {
        var e = engine(PipelineConfig(capacity: 2))
        let batch = (0..<3).map { PipelinePushRequest(payload: .int($0)) }
        #expect(
            throws: PipelineError.invalid(field: "items", message: "the batch has 3 items, more than the capacity 2")
        ) {
            try e.pushBatch(batch, now: t0)
        }
        #expect(e.count == 0)
    }

    @Test func aBadEntryFailsTheWholeBatch() throws {
        var e = engine()
        let batch = [PipelinePushRequest(payload: .int(1)), PipelinePushRequest(payload: .int(2), priority: 2_000_000)]
        #expect(throws: PipelineError.self) { try e.pushBatch(batch, now: t0) }
        #expect(e.count == 0)
    }

    @Test func redriveMovesDeadItemsBackOldestFirstWhileThereIsRoom() throws {
        var e = engine(PipelineConfig(capacity: 3, maxInFlight: 3, maxDeliveries: 1))
        for id in ["a", "b", "c"] { try e.add(id) }
        _ = try e.take(max: 3, now: t0)
        for id in ["b", "a", "c"] { try e.release(id, now: at(1)) }
        #expect(e.deadItems(limit: 10).map(\.id) == ["b", "a", "c"])
        try e.add("n1", at: at(2))
        try e.add("n2", at: at(2))
        #expect(e.redrive(now: at(3)) == 1)
        let back = try #require(e.item("b"))
        #expect(back.status == .ready && back.deliveries == 0 && back.fence == nil)
        #expect(e.readyItems(limit: 10).map(\.id) == ["n1", "n2", "b"])
        #expect(e.deadItems(limit: 10).map(\.id) == ["a", "c"])
        try e.cancel("n1", now: at(4))
        try e.cancel("n2", now: at(4))
        #expect(e.redrive(now: at(5)) == 2)
        #expect(e.deadCount == 0)
    }

    @Test func theDeadListKeepsAtMostCapacityItemsDroppingTheOldest() throws {
        var e = engine(PipelineConfig(capacity: 2, maxInFlight: 2, maxDeliveries: 1))
        for round in 0..<3 {
            try e.add("a\(round)")
            _ = try e.take(max: 1, now: t0)
            try e.release("a\(round)", now: t0)
        }
        #expect(e.deadItems(limit: 10).map(\.id) == ["a1", "a2"])
        #expect(e.counts.deadTotal == 3 && e.counts.deadDroppedTotal == 1)
        e.apply(PipelinePatch(capacity: 1), now: t0)
        #expect(e.deadItems(limit: 10).map(\.id) == ["a2"])
    }

    @Test func patchingTakesEffectAtOnce() throws {
        var e = engine(PipelineConfig(capacity: 1))
        try e.add("a")
        #expect(!e.hasRoom())
        _ = e.takeChanges()
        e.apply(PipelinePatch(capacity: 2, maxInFlight: 2), now: t0)
        #expect(e.takeChanges() == [.itemsAvailable, .roomAvailable])
        try e.add("b")
        #expect(try e.take(max: 5, now: t0).count == 2)
    }

    @Test func changesTellTheManagerWhatToWake() throws {
        var e = engine()
        try e.add("a")
        #expect(e.takeChanges() == .itemsAvailable)
        _ = try e.take(max: 1, now: t0)
        #expect(e.takeChanges().isEmpty)
        try e.consume("a", now: t0)
        #expect(e.takeChanges() == [.itemsAvailable, .roomAvailable])
    }

    @Test func manyItemsStayInOrderAndStaleTimersAreCompacted() throws {
        var e = engine(PipelineConfig(capacity: 10_000, maxInFlight: 10_000, ackSeconds: 5))
        for i in 0..<5000 { try e.add("i\(i)", priority: i % 3) }
        let all = try e.take(max: 10_000, now: t0)
        #expect(all.count == 5000)
        #expect(all.prefix(3).map(\.id) == ["i2", "i5", "i8"])
        for d in all { try e.consume(d.id, now: t0) }
        #expect(e.nextDeadline() == nil)
    }
}

extension PipelineEngine {
    /// Pushes a ready item with an id.
    mutating func add(_ id: String, priority: Int = 0, at now: Timestamp? = nil) throws(PipelineError) {
        _ = try push(
            PipelinePushRequest(id: id, payload: .string(id), priority: priority),
            now: now ?? Timestamp(micros: 1_767_225_600_000_000))
    }
}
