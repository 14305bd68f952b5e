import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// The memory engine's rule tests (QueueDedupTests, QueueEngineTests,
/// TryAcquireTests, DisconnectCoreTests), run on the Redis store.
extension RedisQueueStoreTests {
    /// A queue in a fresh redis-server; `at(s)` moves its clock to `s` seconds after the start.
    struct Line {
        let server: RedisServer
        let clock = ManualClock(start: RedisQueueStoreTests.start)
        let store: RedisQueueStore

        init(_ config: QueueConfig = QueueConfig()) async throws {
            server = try await RedisServer()
            store = RedisQueueStoreTests.store(server, clock)
            _ = try await store.create(config)
        }

        func at(_ seconds: Double) {
            clock.advance(by: clock.now().seconds(until: RedisQueueStoreTests.time(seconds)))
        }

        @discardableResult
        func add(
            _ id: String, key: String? = nil, action: String? = nil, priority: Int = 0, hold: Double? = nil,
            delay: Double? = nil, at seconds: Double? = nil
        ) async throws -> VisitorView {
            if let seconds { at(seconds) }
            let r = VisitorRequest(
                id: id, key: key, action: action, priority: priority, holdSeconds: hold, delaySeconds: delay)
            return try await store.enqueue(r).view
        }

        func status(_ id: String, at seconds: Double? = nil) async throws -> VisitorStatus {
            if let seconds { at(seconds) }
            return try await store.visitor(id: id).status
        }

        func waitingIDs(at seconds: Double? = nil) async throws -> [String] {
            if let seconds { at(seconds) }
            return try await store.state(limit: 1000).waiting.map(\.id)
        }

        func holderIDs() async throws -> [String] { try await store.state(limit: 1000).holding.map(\.id) }

        /// Capacity 1 with a holder, so everyone after it waits.
        static func busy(_ dedup: DedupMode = .key, opposites: [[String]] = [["like", "unlike"]]) async throws -> Line {
            let line = try await Line(QueueConfig(dedup: dedup, opposites: opposites))
            try await line.add("holder")
            return line
        }
    }

    static func time(_ seconds: Double) -> Timestamp { Timestamp(micros: start.micros + Int64(seconds * 1_000_000)) }

    // MARK: - Dedup

    @Test func keyModeMergesIntoTheWaitingDuplicateWhichKeepsItsPlace() async throws {
        let q = try await Line.busy()
        try await q.add("a", key: "k", action: "like")
        try await q.add("b", key: "other")
        q.at(1)
        let dup = try await q.store.enqueue(VisitorRequest(key: "k", action: "like", priority: 9))
        #expect(dup.created && dup.view.status == .merged && dup.view.mergedInto == "a")
        #expect(dup.view.finishedAt == Self.time(1))
        #expect(try await q.waitingIDs() == ["a", "b"])
        #expect(try await q.add("c", key: "k").status == .waiting)  // no action is an action of its own
        #expect(try await q.add("d", key: "k").mergedInto == "c")
    }

    @Test func anOppositeCancelsOnlyTheMostRecentWaitingVisitorWithTheKey() async throws {
        let q = try await Line.busy()
        try await q.add("a", key: "k", action: "like")
        let b = try await q.add("b", key: "k", action: "unlike", at: 1)
        #expect(b.status == .cancelled && b.cancelledWith == "a" && b.reason == "opposite")
        let a = try await q.store.visitor(id: "a")
        #expect(a.status == .cancelled && a.cancelledWith == "b" && a.finishedAt == Self.time(1))
        try await q.add("c", key: "k", action: "like")
        try await q.add("x", key: "k", action: "share")
        try await q.add("e", key: "k", action: "unlike")  // the most recent with k is x: no opposite
        // f duplicates c and is the opposite of e (the most recent): it merges.
        #expect(try await q.add("f", key: "k", action: "like").mergedInto == "c")
        #expect(try await q.waitingIDs() == ["c", "x", "e"])
        let counts = try await q.store.counts().counts
        #expect(counts.cancelledTotal == 2 && counts.mergedTotal == 1 && counts.waiting == 3)
    }

