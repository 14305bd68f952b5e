import Foundation
import Testing

@testable import Locking
@testable import UsherCore

/// `estimated_wait_seconds`: the holders' remaining time where every holder
/// has an expiry, one mean hold per further round of the slots.
@Suite struct WaitEstimateTests {
    typealias F = QueueFixtures

    func wait(_ e: inout QueueEngine, _ id: String, at s: Double) throws -> Double? {
        try e.visitor(id: id, now: F.at(s)).estimatedWaitSeconds
    }

    @Test func theHoldersRemainingTimeNotTheMeanOfShortHolds() throws {
        var e = F.engine(QueueConfig(capacity: 1, holdSeconds: 60, idleSeconds: 0, claimSeconds: 0))
        try e.add("quick")
        _ = try e.complete(id: "quick", now: F.at(0.027))  // the mean of finished holds: 27 ms
        try e.add("holder", at: 1)
        try e.add("next", at: 1)
        #expect(try wait(&e, "next", at: 1) == 60)
        #expect(try wait(&e, "next", at: 31.5) == 29.5)
        // The next round: one mean hold after the holder's expiry.
        try e.add("after", at: 31.5)
        #expect(try wait(&e, "after", at: 31.5) == 29.527)
    }

    @Test func theKthEarliestExpiryThenOneMeanPerRound() throws {
        var e = F.engine(QueueConfig(capacity: 2, holdSeconds: 60))
        try e.add("a")
        try e.add("b", at: 10)
        for (i, id) in ["w1", "w2", "w3", "w4", "w5"].enumerated() { try e.add(id, at: 20 + Double(i)) }
        // Expiries at 60 and 70; no finished hold: hold_seconds (60) is the mean.
        let s = e.state(limit: 10, now: F.at(30))
        #expect(s.waiting.map(\.estimatedWaitSeconds) == [30, 40, 90, 100, 150])
        #expect(try wait(&e, "w2", at: 30) == 40)
        // An extend reorders the expiries.
        _ = try e.extend(id: "a", holdSeconds: 60, now: F.at(30))  // a: 90
        #expect(e.state(limit: 4, now: F.at(30)).waiting.map(\.estimatedWaitSeconds) == [40, 60])
    }

    @Test func theOldEstimateWhereAHolderHasNoExpiry() throws {
        var e = F.engine(QueueConfig(capacity: 2, holdSeconds: 0))
        try e.add("pinned")
        try e.add("timed", hold: 30)
        try e.add("w")
        // No finished hold and no limit: nothing to go on.
        #expect(try wait(&e, "w", at: 0) == nil)
        _ = try e.complete(id: "timed", now: F.at(8))  // w is granted, without expiry
        try e.add("w2", at: 8)
        try e.add("w3", at: 8)
        // Holders without expiry: position × mean 8 s ÷ 2 slots.
        #expect(try wait(&e, "w2", at: 8) == 4)
        #expect(try wait(&e, "w3", at: 8) == 8)
        // Own holds only, and no mean for a second round.
        var own = F.engine(QueueConfig(capacity: 1, holdSeconds: 0))
        try own.add("h", hold: 20)
        try own.add("x")
        try own.add("y")
        #expect(try wait(&own, "x", at: 5) == 15)
        #expect(try wait(&own, "y", at: 5) == nil)
    }

    @Test func holdersBeyondALoweredCapacityFreeNoSlot() throws {
        var e = F.engine(QueueConfig(capacity: 2, holdSeconds: 60))
        try e.add("a")
        try e.add("b", at: 10)
        try e.add("w", at: 10)
        e.apply(QueuePatch(capacity: 1), now: F.at(10))
        // a's expiry (in 50 s) leaves one holder for one slot: w waits for b's (in 60 s).
        #expect(try wait(&e, "w", at: 10) == 60)
        e.apply(QueuePatch(capacity: 0), now: F.at(10))
        #expect(try wait(&e, "w", at: 10) == nil)
    }

    @Test func expiriesLeaveTheEstimateWithTheirHolders() throws {
        var e = F.engine(QueueConfig(capacity: 1, holdSeconds: 10))
        try e.add("a")
        try e.add("b")
        try e.add("c")
        #expect(try wait(&e, "c", at: 0) == 20)
        e.advance(to: F.at(10))  // the manager's timer: a expires, b is granted until 20
        #expect(try wait(&e, "c", at: 12) == 8)
        _ = try e.remove(id: "b", now: F.at(13))
        #expect(try e.visitor(id: "c", now: F.at(13)).status == .granted)
        #expect(e.holderExpiries.count == 1)
    }

    @Test func theManagerOnAManualClock() throws {
        let clock = ManualClock()
        let q = VisitorQueue(
            name: "q", config: QueueConfig(capacity: 1, holdSeconds: 60, idleSeconds: 0, claimSeconds: 0), clock: clock)
        _ = try q.withIsolation { q throws(QueueError) in try q.enqueue(VisitorRequest(id: "a")) }
        let (b, _) = try q.withIsolation { q throws(QueueError) in try q.enqueue(VisitorRequest(id: "b")) }
        #expect(b.estimatedWaitSeconds == 60)
        clock.advance(by: 45)
        #expect(try q.withIsolation { q throws(QueueError) in try q.visitor(id: "b") }.estimatedWaitSeconds == 15)
    }
}

@Suite struct RankedDeadlinesTests {
    @Test func matchesASortedModel() {
        var rng = SeededGenerator(seed: 7)
        var tree = RankedDeadlines(seed: 3)
        var model: [Int32: Int64] = [:]
        for _ in 0..<4000 {
            let h = Int32.random(in: 0..<200, using: &rng)
            if model[h] != nil {
                tree.remove(h)
                model[h] = nil
            } else {
                let d = Int64.random(in: 0..<50, using: &rng)  // many ties
                tree.insert(h, deadline: d)
                model[h] = d
            }
            #expect(tree.count == model.count)
            let sorted = model.values.sorted()
            if !sorted.isEmpty {
                let k = Int.random(in: 1...sorted.count, using: &rng)
                #expect(tree.deadline(rank: k) == sorted[k - 1])
            }
        }
        for (h, _) in model { #expect(tree.contains(h)) }
        #expect(!tree.contains(500))
    }
}
