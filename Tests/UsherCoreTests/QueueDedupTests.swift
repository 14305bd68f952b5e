import Testing

@testable import UsherCore

/// Dedup and opposites (docs/api.md, Queues): `key`, `adjacent`, `off`, at POST and at a delay's end.
@Suite struct QueueDedupTests {
    typealias F = QueueFixtures

    /// Capacity 1 with a holder, so everyone after it waits.
    func busy(_ dedup: DedupMode = .key, opposites: [[String]] = [["like", "unlike"]]) throws -> QueueEngine {
        var e = F.engine(QueueConfig(dedup: dedup, opposites: opposites))
        try e.add("holder")
        return e
    }

    @Test func keyModeMergesIntoTheWaitingDuplicateWhichKeepsItsPlace() throws {
        var e = try busy()
        try e.add("a", key: "k", action: "like")
        try e.add("b", key: "other")
        let dup = try e.enqueue(VisitorRequest(key: "k", action: "like", priority: 9), now: F.at(1))
        #expect(dup.created)
        #expect(dup.view.status == .merged)
        #expect(dup.view.mergedInto == "a")
        #expect(dup.view.finishedAt == F.at(1))
        #expect(e.waitingIDs(at: 1) == ["a", "b"])
        #expect(e.counts.mergedTotal == 1 && e.balanced)
    }

    @Test func keyWithoutActionMergesWithTheSameKeyWithoutAction() throws {
        var e = try busy()
        try e.add("a", key: "k")
        #expect(try e.add("b", key: "k").mergedInto == "a")
        #expect(try e.add("c", key: "k", action: "like").status == .waiting)
    }

    @Test func anOppositeCancelsTheMostRecentWaitingVisitorWithTheKey() throws {
        var e = try busy()
        try e.add("a", key: "k", action: "like")
        let b = try e.add("b", key: "k", action: "unlike", at: 1)
        #expect(b.status == .cancelled)
        #expect(b.cancelledWith == "a")
        #expect(b.reason == "opposite")
        let a = try e.visitor(id: "a", now: F.at(1))
        #expect(a.status == .cancelled && a.cancelledWith == "b" && a.reason == "opposite")
        #expect(a.finishedAt == F.at(1))
        #expect(e.counts.cancelledTotal == 2 && e.counts.waiting == 0 && e.balanced)
    }

    @Test func onlyTheMostRecentWaitingVisitorWithTheKeyIsCheckedForAnOpposite() throws {
        var e = try busy()
        try e.add("a", key: "k", action: "like")
        try e.add("b", key: "k", action: "share")
        #expect(try e.add("c", key: "k", action: "unlike").status == .waiting)
        #expect(e.waitingIDs() == ["a", "b", "c"])
    }

    @Test func theDuplicateCheckComesBeforeTheOppositeCheck() throws {
        var e = try busy()
        try e.add("a", key: "k", action: "like")
        try e.add("x", key: "k", action: "share")
        try e.add("b", key: "k", action: "unlike")  // most recent with k is x: no opposite
        // c duplicates a, and is also the opposite of b (the most recent): it merges.
        let c = try e.add("c", key: "k", action: "like")
        #expect(c.status == .merged && c.mergedInto == "a")
        #expect(e.waitingIDs() == ["a", "x", "b"])
    }

    @Test func everyDeclaredOppositeCounts() throws {
        var e = try busy(opposites: [["like", "unlike"], ["like", "dislike"]])
        try e.add("a", key: "k", action: "dislike")
        #expect(try e.add("b", key: "k", action: "like").cancelledWith == "a")
        try e.add("c", key: "k", action: "unlike")
        #expect(try e.add("d", key: "k", action: "dislike").status == .waiting)
    }

    @Test func grantedVisitorsAreNeverMergedIntoOrCancelled() throws {
        var e = F.engine(QueueConfig(opposites: [["like", "unlike"]]))
        try e.add("a", key: "k", action: "like")
        #expect(try e.add("b", key: "k", action: "like").status == .waiting)
        var f = F.engine(QueueConfig(opposites: [["like", "unlike"]]))
        try f.add("a", key: "k", action: "like")
        #expect(try f.add("b", key: "k", action: "unlike").status == .waiting)
        #expect(try f.status("a") == .granted)
    }

    @Test func keylessVisitorsAreNeverMergedOrCancelled() throws {
        for mode in DedupMode.allCases {
            var e = try busy(mode)
            try e.add("a", action: "like")
            #expect(try e.add("b", action: "like").status == .waiting)
            #expect(try e.add("c", action: "unlike").status == .waiting)
            #expect(e.counts.waiting == 3)
        }
    }

    @Test func adjacentComparesOnlyWithTheMostRecentArrivalStillWaiting() throws {
        var e = try busy(.adjacent)
        try e.add("a", key: "k", action: "like")
        #expect(try e.add("b", key: "k", action: "like").mergedInto == "a")
        try e.add("c", key: "j", action: "x")
        #expect(try e.add("d", key: "k", action: "like").status == .waiting)  // c came last
        #expect(try e.add("e", key: "k", action: "unlike").cancelledWith == "d")
        // d is gone; the most recent arrival still waiting is c again.
        #expect(try e.add("f", key: "j", action: "x").mergedInto == "c")
        // Priority does not matter, arrival does.
        try e.add("g", key: "p", priority: 10)
        try e.add("h", key: "q", priority: -10)
        #expect(try e.add("j2", key: "q").mergedInto == "h")
        #expect(try e.add("i", key: "p").status == .waiting)
    }