    @Test func grantedAndKeylessVisitorsAreNeverMergedOrCancelled() async throws {
        let q = try await Line(QueueConfig(opposites: [["like", "unlike"]]))
        try await q.add("a", key: "k", action: "like")
        #expect(try await q.add("b", key: "k", action: "like").status == .waiting)
        for mode in DedupMode.allCases {
            let r = try await Line.busy(mode)
            try await r.add("a", action: "like")
            #expect(try await r.add("b", action: "like").status == .waiting)
            #expect(try await r.add("c", action: "unlike").status == .waiting)
        }
    }

    @Test func adjacentComparesOnlyWithTheMostRecentArrivalStillWaiting() async throws {
        let q = try await Line.busy(.adjacent)
        try await q.add("a", key: "k", action: "like")
        #expect(try await q.add("b", key: "k", action: "like").mergedInto == "a")
        try await q.add("c", key: "j", action: "x")
        #expect(try await q.add("d", key: "k", action: "like").status == .waiting)  // c came last
        #expect(try await q.add("e", key: "k", action: "unlike").cancelledWith == "d")
        #expect(try await q.add("f", key: "j", action: "x").mergedInto == "c")
        try await q.add("g", key: "p", priority: 10)
        try await q.add("h", key: "q", priority: -10)
        #expect(try await q.add("j2", key: "q").mergedInto == "h")  // arrival counts, not priority
        #expect(try await q.add("i", key: "p").status == .waiting)
    }

    @Test func offNeitherMergesNorCancelsAndSwitchingModesUsesTheMostRecent() async throws {
        let q = try await Line.busy(.off)
        try await q.add("a", key: "k")
        #expect(try await q.add("b", key: "k").status == .waiting)
        _ = try await q.store.apply(QueuePatch(dedup: .key))
        #expect(try await q.add("c", key: "k").mergedInto == "b")
        _ = try await q.store.remove(id: "b")
        #expect(try await q.add("d", key: "k").mergedInto == "a")
        _ = try await q.store.remove(id: "a")
        #expect(try await q.add("e", key: "k").status == .waiting)
    }

    @Test func dedupActsWhenADelayEnds() async throws {
        let q = try await Line.busy()
        try await q.add("a", key: "k", action: "like")
        #expect(try await q.add("d", key: "k", action: "like", delay: 5).status == .delayed)
        try await q.add("o", key: "j", action: "like", delay: 5)
        try await q.add("w", key: "j", action: "unlike", at: 1)
        q.at(5)
        let merged = try await q.store.visitor(id: "d")
        #expect(merged.status == .merged && merged.mergedInto == "a" && merged.finishedAt == Self.time(5))
        #expect(try await q.store.visitor(id: "o").cancelledWith == "w")
        #expect(try await q.waitingIDs() == ["a"])
        let together = try await Line(QueueConfig(capacity: 0, dedup: .key))
        try await together.add("d1", key: "k", delay: 3)
        try await together.add("d2", key: "k", delay: 3)
        try await together.add("d3", delay: 3)
        #expect(try await together.status("d2", at: 3) == .merged)
        #expect(try await together.waitingIDs() == ["d1", "d3"])
    }

    // MARK: - Line

    @Test func capacityZeroClosesRaisingGrantsAtOnceLoweringTakesNothing() async throws {
        let q = try await Line(QueueConfig(capacity: 0))
        for id in ["a", "b", "c"] { try await q.add(id) }
        #expect(try await q.store.visitor(id: "a").estimatedWaitSeconds == nil)
        q.at(1)
        _ = try await q.store.apply(QueuePatch(capacity: 2))
        #expect(try await q.holderIDs() == ["a", "b"])
        _ = try await q.store.apply(QueuePatch(capacity: 1))
        #expect(try await q.holderIDs() == ["a", "b"])
        _ = try await q.store.complete(id: "a")
        #expect(try await q.status("c") == .waiting)
        _ = try await q.store.complete(id: "b")
        #expect(try await q.status("c") == .granted)
    }

