import Testing

@testable import UsherCore

/// The engine capabilities windows and pools are built on: the hold policy,
/// generated ids, the first holder, and taking a visitor back.
@Suite struct QueueEngineReuseTests {
    typealias F = QueueFixtures

    @Test func ownOverridesLetsAVisitorHoldLongerOrForEver() throws {
        var e = QueueEngine(
            name: "w", config: QueueConfig(holdSeconds: 5, idleSeconds: 0, claimSeconds: 0), createdAt: F.t0,
            holdPolicy: .ownOverrides)
        let pinned = try e.add("pinned", hold: 0)
        #expect(pinned.status == .granted && pinned.expiresAt == nil)
        try e.add("long", hold: 60)
        try e.add("plain")
        // Pinned: nothing expires however long it takes.
        e.advance(to: F.at(100_000))
        #expect(e.firstHolderView?.id == "pinned")
        _ = try e.remove(id: "pinned", now: F.at(100_000))
        let long = try e.visitor(id: "long", now: F.at(100_000))
        #expect(long.expiresAt == F.at(100_060))
        e.advance(to: F.at(100_060))
        let plain = try e.visitor(id: "plain", now: F.at(100_060))
        #expect(plain.expiresAt == F.at(100_065))
    }

    @Test func atMostResourceStillRefusesLongerOrUnlimitedHolds() throws {
        var e = F.engine(QueueConfig(holdSeconds: 5))
        var e2 = e
        #expect(
            throws: QueueError.invalid(field: "hold_seconds", message: "must be at most 5, the queue's hold_seconds")
        ) {
            try e.add("a", hold: 6)
        }
        #expect(
            throws: QueueError.invalid(
                field: "hold_seconds", message: "must be more than 0: this queue limits holds to 5 s")
        ) {
            try e2.add("a", hold: 0)
        }
    }

    @Test func serverIDsStartJustAfterTheCreationTime() throws {
        var e = QueueEngine(name: "p", config: QueueConfig(), createdAt: F.t0)
        let first = try e.add()
        let second = try e.add()
        #expect(first.id == "1767225600000001" && second.id == "1767225600000002")
    }

    @Test func removeFirstHolderFreesTheSlotAndGrantsInOneStep() throws {
        var e = F.engine()
        let none = e.removeFirstHolder(now: F.at(0))
        #expect(none == nil)
        try e.add("a")
        try e.add("b")
        _ = e.drainChanges()
        let first = e.removeFirstHolder(now: F.at(1))
        let removed = try #require(first)
        #expect(removed.id == "a" && removed.status == .released)
        #expect(e.firstHolderView?.id == "b")
        let changes = e.drainChanges()
        #expect(changes == ["a", "b"])
    }

    @Test func withdrawTakesAWaitingVisitorBackAsIfItNeverCame() throws {
        var e = F.engine(QueueConfig(capacity: 1))
        try e.add("a")
        try e.add("w")
        try e.add("x")
        let w = try e.withdraw(id: "w", now: F.at(1))
        #expect(w == nil)
        #expect(e.counts.enqueuedTotal == 2 && e.counts.waiting == 1 && e.counts.cancelledTotal == 0)
        // Reported as a change, so its long-polls learn it is gone.
        let changes = e.drainChanges()
        #expect(changes == ["w"] && e.currentView(id: "w") == nil)
        let x = try e.visitor(id: "x", now: F.at(1))
        #expect(x.position == 1)
        // The id is free again.
        let again = try e.add("w", at: 2)
        #expect(again.status == .waiting)
        // A holder is not withdrawn: it is answered as it is.
        let holder = try e.withdraw(id: "a", now: F.at(3))
        #expect(holder?.status == .granted)
        var copy = e
        #expect(throws: QueueError.notFound("visitor \"zz\"")) { try copy.withdraw(id: "zz", now: F.at(3)) }
        // Delayed visitors too, and their delay never fires.
        try e.add("d", delay: 5, at: 3)
        let d = try e.withdraw(id: "d", now: F.at(4))
        #expect(d == nil)
        e.advance(to: F.at(10))
        #expect(e.counts.delayed == 0 && e.counts.waiting == 2)
        #expect(e.counts.enqueuedTotal == e.counts.waiting + e.counts.holding + e.counts.delayed)
    }

    // MARK: - Reused slots and stale timeline entries

    @Test func aDelayedVisitorInACancelledOnesSlotKeepsItsArrival() throws {
        var e = F.engine(QueueConfig(capacity: 1, history: 0))
        try e.add("holder", hold: 1)
        try e.add("d0", delay: 3)
        try e.add("d1", delay: 3)
        _ = try e.remove(id: "d0", now: F.at(0))
        // Forgetting d0 frees its slot; d2 takes it with d0's delay end.
        try e.add("d2", delay: 3)
        let delayed = e.state(limit: 10, now: F.at(1)).delayed.map(\.id)
        #expect(delayed == ["d1", "d2"])
        #expect(try e.status("d1", at: 3) == .granted)
        #expect(e.waitingIDs(at: 3) == ["d2"])
    }

    @Test func aDelayedVisitorInAWithdrawnOnesSlotKeepsItsArrival() throws {
        var e = F.engine(QueueConfig(capacity: 1))
        try e.add("holder", hold: 1)
        try e.add("d0", delay: 3)
        try e.add("d1", delay: 3)
        // Withdrawing frees the slot at once, whatever the history.
        _ = try e.withdraw(id: "d0", now: F.at(0))
        try e.add("d2", delay: 3)
        #expect(try e.status("d1", at: 3) == .granted)
        #expect(e.waitingIDs(at: 3) == ["d2"])
    }

    // In the tests below an early "guard" deadline keeps the stale entry from
    // the top of the timeline, where it would be dropped before its slot is reused.

    @Test func aHolderInAReleasedOnesSlotExpiresInGrantOrder() throws {
        var e = F.engine(QueueConfig(capacity: 4, holdSeconds: 10, history: 1))
        try e.add("guard", hold: 1)
        try e.add("a")
        try e.add("b")
        try e.add("x")
        _ = try e.remove(id: "a", now: F.at(0))
        _ = try e.remove(id: "x", now: F.at(0))
        // Forgetting a frees its slot; c takes it with a's expiry.
        try e.add("c")
        e.advance(to: F.at(10))
        #expect(e.drainChanges() == ["guard", "b", "c"])
        // History 1 remembers the last to finish: c.
        #expect(try e.status("c", at: 10) == .expired)
        var copy = e
        #expect(throws: QueueError.notFound("visitor \"b\"")) { try copy.status("b", at: 10) }
    }

    @Test func aHolderInAnExtendedOnesSlotExpiresInGrantOrder() throws {
        var e = F.engine(QueueConfig(capacity: 4, holdSeconds: 10, history: 0))
        try e.add("guard", hold: 8)
        try e.add("a")
        try e.add("b")
        _ = try e.extend(id: "a", holdSeconds: 10, now: F.at(5))
        _ = try e.complete(id: "a", now: F.at(6))
        // Forgetting a frees its slot; c takes it with a's first expiry.
        try e.add("c", hold: 4, at: 6)
        e.advance(to: F.at(10))
        #expect(e.drainChanges() == ["guard", "b", "c"])
    }

    @Test func aHolderInAWithdrawnDelayedOnesSlotExpiresInGrantOrder() throws {
        var e = F.engine(QueueConfig(capacity: 3, holdSeconds: 10))
        try e.add("guard", hold: 1)
        try e.add("a")
        try e.add("d", delay: 10)
        _ = try e.withdraw(id: "d", now: F.at(0))
        // c takes d's slot, its expiry d's delay end.
        try e.add("c")
        e.advance(to: F.at(10))
        #expect(e.drainChanges() == ["guard", "a", "c"])
    }

    @Test func aDelayedVisitorInAReleasedHoldersSlotKeepsItsArrival() throws {
        var e = F.engine(QueueConfig(capacity: 2, holdSeconds: 10, history: 0))
        try e.add("guard", hold: 1)
        try e.add("a")
        try e.add("d0", delay: 10)
        _ = try e.remove(id: "a", now: F.at(0))
        // Forgetting a frees its slot; d1 takes it, its delay ending at a's expiry.
        try e.add("d1", delay: 10)
        #expect(e.state(limit: 10, now: F.at(1)).delayed.map(\.id) == ["d0", "d1"])
        e.advance(to: F.at(10))
        #expect(e.drainChanges() == ["d0", "d1"])
        #expect(try e.status("d1", at: 10) == .granted)
    }

    @Test func setPayloadRecordsWhatAGrantGave() throws {
        var e = F.engine()
        try e.add("a")
        let known = e.setPayload(.string("gpu-0"), of: "a")
        let unknown = e.setPayload(.null, of: "nobody")
        #expect(known && !unknown)
        #expect(e.currentView(id: "a")?.payload == .string("gpu-0"))
    }
}
