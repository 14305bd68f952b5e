import Testing

/// The checker of the shared-pipeline scenario on histories made by hand: a
/// good one passes, and each broken invariant is reported (so the scenario can fail).
@Suite struct PipelineHistoryCheckerTests {
    let checker = PipelineHistoryChecker()

    /// a acked at once; b's first hand-out missed, acked on its redelivery;
    /// a stale consume of b's first hand-out refused.
    var good: PipelineHistory {
        PipelineHistory(
            pushed: ["a", "b"],
            deliveries: [
                .init(id: "a", fence: 10, process: 0), .init(id: "b", fence: 11, process: 1),
                .init(id: "b", fence: 12, process: 2),
            ],
            acks: [
                .init(id: "a", fence: 10, status: 200), .init(id: "b", fence: 12, status: 200),
                .init(id: "b", fence: 11, status: 409),
            ],
            left: ["ready": 0, "delayed": 0, "in_flight": 0, "dead": 0],
            counts: ["pushed_total": 2, "consumed_total": 2])
    }

    @Test func aGoodHistoryPasses() {
        let report = checker.check(good)
        #expect(report.violations.isEmpty, "\(report.violations)")
        #expect(report.acked == 2 && report.redelivered == 1 && report.staleAcks == 1 && report.deliveries == 3)
    }

    @Test func aLostItemIsReported() {
        var h = good
        h.pushed.insert("c")
        #expect(checker.check(h).violations.contains { $0.contains("never acknowledged") && $0.contains("c") })
    }

    @Test func anItemAcknowledgedTwiceIsReported() {
        var h = good
        h.acks.append(.init(id: "b", fence: 11, status: 200))
        #expect(checker.check(h).violations.contains("b acknowledged twice"))
    }

    @Test func aSharedFenceIsReported() {
        var h = good
        h.deliveries[2].fence = 10
        #expect(checker.check(h).violations.contains { $0.hasPrefix("fence 10 handed out twice") })
    }

    @Test func aHandOutAfterTheAckIsReported() {
        var h = good
        h.deliveries.append(.init(id: "a", fence: 20, process: 1))
        #expect(checker.check(h).violations.contains("a handed out again (fence 20) after its ack"))
    }

    @Test func unknownItemsAreReported() {
        var h = good
        h.deliveries.append(.init(id: "z", fence: 30, process: 0))
        h.acks.append(.init(id: "z", fence: 31, status: 200))
        let violations = checker.check(h).violations
        #expect(violations.contains("z handed out but never pushed"))
        #expect(violations.contains("z acknowledged but never pushed"))
        #expect(violations.contains("z acknowledged with fence 31, never handed out"))
    }

    @Test func itemsLeftAndWrongTotalsAreReported() {
        var h = good
        h.left["in_flight"] = 1
        h.counts["consumed_total"] = 3
        h.counts["pushed_total"] = 1
        let violations = checker.check(h).violations
        #expect(violations.contains("1 items left in_flight"))
        #expect(violations.contains("consumed_total 3, 2 acknowledged"))
        #expect(violations.contains("pushed_total 1, 2 ids pushed"))
    }
}