    @Test func lateProcessingExpiresAtTheDeadlineAndGrantsAtNow() async throws {
        let q = try await Line(QueueConfig(holdSeconds: 5))
        for id in ["a", "b", "c"] { try await q.add(id) }
        q.at(12)
        #expect(try await q.store.visitor(id: "a").finishedAt == Self.time(5))
        let b = try await q.store.visitor(id: "b")
        #expect(b.grantedAt == Self.time(12) && b.expiresAt == Self.time(17))
        #expect(try await q.status("c") == .waiting)
    }

    @Test func completeAndRemoveInEveryStatus() async throws {
        let q = try await Line()
        try await q.add("a")
        try await q.add("b")
        try await q.add("c", delay: 5)
        await #expect(throws: QueueError.notGranted(current: .delayed)) { try await q.store.complete(id: "c") }
        q.at(1)
        let c = try await q.store.remove(id: "c")
        #expect(c.status == .cancelled && c.reason == "client")
        #expect(try await q.store.remove(id: "b").status == .cancelled)
        q.at(2)
        let a = try await q.store.remove(id: "a")
        #expect(a.status == .released)
        q.at(3)
        #expect(try await q.store.remove(id: "a") == a)
        await #expect(throws: QueueError.notGranted(current: .released)) { try await q.store.complete(id: "a") }
        let counts = try await q.store.counts().counts
        #expect(counts.cancelledTotal == 2 && counts.releasedTotal == 1 && counts.enqueuedTotal == 3)
    }

    @Test func delayedVisitorsEnterTheLineWhenTheDelayEndsInArrivalOrder() async throws {
        let q = try await Line()
        try await q.add("h")
        #expect(try await q.add("d", delay: 5).position == nil)
        try await q.add("w", at: 1)
        #expect(try await q.waitingIDs(at: 5) == ["w", "d"])  // arrival = entering the line
        let closed = try await Line(QueueConfig(capacity: 0))
        for id in ["d3", "d1", "d2"] { try await closed.add(id, delay: 3) }
        #expect(try await closed.store.state(limit: 10).delayed.map(\.id) == ["d3", "d1", "d2"])
        #expect(try await closed.waitingIDs(at: 3) == ["d3", "d1", "d2"])
    }

    /// The memory engine (on main) gets this wrong: d2 reuses d0's forgotten
    /// slot, and d0's stale heap entry (same delay end, earlier order) lets
    /// d2 in ahead of d1. Found by the differential test (seed 26).
    @Test func delaysEndingTogetherKeepArrivalOrderWhateverWasRemoved() async throws {
        let q = try await Line(QueueConfig(capacity: 1, holdSeconds: 10, history: 0))
        try await q.add("h", hold: 1)
        try await q.add("d0", delay: 3)
        try await q.add("d1", delay: 3)
        _ = try await q.store.remove(id: "d0")
        try await q.add("d2", delay: 3)
        q.at(3)
        let state = try await q.store.state(limit: 10)
        #expect(state.holding.map(\.id) + state.waiting.map(\.id) == ["d1", "d2"])
    }

    @Test func maxWaitingCountsDelayedButNotGrantsMergesOrCancels() async throws {
        let q = try await Line(QueueConfig(maxWaiting: 2, holdSeconds: 20, opposites: [["like", "unlike"]]))
        try await q.add("holder")
        try await q.add("w1", key: "k", action: "like")
        try await q.add("d1", delay: 10)
        await #expect(throws: QueueError.full(retryAfterSeconds: 20)) { try await q.add("w2") }
        await #expect(throws: QueueError.full(retryAfterSeconds: 20)) { try await q.add("d2", delay: 1) }
        #expect(try await q.add("dup", key: "k", action: "like").status == .merged)
        #expect(try await q.add("opp", key: "k", action: "unlike").status == .cancelled)
    }

