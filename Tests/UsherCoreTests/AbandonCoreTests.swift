import Testing

@testable import Locking
@testable import UsherCore

/// A client that stops showing up keeps nothing: a waiting visitor not heard
/// of for `idle_seconds` is cancelled (`abandoned`), and a grant made while
/// no client waited on it, not claimed within `claim_seconds`, is released
/// (`unclaimed`). On injected times and a `ManualClock`.
@Suite struct AbandonCoreTests {
    typealias F = QueueFixtures
    let clock = ManualClock()

    func later(_ seconds: Double) -> Timestamp { clock.now().adding(seconds: seconds) }

    static let config = QueueConfig(capacity: 1, holdSeconds: 60, idleSeconds: 30, claimSeconds: 10)
    /// The same with no hold limit: the first holder stays while idle checks run.
    static let held = QueueConfig(capacity: 1, holdSeconds: 0, idleSeconds: 30, claimSeconds: 10)

    // MARK: - The engine

    @Test func aWaitingVisitorNotHeardOfIsAbandoned() throws {
        var e = F.engine(Self.config)
        try e.add("a")
        try e.add("b")
        e.advance(to: F.at(29.999))
        #expect(e.counts.waiting == 1)
        e.advance(to: F.at(30))
        let b = try e.visitor(id: "b", now: F.at(30))
        #expect(b.status == .cancelled && b.reason == "abandoned" && b.finishedAt == F.at(30))
        #expect(e.counts.cancelledTotal == 1 && e.counts.abandonedTotal == 1)
        // The holder is not idle-checked: its hold bounds it.
        #expect(try e.status("a", at: 59) == .granted)
    }

    @Test func everyCallNamingItKeepsItsPlace() throws {
        var e = F.engine(Self.held)
        try e.add("a")
        try e.add("b")
        _ = try e.visitor(id: "b", now: F.at(20))  // a GET
        e.advance(to: F.at(44))
        #expect(e.counts.waiting == 1)
        try e.add("b", at: 45)  // a retried POST with the same id
        e.advance(to: F.at(74.999))
        #expect(e.counts.waiting == 1)
        e.advance(to: F.at(75))
        #expect(e.counts.abandonedTotal == 1)
    }

    @Test func aParkedWaitCountsAsHeardUntilItEnds() throws {
        var e = F.engine(Self.held)
        try e.add("a")
        try e.add("b")
        e.hear(id: "b", until: F.at(25))
        e.advance(to: F.at(54.999))
        #expect(e.counts.waiting == 1)
        e.advance(to: F.at(55))
        #expect(e.counts.abandonedTotal == 1)
    }

    @Test func aDelayIsNotSilence() throws {
        var e = F.engine(QueueConfig(capacity: 1, holdSeconds: 0, idleSeconds: 30, claimSeconds: 10))
        try e.add("a")
        try e.add("b", delay: 40)
        // Idle time counts from its line entry at 40 s.
        e.advance(to: F.at(69.999))
        #expect(e.counts.waiting == 1)
        e.advance(to: F.at(70))
        #expect(try e.visitor(id: "b", now: F.at(70)).reason == "abandoned")
    }

    @Test func aGrantNobodyWaitedOnMustBeClaimed() throws {
        var e = F.engine(Self.config)
        try e.add("a")
        try e.add("b")
        _ = try e.complete(id: "a", now: F.at(1))
        #expect(try e.visitor(id: "b", now: F.at(1)).status == .granted)  // this GET claims it
        try e.add("c", at: 2)
        _ = try e.complete(id: "b", now: F.at(3))  // c is granted with nobody on it
        e.advance(to: F.at(12.999))
        #expect(e.counts.holding == 1)
        e.advance(to: F.at(13))
        let c = try e.visitor(id: "c", now: F.at(13))
        #expect(c.status == .released && c.reason == "unclaimed" && c.finishedAt == F.at(13))
        #expect(e.counts.releasedTotal == 1 && e.counts.unclaimedTotal == 1 && e.counts.holding == 0)
    }

    @Test func theSlotOfAnUnclaimedGrantPassesOn() throws {
        var e = F.engine(Self.config)
        try e.add("a")
        try e.add("b")
        try e.add("c", at: 5)
        _ = try e.complete(id: "a", now: F.at(6))  // b: granted, unclaimed
        _ = try e.visitor(id: "c", now: F.at(15))  // c keeps its place
        e.advance(to: F.at(16))
        #expect(try e.visitor(id: "b", now: F.at(16)).reason == "unclaimed")
        // c was granted in the same step, with nobody on it either: its own claim time starts now.
        e.advance(to: F.at(25.999))
        #expect(try e.status("c", at: 25.999) == .granted)
    }

    @Test func aGrantInItsOwnEnqueueIsClaimed() throws {
        var e = F.engine(Self.config)
        try e.add("a")
        e.advance(to: F.at(59))
        #expect(try e.status("a", at: 59) == .granted)
    }

    @Test func anExtendClaims() throws {
        var e = F.engine(Self.config)
        try e.add("a")
        try e.add("b")
        _ = try e.complete(id: "a", now: F.at(1))
        _ = try e.extend(id: "b", holdSeconds: nil, now: F.at(5))
        e.advance(to: F.at(60))
        #expect(e.counts.unclaimedTotal == 0 && e.counts.holding == 1)
    }

