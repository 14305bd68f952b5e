import TestSupport
import Testing

@testable import UsherCore

/// The queue engine with explicit timestamps: order, capacity, holds, endings.
@Suite struct QueueEngineTests {
    typealias F = QueueFixtures

    @Test func grantsInArrivalOrderWithinAPriority() throws {
        var e = F.engine()
        #expect(try e.add("a").status == .granted)
        try e.add("b", at: 1)
        try e.add("c", at: 2)
        try e.add("d", at: 3)
        #expect(e.waitingIDs(at: 3) == ["b", "c", "d"])
        #expect(try e.visitor(id: "c", now: F.at(3)).position == 2)
        _ = try e.complete(id: "a", now: F.at(4))
        #expect(e.holderIDs(at: 4) == ["b"])
        #expect(e.waitingIDs(at: 4) == ["c", "d"])
        #expect(e.balanced)
    }

    @Test func higherPriorityIsGrantedFirstThenFIFO() throws {
        var e = F.engine()
        try e.add("holder")
        try e.add("low", priority: -1)
        try e.add("n1")
        try e.add("high", priority: 5)
        try e.add("n2")
        try e.add("high2", priority: 5)
        #expect(e.waitingIDs() == ["high", "high2", "n1", "n2", "low"])
        var granted: [String] = []
        var holder = "holder"
        for i in 1...5 {
            _ = try e.complete(id: holder, now: F.at(Double(i)))
            holder = e.holderIDs(at: Double(i))[0]
            granted.append(holder)
        }
        #expect(granted == ["high", "high2", "n1", "n2", "low"])
    }

    @Test func capacityZeroClosesRaisingGrantsAtOnceLoweringTakesNothing() throws {
        var e = F.engine(QueueConfig(capacity: 0))
        try e.add("a")
        try e.add("b")
        try e.add("c")
        #expect(e.counts.holding == 0)
        #expect(try e.visitor(id: "a", now: F.at(0)).estimatedWaitSeconds == nil)
        e.apply(QueuePatch(capacity: 2), now: F.at(1))
        #expect(e.drainChanges().sorted() == ["a", "b"])
        #expect(e.holderIDs(at: 1) == ["a", "b"])
        e.apply(QueuePatch(capacity: 1), now: F.at(2))
        #expect(e.holderIDs(at: 2) == ["a", "b"])  // nobody loses a slot
        _ = try e.complete(id: "a", now: F.at(3))
        #expect(try e.status("c", at: 3) == .waiting)  // 1 holder = new capacity
        _ = try e.complete(id: "b", now: F.at(4))
        #expect(try e.status("c", at: 4) == .granted)
    }

    @Test func holdsExpireAndTheSlotPassesOn() throws {
        var e = F.engine(QueueConfig(holdSeconds: 10))
        let a = try e.add("a")
        #expect(a.expiresAt == F.at(10))
        try e.add("b", hold: 3, at: 1)
        #expect(e.nextDeadline == F.at(10))
        #expect(try e.status("a", at: 9.999) == .granted)
        let b = try e.visitor(id: "b", now: F.at(10))
        #expect(b.status == .granted)
        #expect(b.grantedAt == F.at(10))
        #expect(b.expiresAt == F.at(13))  // its own, shorter hold
        let gone = try e.visitor(id: "a", now: F.at(10))
        #expect(gone.status == .expired)
        #expect(gone.finishedAt == F.at(10))
        #expect(throws: QueueError.notGranted(current: .expired)) { try e.complete(id: "a", now: F.at(11)) }
        #expect(e.counts.expiredTotal == 1)
    }