    @Test func retryAfterFollowsTheMeanHoldPerSlot() async throws {
        let q = try await Line(QueueConfig(capacity: 2, maxWaiting: 0, holdSeconds: 30))
        try await q.add("a")
        try await q.add("b")
        await #expect(throws: QueueError.full(retryAfterSeconds: 15)) { try await q.add("c") }
        q.at(4)
        _ = try await q.store.complete(id: "a")
        try await q.add("c")
        _ = try await q.store.complete(id: "b")
        try await q.add("d")
        await #expect(throws: QueueError.full(retryAfterSeconds: 2)) { try await q.add("e") }
    }

    @Test func estimatedWaitFromTheHoldersExpiries() async throws {
        let q = try await Line(QueueConfig(capacity: 2, holdSeconds: 60, idleSeconds: 0, claimSeconds: 0))
        for id in ["a", "b", "c", "d", "f"] { try await q.add(id) }
        #expect(try await q.store.visitor(id: "c").estimatedWaitSeconds == 60)
        #expect(try await q.store.visitor(id: "f").estimatedWaitSeconds == 120)
        q.at(10)
        _ = try await q.store.complete(id: "a")
        q.at(20)
        _ = try await q.store.complete(id: "b")
        let f = try await q.store.visitor(id: "f")
        #expect(f.position == 1 && f.estimatedWaitSeconds == 50)
        #expect(try await q.add("g").estimatedWaitSeconds == 60)
        #expect(try await q.add("h").estimatedWaitSeconds == 65)
        let unknown = try await Line(QueueConfig(holdSeconds: 0))
        try await unknown.add("x")
        #expect(try await unknown.add("y").estimatedWaitSeconds == nil)
    }

    @Test func historyKeepsOnlyTheLastFinishedVisitors() async throws {
        let q = try await Line(QueueConfig(holdSeconds: 0, history: 3))
        for i in 0..<10 {
            try await q.add("v\(i)", at: Double(i))
            _ = try await q.store.complete(id: "v\(i)")
        }
        q.at(10)
        _ = try await q.store.counts()
        for i in 0..<7 {
            await #expect(throws: QueueError.notFound("visitor \"v\(i)\"")) { try await q.store.visitor(id: "v\(i)") }
        }
        for i in 7..<10 { #expect(try await q.status("v\(i)") == .completed) }
        #expect(try await q.store.enqueue(VisitorRequest(id: "v0")).created)
        let none = try await Line(QueueConfig(history: 0))
        try await none.add("a")
        #expect(try await none.store.complete(id: "a").status == .completed)
        await #expect(throws: QueueError.notFound("visitor \"a\"")) { try await none.store.visitor(id: "a") }
    }

    @Test func statePagesHoldersThenTheLineWithCursors() async throws {
        let q = try await Line(QueueConfig(capacity: 2))
        for i in 0..<10 { try await q.add("v\(i)", priority: i % 3) }
        let first = try await q.store.state(limit: 5)
        #expect(first.holding.map(\.id) == ["v0", "v1"])
        #expect(first.waiting.map(\.id) == ["v2", "v5", "v8"] && first.waiting.map(\.position) == [1, 2, 3])
        #expect(first.more && first.counts.waiting == 8)
        let second = try await q.store.state(limit: 3, after: first.cursors.last)
        #expect(second.holding.isEmpty && second.waiting.map(\.id) == ["v4", "v7", "v3"])
        #expect(second.waiting.map(\.position) == [4, 5, 6])
        let holders = try await q.store.state(limit: 1)
        #expect(holders.holding.map(\.id) == ["v0"] && holders.waiting.isEmpty && holders.more)
        let next = try await q.store.state(limit: 1, after: holders.cursors.last)
        #expect(next.holding.map(\.id) == ["v1"] && next.more)
    }

    @Test func arrivalNumbersStartAgainBeforeTheyOverflowTheScore() async throws {
        let q = try await Line(QueueConfig(capacity: 0))
        try await q.add("a", priority: 1)
        try await q.add("b")
        _ = try await q.server.connection().command(["HSET", "usher:{queue:q}:meta", "seq", "4294967295"])
        try await q.add("c", priority: 1)  // the last number below 2^32
        try await q.add("d", priority: -1)  // renumbers a, b, c as 0, 1, 2; d is 3
        try await q.add("e", priority: 1)
        let state = try await q.store.state(limit: 10)
        #expect(state.waiting.map(\.id) == ["a", "c", "e", "b", "d"])
        #expect(
            state.cursors == [1, 1, 1, 0, -1].enumerated().map { .waiting(priority: $1, seq: [0, 2, 4, 1, 3][$0]) })
    }

