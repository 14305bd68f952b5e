import Testing

/// The checker of the shared-pool scenario on histories made by hand: a
/// good one passes, and each broken invariant is reported (so the scenario can fail).
@Suite struct PoolHistoryCheckerTests {
    let checker = PoolHistoryChecker()
    static let t0: Int64 = 1_796_099_200_000

    /// A lease of `element` from `start` ms (after t0) to `end`, with a fence from its grant time.
    func lease(
        _ id: String, _ element: String, _ start: Int64, _ end: Int64, status: String = "recycled",
        fence: Int64? = nil
    ) -> LeaseOutcome {
        let t0 = Self.t0
        return LeaseOutcome(
            id: id, status: status, element: element, grantedAt: t0 + start, finishedAt: t0 + end,
            expiresAt: status == "expired" ? t0 + end : t0 + start + 1000, fence: fence ?? (t0 + start) * 1000)
    }

    /// Two elements, each handed from lease to lease (one hand-over in the same millisecond).
    var good: [LeaseOutcome] {
        [
            lease("a", "e0", 0, 100), lease("b", "e1", 1, 1001, status: "expired"),
            lease("c", "e0", 100, 300), lease("d", "e0", 310, 400, status: "revoked"),
            lease("e", "e1", 1001, 1200),
        ]
    }

    @Test func aGoodHistoryPasses() {
        let report = checker.check(good)
        #expect(report.violations.isEmpty, "\(report.violations)")
        #expect(report.perElement == ["e0": 3, "e1": 2])
        #expect(report.sameMillisecondHandOvers == 2)
        #expect(report.byStatus == ["recycled": 3, "expired": 1, "revoked": 1])
    }

    @Test func twoHoldersOfOneElementAreReported() {
        let report = checker.check(good + [lease("x", "e0", 150, 200)])
        #expect(report.violations.contains { $0.contains("held it at once") }, "\(report.violations)")
        // The same leases on two elements are fine.
        #expect(checker.check(good + [lease("x", "e2", 150, 200)]).violations.isEmpty)
    }

    @Test func aFenceOutOfGrantOrderIsReported() {
        var history = good
        history[2].fence = history[0].fence! - 1  // c, granted e0 after a, with a lower fence
        let report = checker.check(history)
        #expect(report.violations.contains { $0.contains("granted before") }, "\(report.violations)")
        history[2].fence = history[0].fence  // the same fence twice
        #expect(checker.check(history).violations.contains { $0.hasPrefix("fence") && $0.contains("given to") })
        history[2].fence = (Self.t0 + 50) * 1000  // smaller than its own grant time in µs
        #expect(checker.check(history).violations.contains { $0.contains("before its grant") })
    }

    @Test func aLeaseThatNeverEndsIsReported() {
        let active = LeaseOutcome(
            id: "z", status: "active", element: "e1", grantedAt: Self.t0 + 1300, expiresAt: Self.t0 + 2300,
            fence: (Self.t0 + 1300) * 1000)
        let waiting = LeaseOutcome(id: "w", status: "waiting")
        let report = checker.check(good + [active, waiting])
        #expect(report.violations.contains { $0 == "z did not end: active" }, "\(report.violations)")
        #expect(report.violations.contains { $0 == "w did not end: waiting" })
        var noFence = lease("n", "e2", 0, 10)
        noFence.fence = nil
        #expect(checker.check([noFence]).violations.contains { $0.contains("without element, times or fence") })
    }

    @Test func leasesPastTheirExpiryAreReported() {
        var history = good
        history[0].finishedAt = history[0].expiresAt! + 5  // recycled after it had expired
        #expect(checker.check(history).violations.contains { $0.contains("a ended after its expiry") })
        history = good
        history[1].finishedAt = history[1].expiresAt! - 5  // expired before its time
        history[1].grantedAt = history[1].finishedAt! - 900
        #expect(checker.check(history).violations.contains { $0.contains("b expired at") })
    }

    /// The scenario's cross-check of what clients were told against the end
    /// state: a lease a client got has its element and fence at the end, or
    /// is missing only when asked for before Redis lost everything
    /// (`lostBefore`); one recycled with a 200 ends `recycled`.
    @Test func answersTheEndStateContradictsAreReported() {
        var got = PoolLoad.Seen()
        got.granted = ("e0", 5)
        got.asked = 100
        let ended = LeaseOutcome(id: "a", status: "expired", element: "e0", fence: 5)
        func check(_ seen: PoolLoad.Seen, _ end: LeaseOutcome?, lostBefore: Double = 0) -> [String] {
            PoolLoad.crossCheck(
                seen: ["a": seen], end.map { [$0] } ?? [], missing: end == nil ? ["a"] : [], lostBefore: lostBefore)
        }
        #expect(check(got, ended).isEmpty)
        #expect(check(got, nil).count == 1)
        #expect(check(got, nil, lostBefore: 100).count == 1, "asked for at the loss, not before")
        #expect(check(got, nil, lostBefore: 101).isEmpty)
        var otherFence = ended
        otherFence.fence = 6
        #expect(check(got, otherFence, lostBefore: 101).count == 1, "present after the loss, it must agree")
        var recycled = got
        recycled.recycled = true
        #expect(check(recycled, ended) == ["a: recycled, but ends expired"])
        var exhausted = PoolLoad.Seen()
        exhausted.exhausted = true
        #expect(check(exhausted, ended).count == 1, "a wait that ended pool_exhausted left a lease")
    }
}