    @Test func lateProcessingExpiresAtTheDeadlineAndGrantsAtNow() throws {
        var e = F.engine(QueueConfig(holdSeconds: 5))
        try e.add("a")
        try e.add("b")
        try e.add("c")
        // Nothing happened between 0 and 12: a expired at 5, b is granted at 12 (not 5).
        e.advance(to: F.at(12))
        let a = try e.visitor(id: "a", now: F.at(12))
        let b = try e.visitor(id: "b", now: F.at(12))
        #expect(a.finishedAt == F.at(5))
        #expect(b.grantedAt == F.at(12))
        #expect(b.expiresAt == F.at(17))
        #expect(try e.status("c", at: 12) == .waiting)
    }

    @Test func holdLimitsOnRequestsAndExtends() throws {
        var e = F.engine(QueueConfig(holdSeconds: 30))
        #expect(throws: QueueError.self) { try e.add(hold: 31) }
        #expect(throws: QueueError.self) { try e.add(hold: 0) }
        try e.add("a", hold: 30)
        var noLimit = F.engine(QueueConfig(holdSeconds: 0))
        let v = try noLimit.add("x", hold: 0)
        #expect(v.expiresAt == nil)
        let w = try noLimit.add("y", hold: 2)
        #expect(w.status == .waiting)
        _ = try noLimit.complete(id: "x", now: F.at(1))
        #expect(try noLimit.visitor(id: "y", now: F.at(1)).expiresAt == F.at(3))
    }