    // MARK: - Try-acquire, hang-ups, undelivered grants

    @Test func timeOutAndDisconnectCancelWaitingAndDelayedVisitorsOnly() async throws {
        let q = try await Line()
        try await q.add("h")
        try await q.add("w")
        try await q.add("d", delay: 5)
        #expect(try await q.store.timeOut(id: "h").status == .granted)
        let w = try await q.store.timeOut(id: "w")
        #expect(w.status == .cancelled && w.reason == "timeout")
        let d = try await q.store.disconnect(id: "d")
        #expect(d?.status == .cancelled && d?.reason == "disconnected")
        #expect(try await q.store.disconnect(id: "nobody") == nil)
        let once = try await q.store.enqueue(VisitorRequest(id: "t"), tryOnce: true)
        #expect(once.created && once.view.status == .cancelled && once.view.reason == "timeout")
        let counts = try await q.store.counts().counts
        #expect(counts.timedOutTotal == 2 && counts.cancelledTotal == 3 && counts.holding == 1)
        _ = try await q.store.complete(id: "h")
        #expect(try await q.store.enqueue(VisitorRequest(id: "u"), tryOnce: true).view.status == .granted)
    }

    @Test func anUndeliveredGrantIsReleasedAndItsSlotPassesOn() async throws {
        let q = try await Line()
        let a = try await q.add("a")
        try await q.add("b")
        let fence = try #require(a.fence)
        #expect(try await q.store.undoGrant(id: "a", fence: fence + 1) == nil)
        let undone = try await q.store.undoGrant(id: "a", fence: fence)
        #expect(undone?.status == .released && undone?.reason == "undelivered")
        #expect(try await q.status("b") == .granted)
        #expect(try await q.store.undoGrant(id: "a", fence: fence) == nil)
        #expect(try await q.store.undoGrant(id: "nobody", fence: fence) == nil)
    }

    /// A retry with the same id was answered the grant: no undo takes it back
    /// after that, nor one of a visitor a retry found still waiting.
    @Test func aGrantARetryWasAnsweredIsNotUndone() async throws {
        let q = try await Line(QueueConfig(capacity: 1))
        let a = try await q.add("a")
        let retry = try await q.store.enqueue(VisitorRequest(id: "a"), tryOnce: false)
        #expect(!retry.created && retry.view == a)
        let fence = try #require(a.fence)
        #expect(try await q.store.undoGrant(id: "a", fence: fence) == nil)
        #expect(try await q.status("a") == .granted)
        try await q.add("b")
        _ = try await q.store.enqueue(VisitorRequest(id: "b"), tryOnce: false)
        _ = try await q.store.complete(id: "a")
        let b = try await q.store.visitor(id: "b")
        #expect(try await q.store.undoGrant(id: "b", fence: #require(b.fence)) == nil)
        #expect(try await q.status("b") == .granted)
    }
}