    @Test func adjacentSkipsAnArrivalThatWasGranted() throws {
        var e = F.engine(QueueConfig(dedup: .adjacent))
        try e.add("h")
        try e.add("a", key: "k")
        try e.add("b", key: "j")
        _ = try e.remove(id: "b", now: F.at(1))
        #expect(try e.add("c", key: "k", at: 1).mergedInto == "a")
        _ = try e.complete(id: "h", now: F.at(2))  // a is granted
        #expect(try e.add("d", key: "k", at: 2).status == .waiting)
    }

    @Test func offNeitherMergesNorCancels() throws {
        var e = try busy(.off)
        try e.add("a", key: "k", action: "like")
        #expect(try e.add("b", key: "k", action: "like").status == .waiting)
        #expect(try e.add("c", key: "k", action: "unlike").status == .waiting)
    }

    @Test func dedupActsWhenADelayEnds() throws {
        var e = try busy()
        try e.add("a", key: "k", action: "like")
        let d = try e.add("d", key: "k", action: "like", delay: 5)
        #expect(d.status == .delayed)  // no check at POST for a delayed visitor
        try e.add("o", key: "j", action: "like", delay: 5)
        try e.add("w", key: "j", action: "unlike", at: 1)
        e.advance(to: F.at(5))
        #expect(Set(e.drainChanges()) == ["d", "o", "w"])
        let merged = try e.visitor(id: "d", now: F.at(5))
        #expect(merged.status == .merged && merged.mergedInto == "a" && merged.finishedAt == F.at(5))
        #expect(try e.visitor(id: "o", now: F.at(5)).cancelledWith == "w")
        #expect(e.waitingIDs(at: 5) == ["a"])
        #expect(e.balanced)
    }

    @Test func delaysEndingTogetherDedupAgainstEachOther() throws {
        var e = F.engine(QueueConfig(capacity: 0, dedup: .key))
        try e.add("d1", key: "k", delay: 3)
        try e.add("d2", key: "k", delay: 3)
        #expect(try e.status("d2", at: 3) == .merged)
        #expect(try e.visitor(id: "d2", now: F.at(3)).mergedInto == "d1")
    }

    @Test func aDelayedVisitorWhoseTwinWasGrantedMeanwhileWaits() throws {
        var e = try busy()
        try e.add("a", key: "k")
        try e.add("d", key: "k", delay: 5)
        _ = try e.complete(id: "holder", now: F.at(1))  // a is granted
        #expect(try e.status("d", at: 5) == .waiting)
    }

    @Test func afterSwitchingToKeyModeDuplicatesMergeIntoTheMostRecent() throws {
        var e = try busy(.off)
        try e.add("a", key: "k")
        try e.add("b", key: "k")
        e.apply(QueuePatch(dedup: .key), now: F.at(1))
        #expect(try e.add("c", key: "k", at: 1).mergedInto == "b")
        _ = try e.remove(id: "b", now: F.at(2))
        #expect(try e.add("d", key: "k", at: 2).mergedInto == "a")
        _ = try e.remove(id: "a", now: F.at(3))
        #expect(try e.add("e", key: "k", at: 3).status == .waiting)
    }

    // MARK: dedup_keep latest

    func keepingLatest(_ dedup: DedupMode = .key) throws -> QueueEngine {
        var e = F.engine(QueueConfig(dedup: dedup, dedupKeep: .latest, opposites: [["like", "unlike"]]))
        try e.add("holder")
        return e
    }

    @Test func withKeepLatestTheNewcomerTakesTheWaitingDuplicatesPlace() throws {
        var e = try keepingLatest()
        try e.add("a", key: "city", priority: 2)
        try e.add("b", key: "other")
        let dup = try e.enqueue(VisitorRequest(id: "c", key: "city", priority: 0), now: F.at(1))
        #expect(dup.created && dup.view.status == .waiting && dup.view.position == 1)
        #expect(dup.view.priority == 2)  // the place, priority included
        let old = try e.visitor(id: "a", now: F.at(1))
        #expect(old.status == .merged && old.mergedInto == "c" && old.reason == "replaced")
        #expect(old.finishedAt == F.at(1))
        #expect(e.waitingIDs(at: 1) == ["c", "b"])
        #expect(e.counts.mergedTotal == 1 && e.counts.waiting == 2 && e.balanced)
        _ = try e.complete(id: "holder", now: F.at(2))
        #expect(try e.status("c", at: 2) == .granted)
    }