    @Test func extendMovesTheExpiryFromNow() throws {
        var e = F.engine(QueueConfig(holdSeconds: 10))
        try e.add("a", hold: 4)
        try e.add("b")
        var a = try e.extend(id: "a", holdSeconds: nil, now: F.at(3))
        #expect(a.expiresAt == F.at(7))  // its own hold again
        a = try e.extend(id: "a", holdSeconds: 10, now: F.at(6))
        #expect(a.expiresAt == F.at(16))
        #expect(throws: QueueError.self) { try e.extend(id: "a", holdSeconds: 11, now: F.at(6)) }
        #expect(throws: QueueError.notGranted(current: .waiting)) {
            try e.extend(id: "b", holdSeconds: nil, now: F.at(6))
        }
        #expect(try e.status("a", at: 15.9) == .granted)  // the old expiry at 7 no longer applies
        #expect(try e.status("a", at: 16) == .expired)
        #expect(try e.status("b", at: 16) == .granted)
        #expect(throws: QueueError.notFound("visitor \"zz\"")) {
            try e.extend(id: "zz", holdSeconds: nil, now: F.at(16))
        }
    }

    @Test func completeAndRemoveInEveryStatus() throws {
        var e = F.engine()
        try e.add("a")
        try e.add("b")
        try e.add("c", delay: 5)
        #expect(throws: QueueError.notGranted(current: .waiting)) { try e.complete(id: "b", now: F.at(0)) }
        #expect(throws: QueueError.notGranted(current: .delayed)) { try e.complete(id: "c", now: F.at(0)) }
        let c = try e.remove(id: "c", now: F.at(1))
        #expect(c.status == .cancelled)
        #expect(c.reason == "client")
        #expect(try e.remove(id: "b", now: F.at(1)).status == .cancelled)
        try e.add("d")
        let a = try e.remove(id: "a", byClient: true, now: F.at(2))
        #expect(a.status == .released && a.reason == "client")
        let d = try e.remove(id: "d", now: F.at(2))  // granted in a's place; not by a client: no reason
        #expect(d.status == .released && d.reason == nil)
        #expect(try e.remove(id: "a", now: F.at(3)) == a)  // finished: returned as it is
        #expect(throws: QueueError.notGranted(current: .released)) { try e.complete(id: "a", now: F.at(3)) }
        #expect(throws: QueueError.notFound("visitor \"nobody\"")) { try e.remove(id: "nobody", now: F.at(3)) }
        #expect(e.counts.cancelledTotal == 2 && e.counts.releasedTotal == 2)
        #expect(e.nextDeadline == nil)  // the cancelled delay left no live deadline
        #expect(e.balanced)
    }

    @Test func delayedVisitorsEnterTheLineWhenTheDelayEnds() throws {
        var e = F.engine()
        try e.add("h")
        let d = try e.add("d", delay: 5)
        #expect(d.status == .delayed && d.position == nil)
        try e.add("w", at: 1)
        #expect(e.counts.delayed == 1 && e.counts.waiting == 1)
        #expect(e.nextDeadline == F.at(5))
        #expect(e.waitingIDs(at: 5) == ["w", "d"])  // arrival = entering the line
        #expect(e.counts.delayed == 0)
        // A delayed visitor granted at once when its delay ends: one change.
        var free = F.engine()
        try free.add("x", delay: 2)
        free.advance(to: F.at(2))
        #expect(free.drainChanges() == ["x"])
        #expect(try free.status("x", at: 2) == .granted)
    }

    @Test func delaysEndingTogetherKeepTheirArrivalOrder() throws {
        var e = F.engine(QueueConfig(capacity: 0))
        for id in ["d1", "d2", "d3"] { try e.add(id, delay: 3) }
        #expect(e.waitingIDs(at: 3) == ["d1", "d2", "d3"])
    }

    @Test func fencesStartAtCreationAndGrowByOnePerGrant() throws {
        var e = F.engine(QueueConfig(capacity: 2))
        var fences: [Int64] = []
        for i in 0..<6 { try e.add("v\(i)") }
        for i in 0..<6 {
            let v = try e.visitor(id: "v\(i)", now: F.at(Double(i)))
            if let f = v.fence { fences.append(f) }
            if v.status == .granted { _ = try e.complete(id: "v\(i)", now: F.at(Double(i))) }
        }
        let base = F.t0.micros
        #expect(fences == (0..<Int64(6)).map { base + $0 })
    }

    @Test func anExistingIdReturnsTheExistingVisitor() throws {
        var e = F.engine(QueueConfig(history: 2))
        let first = try e.enqueue(VisitorRequest(id: "job-1", key: "k"), now: F.at(0))
        #expect(first.created)
        let again = try e.enqueue(VisitorRequest(id: "job-1", key: "other", priority: 9), now: F.at(1))
        #expect(!again.created)
        #expect(again.view.key == "k")
        _ = try e.complete(id: "job-1", now: F.at(2))
        let finished = try e.enqueue(VisitorRequest(id: "job-1"), now: F.at(3))
        #expect(!finished.created && finished.view.status == .completed)
        #expect(e.counts.enqueuedTotal == 1)
    }

    @Test func serverIdsFollowTheClockInOrderAndSkipClientIds() throws {
        var e = F.engine(QueueConfig(capacity: 0))
        let taken = IDGenerator.format(F.t0.micros + 2)
        try e.add(taken)
        // 40 at one instant: one µs apart from just after the creation time.
        let ids = try (0..<40).map { _ in try e.add().id }
        #expect(ids.first == "1767225600000001")
        #expect(!ids.contains(taken))
        #expect(ids.last == IDGenerator.format(F.t0.micros + 41))
        #expect(Set(ids).count == 40 && ids == ids.sorted())
        #expect(ids.allSatisfy { Names.isValid($0) && $0.utf8.count == IDGenerator.length })
        // Later: the clock's µs.
        #expect(try e.add(at: 5).id == IDGenerator.format(F.at(5).micros))
    }

    @Test func aQueueCreatedAgainNeverRepeatsAnId() throws {
        var first = F.engine(QueueConfig(capacity: 0))
        let before = try (0..<1000).map { _ in try first.add().id }
        var again = QueueEngine(name: "q", config: QueueConfig(capacity: 0), createdAt: F.at(0.5))
        let after = try (0..<1000).map { _ in try again.add(at: 0.5).id }
        #expect(Set(before).isDisjoint(with: after))
        #expect(before.last! < after.first!)
    }

    @Test func maxWaitingCountsDelayedVisitorsButNotImmediateGrants() throws {
        var e = F.engine(QueueConfig(maxWaiting: 2, holdSeconds: 20))
        try e.add("holder")  // granted at once: needs no room
        try e.add("w1")
        try e.add("d1", delay: 10)
        #expect(throws: QueueError.full(retryAfterSeconds: 20)) { try e.add("w2") }
        #expect(throws: QueueError.self) { try e.add("d2", delay: 1) }
        #expect(e.counts.enqueuedTotal == 3)
        _ = try e.remove(id: "d1", now: F.at(1))
        try e.add("w2", at: 1)
        #expect(e.counts.waiting == 2)
    }

    @Test func aVisitorThatMergesOrCancelsNeedsNoRoom() throws {
        var e = F.engine(QueueConfig(maxWaiting: 1, opposites: [["like", "unlike"]]))
        try e.add("h")
        try e.add("w", key: "k", action: "like")  // the line is now full
        #expect(throws: QueueError.self) { try e.add("x", key: "k2") }
        #expect(try e.add("dup", key: "k", action: "like").status == .merged)
        #expect(try e.add("opp", key: "k", action: "unlike").status == .cancelled)
        #expect(e.counts.waiting == 0)
    }

    @Test func retryAfterFollowsTheMeanHoldPerSlot() throws {
        var e = F.engine(QueueConfig(capacity: 2, maxWaiting: 0, holdSeconds: 30))
        try e.add("a")
        try e.add("b")
        #expect(throws: QueueError.full(retryAfterSeconds: 15)) { try e.add("c") }
        _ = try e.complete(id: "a", now: F.at(4))
        try e.add("c", at: 4)
        _ = try e.complete(id: "b", now: F.at(4))  // holds: 4 s and 4 s
        try e.add("d", at: 4)
        #expect(throws: QueueError.full(retryAfterSeconds: 2)) { try e.add("e", at: 4) }
    }

    @Test func estimatedWaitFromTheHoldersExpiries() throws {
        var e = F.engine(QueueConfig(capacity: 2, holdSeconds: 60, idleSeconds: 0, claimSeconds: 0))
        try e.add("a")
        try e.add("b")
        try e.add("c")
        try e.add("d")
        try e.add("f")
        // a and b expire at 60; then one mean hold (hold_seconds before any finished).
        #expect(try e.visitor(id: "c", now: F.at(0)).estimatedWaitSeconds == 60)
        #expect(try e.visitor(id: "f", now: F.at(0)).estimatedWaitSeconds == 120)
        _ = try e.complete(id: "a", now: F.at(10))  // 10 s
        _ = try e.complete(id: "b", now: F.at(20))  // 20 s
        let f = try e.visitor(id: "f", now: F.at(20))
        #expect(f.position == 1)
        #expect(f.estimatedWaitSeconds == 50)  // c, granted at 10, expires at 70
        #expect(try e.add("g", at: 20).estimatedWaitSeconds == 60)  // d's expiry at 80
        #expect(try e.add("h", at: 20).estimatedWaitSeconds == 65)  // 50 + mean 15 s
        var unknown = F.engine(QueueConfig(holdSeconds: 0))
        try unknown.add("x")
        #expect(try unknown.add("y").estimatedWaitSeconds == nil)
    }

    @Test func historyKeepsOnlyTheLastFinishedVisitors() throws {
        var e = F.engine(QueueConfig(holdSeconds: 0, history: 3))
        for i in 0..<10 {
            try e.add("v\(i)", at: Double(i))
            _ = try e.complete(id: "v\(i)", now: F.at(Double(i)))
        }
        _ = e.state(limit: 0, now: F.at(10))
        for i in 0..<7 { #expect(throws: QueueError.notFound("visitor \"v\(i)\"")) { try e.status("v\(i)", at: 10) } }
        for i in 7..<10 { #expect(try e.status("v\(i)", at: 10) == .completed) }
        // A forgotten client id can be used again.
        #expect(try e.enqueue(VisitorRequest(id: "v0"), now: F.at(11)).created)
        // Storage is reused rather than grown.
        #expect(e.records.count <= 5)
        // history 0: the answer to the finishing request still shows the visitor.
        var none = F.engine(QueueConfig(history: 0))
        try none.add("a")
        #expect(try none.complete(id: "a", now: F.at(1)).status == .completed)
        #expect(throws: QueueError.self) { try none.status("a", at: 2) }
    }

    @Test func changesAreReportedOncePerOperation() throws {
        var e = F.engine(QueueConfig(holdSeconds: 5))
        try e.add("a")
        try e.add("b")
        try e.add("c", delay: 1)
        _ = e.drainChanges()
        e.advance(to: F.at(5))  // c enters the line at 1; a expires at 5 and b is granted
        #expect(e.drainChanges().sorted() == ["a", "b", "c"])
        #expect(e.drainChanges().isEmpty)
        _ = try e.visitor(id: "a", now: F.at(6))
        #expect(e.drainChanges().isEmpty)
    }

    @Test func staleDeadlinesAreCompactedAway() throws {
        var e = F.engine(QueueConfig(holdSeconds: 100))
        try e.add("a")
        for i in 0..<10_000 { _ = try e.extend(id: "a", holdSeconds: 100, now: F.at(Double(i) / 100)) }
        #expect(e.timeline.count < 100)
        #expect(e.nextDeadline == F.at(99.99 + 100))
    }

    @Test func stateListsHoldersAndTheHeadOfTheLine() throws {
        var e = F.engine(QueueConfig(capacity: 2))
        for i in 0..<10 { try e.add("v\(i)", priority: i % 3) }
        // Holders count towards the limit.
        let s = e.state(limit: 5, now: F.at(1))
        #expect(s.holding.map(\.id) == ["v0", "v1"])
        #expect(s.waiting.map(\.id) == ["v2", "v5", "v8"])
        #expect(s.waiting.map(\.position) == [1, 2, 3])
        #expect(s.counts.waiting == 8 && s.counts.holding == 2)
        #expect(e.oldestWaitingSince == F.at(0))
    }
}

/// The first page's `delayed`: the next to enter the line first, read from
/// the deadline heap among hold expiries and stale entries.
@Suite struct QueueDelayedListTests {
    typealias F = QueueFixtures

    @Test func delayedVisitorsAreListedInTheOrderTheirDelaysEnd() throws {
        var e = F.engine(QueueConfig(capacity: 3, holdSeconds: 500))
        var seed: UInt64 = 42
        func next(_ n: Int) -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(seed >> 33) % n
        }
        var expected: [(end: Double, arrival: Int, id: String)] = []
        for i in 0..<300 {
            if i % 7 == 0 {
                try e.add("h\(i)", hold: Double(1 + next(400)))  // holders and waiting visitors
                continue
            }
            let delay = Double(1 + next(60))  // many equal ends: arrival order breaks the tie
            try e.add("d\(i)", delay: delay)
            expected.append((delay, i, "d\(i)"))
        }
        // Stale entries: cancelled delays and finished holds stay in the heap.
        for i in stride(from: 1, to: 300, by: 11) where i % 7 != 0 {
            _ = try e.remove(id: "d\(i)", now: F.at(0))
            expected.removeAll { $0.id == "d\(i)" }
        }
        _ = try e.complete(id: "h0", now: F.at(0))
        let order = expected.sorted { ($0.end, $0.arrival) < ($1.end, $1.arrival) }.map(\.id)
        for limit in [0, 1, 10, 1000] {
            #expect(e.state(limit: limit, now: F.at(0)).delayed.map(\.id) == Array(order.prefix(limit)))
        }
        #expect(e.state(limit: 5, now: F.at(0)).delayed.allSatisfy { $0.status == .delayed && $0.position == nil })
        // Later pages leave them out; so do windows' pages, which always have a cursor.
        #expect(e.state(limit: 5, after: .holding(fence: 0), now: F.at(0)).delayed.isEmpty)
        // Once some delays end, the rest follow in the same order.
        #expect(
            e.state(limit: 1000, now: F.at(30)).delayed.map(\.id)
                == order.filter { id in
                    expected.first { $0.id == id }!.end > 30
                })
    }
}