    @Test func zeroMeansNever() throws {
        var e = F.engine(QueueConfig(capacity: 1, holdSeconds: 0, idleSeconds: 0, claimSeconds: 0))
        try e.add("a")
        try e.add("b")
        try e.add("c")
        e.advance(to: F.at(100_000))
        _ = try e.complete(id: "a", now: F.at(100_000))
        e.advance(to: F.at(200_000))
        #expect(e.counts.waiting == 1 && e.counts.holding == 1)
        #expect(e.counts.abandonedTotal == 0 && e.counts.unclaimedTotal == 0)
    }

    @Test func patchingChecksOnLaterAndOff() throws {
        var e = F.engine(QueueConfig(capacity: 1, holdSeconds: 0, idleSeconds: 0, claimSeconds: 0))
        try e.add("a")
        try e.add("b")
        e.apply(QueuePatch(idleSeconds: 5), now: F.at(100))
        e.advance(to: F.at(104.999))
        #expect(e.counts.waiting == 1)
        e.advance(to: F.at(105))
        #expect(e.counts.abandonedTotal == 1)
        try e.add("c", at: 106)
        e.apply(QueuePatch(claimSeconds: 2), now: F.at(107))
        _ = try e.complete(id: "a", now: F.at(107))  // c granted, unclaimed
        e.apply(QueuePatch(claimSeconds: 0), now: F.at(108))
        e.advance(to: F.at(200))
        #expect(e.counts.unclaimedTotal == 0 && e.counts.holding == 1)
    }

    @Test func staleChecksStayFewUnderLongPollLoops() throws {
        var e = F.engine(Self.held)
        try e.add("a")
        for i in 0..<200 { try e.add("w\(i)") }
        // Each waiter polls every 25 s for a long time: the timeline stays bounded.
        for round in 1...20 {
            for i in 0..<200 { _ = try e.visitor(id: "w\(i)", now: F.at(Double(round) * 25)) }
            e.advance(to: F.at(Double(round) * 25))
        }
        #expect(e.counts.waiting == 200 && e.counts.abandonedTotal == 0)
        #expect(e.timeline.count <= 64 + 2 * (2 + 200))
    }

    // MARK: - The queue's long-polls

    func queue(events: EventLog? = nil) -> VisitorQueue {
        VisitorQueue(name: "printer", config: Self.config, clock: clock, events: events)
    }

    @Test func aParkedLongPollIsHeardAndClaimsTheGrant() async throws {
        let q = queue()
        _ = try await q.enqueue(VisitorRequest(id: "a"))
        _ = try await q.enqueue(VisitorRequest(id: "b"))
        let poster = Task { try await q.waitWhileWaiting(id: "b", until: later(30)) }
        await F.eventually { await q.waiterCount == 1 }
        clock.advance(by: 29)
        #expect(await q.counts.waiting == 1)
        _ = try await q.complete(id: "a")
        #expect(try await poster.value.status == .granted)
        clock.advance(by: 40)
        #expect(try await q.visitor(id: "b").status == .granted)
        #expect(await q.counts.unclaimedTotal == 0)
    }

    /// The README's job-3: its `?wait=2` ended with it still waiting, its
    /// script is gone; the slot it is granted later passes on after `claim_seconds`.
    @Test func aVisitorLeftInLineIsGrantedThenReleasedUnclaimed() async throws {
        let events = EventLog(clock: clock)
        let seen = record(events)
        let q = queue(events: events)
        _ = try await q.enqueue(VisitorRequest(id: "job-2"))
        _ = try await q.enqueue(VisitorRequest(id: "job-3"))
        let poster = Task { try await q.waitWhileWaiting(id: "job-3", until: later(2)) }
        await F.eventually { await q.waiterCount == 1 }
        clock.advance(by: 2)
        #expect(try await poster.value.status == .waiting)
        clock.advance(by: 1)
        _ = try await q.remove(id: "job-2")
        clock.advance(by: 9.9)
        #expect(await q.counts.holding == 1)
        clock.advance(by: 0.1)
        await F.eventually { await q.counts.holding == 0 }
        #expect(seen.list.withLock { $0 }.contains(#"released:"unclaimed""#))
    }

    @Test func onDisconnectKeepStillEndsInAbandonment() async throws {
        let events = EventLog(clock: clock)
        let seen = record(events)
        let q = queue(events: events)
        _ = try await q.enqueue(VisitorRequest(id: "a"))
        _ = try await q.enqueue(VisitorRequest(id: "b"))
        let keeping = Task { try await q.waitWhileWaiting(id: "b", until: later(20)) }
        await F.eventually { await q.waiterCount == 1 }
        keeping.cancel()
        #expect(try await keeping.value.status == .waiting)
        // Heard of until its wait would have ended (20 s), then 30 s of silence.
        clock.advance(by: 49.9)
        #expect(await q.counts.waiting == 1)
        clock.advance(by: 0.1)
        await F.eventually { await q.counts.waiting == 0 }
        #expect(seen.list.withLock { $0 }.contains(#"cancelled:"abandoned""#))
    }
}
