import Foundation
import Testing

/// The checker of the shared-queue drills on histories made by hand: a good
/// one passes, and each broken invariant is reported (so the drills can fail).
@Suite struct QueueHistoryCheckerTests {
    let checker = QueueHistoryChecker(capacity: 3)
    static let t0: Int64 = 1_796_099_200_000

    /// A visitor granted at `start` ms (after t0) and completed at `end`.
    func held(
        _ id: String, _ start: Int64, _ end: Int64, fence: Int64? = nil, priority: Int = 0, enqueued: Int64? = nil
    )
        -> VisitorOutcome
    {
        let t0 = Self.t0
        return VisitorOutcome(
            id: id, status: "completed", priority: priority, enqueuedAt: t0 + (enqueued ?? start),
            grantedAt: t0 + start, finishedAt: t0 + end, expiresAt: t0 + start + 1000,
            fence: fence ?? (t0 + start) * 1000)
    }

    /// Three holders, then a line of two served in order as slots free up.
    var good: [VisitorOutcome] {
        [
            held("a", 0, 100), held("b", 1, 150), held("c", 2, 300),
            held("d", 100, 200, enqueued: 10), held("e", 150, 250, enqueued: 20),
            VisitorOutcome(id: "m", status: "merged", enqueuedAt: Self.t0 + 30, finishedAt: Self.t0 + 30),
            VisitorOutcome(
                id: "x", status: "cancelled", enqueuedAt: Self.t0 + 40, finishedAt: Self.t0 + 60, reason: "client"),
        ]
    }

    @Test func aGoodHistoryPasses() {
        let report = checker.check(good)
        #expect(report.violations.isEmpty, "\(report.violations)")
        #expect(report.maxHolders == 3)
        #expect(report.grants == 5)
        #expect(report.fifoPairs > 0)
    }

    @Test func fourOverlappingHoldersAreReported() {
        let report = checker.check(good + [held("f", 5, 50)])
        #expect(report.maxHolders == 4)
        #expect(report.violations.contains { $0.hasPrefix("4 holders at") }, "\(report.violations)")
    }

    @Test func aFenceThatGoesBackIsReported() {
        var history = good
        history[4].fence = history[3].fence! - 1  // e, granted after d, with a lower fence
        let report = checker.check(history)
        #expect(
            report.violations.contains { $0.contains("e granted at") && $0.contains("after d") }, "\(report.violations)"
        )
        history[4].fence = history[3].fence  // the same fence twice
        #expect(checker.check(history).violations.contains { $0.hasPrefix("fence") && $0.contains("given to") })
    }

    @Test func aLaterArrivalServedFirstIsReported() {
        // e entered after d, same priority, and was granted first.
        var history = good
        history[3] = held("d", 150, 250, fence: history[4].fence! + 1, enqueued: 10)
        history[4] = held("e", 100, 200, fence: history[3].fence! - 5, enqueued: 20)
        let report = checker.check(history)
        #expect(report.violations.contains { $0.hasPrefix("FIFO: e") }, "\(report.violations)")
        // A cancelled visitor that was still waiting when a later one was granted, too.
        let waiter = VisitorOutcome(
            id: "w", status: "cancelled", enqueuedAt: Self.t0 + 5, finishedAt: Self.t0 + 120, reason: "timeout")
        #expect(checker.check(good + [waiter]).violations.contains { $0.contains("while w") })
    }

    @Test func aLowerPriorityServedFirstIsReported() {
        var history = good
        history[4].priority = 5  // e, priority 5, waited since 20 ms while d (priority 0) was granted at 100
        let report = checker.check(history)
        #expect(report.violations.contains { $0.hasPrefix("priority: d") }, "\(report.violations)")
    }

    /// A slot an expiry freed is granted when the next script runs: the
    /// grant, dated then, may follow a higher priority's entry that came
    /// after the expiry. Within the catch-up it is not an inversion; later it is.
    @Test func aGrantDecidedAtAnEarlierExpiryIsNoInversion() {
        let checker = QueueHistoryChecker(capacity: 1)
        var holder = held("h", 10, 100, enqueued: 0)
        holder.status = "expired"
        holder.expiresAt = Self.t0 + 100
        let low = held("low", 112, 150, enqueued: 20)  // decided at 100, dated 112
        var high = VisitorOutcome(
            id: "high", status: "cancelled", priority: 5, enqueuedAt: Self.t0 + 105, finishedAt: Self.t0 + 140,
            reason: "client")
        high.delayMicros = 0
        #expect(checker.check([holder, low, high]).violations.isEmpty)
        // Dated more than catchUpMilliseconds after the expiry: the higher priority was ahead.
        let strict = QueueHistoryChecker(capacity: 1, catchUpMilliseconds: 5)
        #expect(strict.check([holder, low, high]).violations.contains { $0.hasPrefix("priority: low") })
        // A grant freed by a completion (dated when it happens) has no such excuse.
        holder.status = "completed"
        #expect(checker.check([holder, low, high]).violations.contains { $0.hasPrefix("priority: low") })
    }

    @Test func delayedAndOppositeVisitorsEnterTheLineWhenTheyShould() {
        // n was delayed 500 ms: it entered the line after d and e, so their grants are fine.
        var delayed = held("n", 600, 650, enqueued: 5)
        delayed.delayMicros = 500_000
        #expect(checker.check(good + [delayed]).violations.isEmpty)
        // Without the delay it was ahead of both.
        delayed.delayMicros = 0
        #expect(checker.check(good + [delayed]).violations.count == 2)
        // Granted before its delay ended.
        delayed.delayMicros = 700_000
        #expect(checker.check(good + [delayed]).violations.contains { $0.hasPrefix("n granted before") })
        // The newcomer of an opposite pair never entered; the victim did, until it was cancelled.
        let victim = VisitorOutcome(
            id: "v", status: "cancelled", enqueuedAt: Self.t0 + 50, finishedAt: Self.t0 + 90, reason: "opposite",
            cancelledWith: "n2")
        let newcomer = VisitorOutcome(
            id: "n2", status: "cancelled", enqueuedAt: Self.t0 + 90, finishedAt: Self.t0 + 90, reason: "opposite",
            cancelledWith: "v")
        let later = held("f", 260, 280, enqueued: 60)
        #expect(checker.check(good + [victim, newcomer, later]).violations.isEmpty)
        // Cancelled only after f, which came later, was granted: f jumped the line.
        var late = victim
        late.finishedAt = Self.t0 + 300
        #expect(checker.check(good + [late, newcomer, later]).violations.contains { $0.hasPrefix("FIFO: f") })
    }

    @Test func unfinishedVisitorsAndOverdueHoldsAreReported() {
        var history = good
        history.append(VisitorOutcome(id: "s", status: "waiting", enqueuedAt: Self.t0 + 500))
        history[0].status = "expired"
        history[0].finishedAt = history[0].expiresAt! + 1
        let report = checker.check(history)
        #expect(report.violations.contains("s ended waiting, not in a final status"), "\(report.violations)")
        #expect(report.violations.contains { $0.hasPrefix("a held until") })
        #expect(report.violations.contains { $0.hasPrefix("a expired at") })
    }

    @Test func timesAreReadToTheMillisecond() {
        #expect(rfc3339Milliseconds("1970-01-01T00:00:00.000Z") == 0)
        #expect(rfc3339Milliseconds("2026-11-30T04:10:00.123Z") == 1_796_011_800_123)
        #expect(rfc3339Milliseconds("2000-02-29T23:59:59.999Z") == 951_868_799_999)
        #expect(rfc3339Milliseconds("2026-11-30 04:10") == nil)
    }
}