/// Shared helpers for the queue tests: explicit timestamps, short request builders.
enum QueueFixtures {
    /// 2026-01-01T00:00:00Z, the ManualClock's default start.
    static let t0 = Timestamp(micros: 1_767_225_600_000_000)

    /// `t0` plus `seconds`.
    static func at(_ seconds: Double) -> Timestamp { t0.adding(seconds: seconds) }

    static func engine(_ config: QueueConfig = QueueConfig()) -> QueueEngine {
        QueueEngine(name: "q", config: config, createdAt: t0)
    }

    /// Polls `condition`, yielding in between, until it holds (records an issue if it never does).
    /// Yields until `condition` holds, for up to 10 s of wall time (a count
    /// of yields passes in a tenth of a second on a loaded machine).
    static func eventually(_ condition: () async -> Bool, sourceLocation: SourceLocation = #_sourceLocation) async {
        await expectEventually(10, condition, sourceLocation: sourceLocation)
    }
}

extension QueueEngine {
    /// Enqueues with the common fields; `at` is seconds after `t0`.
    @discardableResult
    mutating func add(
        _ id: String? = nil, key: String? = nil, action: String? = nil, priority: Int = 0,
        hold: Double? = nil, delay: Double? = nil, at s: Double = 0
    ) throws(QueueError) -> VisitorView {
        let r = VisitorRequest(
            id: id, key: key, action: action, priority: priority, holdSeconds: hold, delaySeconds: delay)
        return try enqueue(r, now: QueueFixtures.at(s)).view
    }