    @Test func aReplacementStandsInEveryChainOfTheOneItReplaced() throws {
        var e = try keepingLatest()
        try e.add("a1", key: "k", action: "like")
        try e.add("s", key: "k", action: "share")
        try e.add("a2", key: "k", action: "like")  // replaces a1, still before s
        #expect(e.waitingIDs() == ["a2", "s"])
        // The key's most recent waiter is still s: unlike does not meet a2.
        #expect(try e.add("u", key: "k", action: "unlike").status == .waiting)
        // The pair chain now ends at a2: the next like replaces it.
        try e.add("a3", key: "k", action: "like", at: 1)
        #expect(try e.visitor(id: "a2", now: F.at(1)).mergedInto == "a3")
        #expect(e.waitingIDs(at: 1) == ["a3", "s", "u"])
        _ = try e.remove(id: "u", now: F.at(1))
        _ = try e.remove(id: "s", now: F.at(1))
        // a3 is now the key's most recent waiter: an unlike cancels it.
        #expect(try e.add("x", key: "k", action: "unlike", at: 2).cancelledWith == "a3")
        #expect(e.counts.waiting == 0 && e.balanced)
    }

    @Test func withKeepLatestAdjacentReplacesTheLastArrival() throws {
        var e = try keepingLatest(.adjacent)
        try e.add("a", key: "k")
        try e.add("b", key: "k")
        #expect(try e.visitor(id: "a", now: F.at(0)).mergedInto == "b")
        try e.add("c", key: "j")
        #expect(try e.add("d", key: "k").status == .waiting)  // c came last
        #expect(try e.add("e", key: "k").status == .waiting)
        #expect(try e.visitor(id: "d", now: F.at(0)).reason == "replaced")
        #expect(e.waitingIDs() == ["b", "c", "e"])
        #expect(e.balanced)
    }

    @Test func withKeepLatestADelayEndingReplacesTheWaitingTwin() throws {
        var e = try keepingLatest()
        try e.add("a", key: "k")
        try e.add("b")
        try e.add("d", key: "k", delay: 5)
        e.advance(to: F.at(5))
        #expect(Set(e.drainChanges()) == ["a", "d"])
        #expect(try e.visitor(id: "a", now: F.at(5)).mergedInto == "d")
        #expect(e.waitingIDs(at: 5) == ["d", "b"])
        // The line's oldest entry is still the replaced one's.
        #expect(e.oldestWaitingSince == F.at(0))
    }

    @Test func switchingKeepToLatestAppliesToTheNextDuplicate() throws {
        var e = try busy()
        try e.add("a", key: "k")
        #expect(try e.add("b", key: "k").mergedInto == "a")
        e.apply(QueuePatch(dedupKeep: .latest), now: F.at(1))
        try e.add("c", key: "k", at: 1)
        #expect(try e.visitor(id: "a", now: F.at(1)).mergedInto == "c")
        #expect(e.waitingIDs(at: 1) == ["c"])
    }

    // MARK: dedup_seconds

    @Test func dedupSecondsKeepsAFinishedIdBeyondHistoryForThatLong() throws {
        var e = F.engine(QueueConfig(holdSeconds: 0, history: 1, dedupSeconds: 10))
        for (i, id) in ["a", "b", "c"].enumerated() {
            try e.add(id, at: Double(i))
            _ = try e.complete(id: id, now: F.at(Double(i)))
        }
        // a finished at 0, b at 1: both beyond history 1, both within 10 s.
        #expect(try e.enqueue(VisitorRequest(id: "a"), now: F.at(9.9)).created == false)
        #expect(try e.status("b", at: 10.5) == .completed)
        #expect(throws: QueueError.notFound("visitor \"a\"")) { try e.visitor(id: "a", now: F.at(10.5)) }
        #expect(throws: QueueError.notFound("visitor \"b\"")) { try e.visitor(id: "b", now: F.at(11)) }
        #expect(try e.status("c", at: 100) == .completed)  // history keeps it however old
    }

    @Test func aFullBudgetForgetsWhatOnlyDedupSecondsKeptBeforeRefusing() throws {
        let cost = StorageBudget.cost("v0", nil, nil, payload: nil)
        var e = QueueEngine(
            name: "q", config: QueueConfig(holdSeconds: 0, history: 1, dedupSeconds: 60), createdAt: F.t0,
            budget: StorageBudget(limit: 3 * cost))
        for i in 0..<3 {
            try e.add("v\(i)")
            _ = try e.complete(id: "v\(i)", now: F.t0)
        }
        // v0 and v1 are kept by dedup_seconds only; v3 takes v0's bytes.
        #expect(try e.add("v3").status == .granted)
        #expect(throws: QueueError.notFound("visitor \"v0\"")) { try e.visitor(id: "v0", now: F.t0) }
        #expect(try e.status("v1") == .completed && e.storage.bytes == 3 * cost)
        _ = try e.complete(id: "v3", now: F.t0)
        try e.add("v4")
        try e.add("v5")  // v1, then v2 forgotten; v3 is the history
        #expect(throws: QueueError.notFound("visitor \"v2\"")) { try e.visitor(id: "v2", now: F.t0) }
        #expect(throws: QueueError.self) { try e.add("v6") }  // nothing left that only dedup keeps
        #expect(try e.status("v3") == .completed)
    }
}
