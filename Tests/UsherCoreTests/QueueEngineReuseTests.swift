import Testing

@testable import UsherCore

/// The engine capabilities windows and pools are built on: the hold policy,
/// generated ids, the first holder, and taking a visitor back.
@Suite struct QueueEngineReuseTests {
    typealias F = QueueFixtures

    @Test func ownOverridesLetsAVisitorHoldLongerOrForEver() throws {
        var e = QueueEngine(name: "w", config: QueueConfig(holdSeconds: 5), createdAt: F.t0, holdPolicy: .ownOverrides)
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

    @Test func setPayloadRecordsWhatAGrantGave() throws {
        var e = F.engine()
        try e.add("a")
        let known = e.setPayload(.string("gpu-0"), of: "a")
        let unknown = e.setPayload(.null, of: "nobody")
        #expect(known && !unknown)
        #expect(e.currentView(id: "a")?.payload == .string("gpu-0"))
    }
}