    /// A visitor's status at `t0 + s`.
    mutating func status(_ id: String, at s: Double = 0) throws(QueueError) -> VisitorStatus {
        try visitor(id: id, now: QueueFixtures.at(s)).status
    }

    /// Waiting ids in grant order.
    mutating func waitingIDs(at s: Double = 0) -> [String] {
        state(limit: Int.max, now: QueueFixtures.at(s)).waiting.map(\.id)
    }

    /// Holder ids in grant order.
    mutating func holderIDs(at s: Double = 0) -> [String] {
        state(limit: Int.max, now: QueueFixtures.at(s)).holding.map(\.id)
    }

    /// The accounting invariant of docs/api.md, Queues (`counts`).
    var balanced: Bool {
        let c = counts
        return c.enqueuedTotal == c.waiting + c.holding + c.delayed + c.completedTotal + c.releasedTotal
            + c.expiredTotal + c.cancelledTotal + c.mergedTotal
    }
}

@Suite struct IDGeneratorTests {
    typealias F = QueueFixtures

    @Test func formatIsSixteenDigitsOrMore() {
        for n: Int64 in [0, 1, 9, 10, 1_767_225_600_000_000, 9_999_999_999_999_999, 10_000_000_000_000_000, .max] {
            let text = IDGenerator.format(n)
            #expect(text.count == max(16, String(n).count))
            #expect(Int64(text) == n)
        }
        #expect(IDGenerator.format(42) == "0000000000000042")
        #expect(IDGenerator.format(-5) == "0000000000000000")
    }

    @Test func nextIsTheLaterOfLastPlusOneAndNow() {
        var g = IDGenerator(createdAt: F.t0)
        #expect(g.next(now: F.t0) == IDGenerator.format(F.t0.micros + 1))
        #expect(g.next(now: F.t0) == IDGenerator.format(F.t0.micros + 2))
        #expect(g.next(now: F.at(1)) == IDGenerator.format(F.at(1).micros))
        // A clock that steps back never makes an id go back.
        #expect(g.next(now: F.t0) == IDGenerator.format(F.at(1).micros + 1))
        #expect(g.last == F.at(1).micros + 1)
    }
}
