import Foundation
import Testing

@testable import UsherCore
@testable import UsherRedis

/// The queue's behaviours through `QueueService`, once on each backend (a
/// `VisitorQueue`, a `RedisQueue` on a real redis-server), on a `ManualClock`:
/// what QueueManagerTests, QueueEngineTests, QueueDedupTests, TryAcquireTests,
/// DisconnectCoreTests and WaitEstimateTests check on memory alone.
///
/// Where the backends differ by design, the test asserts the shared property
/// and says what differs. On Redis a deadline that passes is applied by the
/// queue's timer (a `tick`) or by the next operation, whichever comes first:
/// the tests assert what the API shows after the clock moves.
///
/// Differences by design, not tested as equal: fences (see the first test);
/// the storage budget (507 `storage_full`) binds memory queues only, Redis
/// has its own `maxmemory`; Redis emits a change's events when its notice
/// comes back through pub/sub, after the call returned (a subscriber that
/// joins right after a call may still see its events), memory emits them
/// inside the call.
@Suite(.serialized, .timeLimit(.minutes(2))) struct QueueServiceTests {
    typealias Q = QueueUnderTest
    static let both: [TestBackend] = [.memory, .redis]

    // MARK: Order, capacity, holds

    @Test(arguments: both) func priorityFirstThenFIFOWithFencesRisingInGrantOrder(_ backend: TestBackend) async throws {
        try await Q.with(backend) { q in
            try await q.enqueue("holder")
            for (id, priority) in [("low", -1), ("n1", 0), ("high", 5), ("n2", 0), ("high2", 5)] {
                try await q.enqueue(id, priority: priority)
            }
            let line = try await q.state().waiting
            #expect(line.map(\.id) == ["high", "high2", "n1", "n2", "low"])
            #expect(line.map(\.position) == [1, 2, 3, 4, 5])
            #expect(try await q.visitor("n1").position == 3)
            var granted: [String] = []
            var fences = [try await q.visitor("holder").fence ?? 0]
            var holder = "holder"
            for _ in 0..<5 {
                q.clock.advance(by: 0.5)
                try await q.complete(holder)
                let holding = try await q.state().holding
                #expect(holding.count == 1)
                holder = holding[0].id
                granted.append(holder)
                fences.append(holding[0].fence ?? 0)
            }
            #expect(granted == ["high", "high2", "n1", "n2", "low"])
            // Shared: fences strictly increase in grant order. They differ by
            // design: memory counts up by one from the queue's creation time in
            // µs; Redis takes max(last + 1, now in µs), so each grant here
            // (0.5 s apart) carries its own time.
            #expect(zip(fences, fences.dropFirst()).allSatisfy { $0 < $1 })
            switch backend {
            case .memory: #expect(fences == (0...5).map { Q.t0.micros + Int64($0) })
            case .redis: #expect(fences == (0...5).map { Q.t0.micros + Int64($0) * 500_000 })
            }
        }
    }

    @Test(arguments: both) func capacityZeroClosesRaisingGrantsLoweringTakesNothing(_ backend: TestBackend)
        async throws
    {
        try await Q.with(backend, QueueConfig(capacity: 0)) { q in
            for id in ["a", "b", "c"] { try await q.enqueue(id) }
            #expect(try await q.counts().holding == 0)
            #expect(try await q.visitor("a").estimatedWaitSeconds == nil)
            #expect(try await q.patch(QueuePatch(capacity: 2)).capacity == 2)
            #expect(try await q.state().holding.map(\.id) == ["a", "b"])
            try await q.patch(QueuePatch(capacity: 1))
            #expect(try await q.state().holding.map(\.id) == ["a", "b"])  // nobody loses a slot
            try await q.complete("a")
            #expect(try await q.status("c") == .waiting)  // 1 holder = the new capacity
            try await q.complete("b")
            #expect(try await q.status("c") == .granted)
            #expect(try await q.queue.readConfig().value().capacity == 1)
        }
    }

    @Test(arguments: both) func holdsExpireWhenTheClockPassesThem(_ backend: TestBackend) async throws {
        try await Q.with(backend, QueueConfig(holdSeconds: 10)) { q in
            let a = try await q.enqueue("a")
            #expect(a.expiresAt == q.at(10))
            try await q.enqueue("b", hold: 3)
            q.clock.advance(by: 9.999)
            #expect(try await q.status("a") == .granted)
            q.clock.advance(by: 0.001)
            let b = try await q.visitor("b")
            #expect(b.status == .granted && b.grantedAt == q.at(10) && b.expiresAt == q.at(13))
            let gone = try await q.visitor("a")
            #expect(gone.status == .expired && gone.finishedAt == q.at(10))
            await #expect(throws: QueueError.notGranted(current: .expired)) { try await q.complete("a") }
            #expect(try await q.counts().expiredTotal == 1)
            // Nobody calls the queue now: the timer applies b's expiry.
            q.clock.advance(by: 3)
            await eventually { (try? await q.counts().expiredTotal) == 2 }
            #expect(try await q.visitor("b").finishedAt == q.at(13))
        }
    }

    @Test(arguments: both) func extendMovesTheExpiryFromNow(_ backend: TestBackend) async throws {
        try await Q.with(backend, QueueConfig(holdSeconds: 10)) { q in
            try await q.enqueue("a", hold: 4)
            try await q.enqueue("b")
            q.clock.advance(by: 3)
            #expect(try await q.extend("a").expiresAt == q.at(7))  // its own hold again
            q.clock.advance(by: 3)
            #expect(try await q.extend("a", 10).expiresAt == q.at(16))
            await #expect(
                throws: QueueError.invalid(
                    field: "hold_seconds", message: "must be at most 10, the queue's hold_seconds")
            ) { try await q.extend("a", 11) }
            await #expect(throws: QueueError.notGranted(current: .waiting)) { try await q.extend("b") }
            q.clock.advance(by: 9.9)
            #expect(try await q.status("a") == .granted)  // the old expiry at 7 no longer applies
            q.clock.advance(by: 0.1)
            #expect(try await q.status("a") == .expired)
            #expect(try await q.status("b") == .granted)
            await #expect(throws: QueueError.notFound("visitor \"zz\"")) { try await q.extend("zz") }
        }
    }

    @Test(arguments: both) func completeAndRemoveEndVisitorsAsTheirStatusSays(_ backend: TestBackend) async throws {
        try await Q.with(backend) { q in
            try await q.enqueue("a")
            try await q.enqueue("b")
            try await q.enqueue("c")
            let removed = try await q.remove("b")
            #expect(removed.status == .cancelled && removed.reason == "client")
            let released = try await q.remove("a")
            #expect(released.status == .released && released.reason == "client")
            #expect(try await q.status("c") == .granted)
            #expect(try await q.complete("c").status == .completed)
            await #expect(throws: QueueError.notGranted(current: .completed)) { try await q.complete("c") }
            let counts = try await q.counts()
            #expect(counts.cancelledTotal == 1 && counts.releasedTotal == 1 && counts.completedTotal == 1)
            #expect(counts.enqueuedTotal == 3 && counts.grantedTotal == 2)
        }
    }

    // MARK: Dedup, opposites, delays, room

    @Test(arguments: both) func duplicatesMergeAndOppositesCancel(_ backend: TestBackend) async throws {
        try await Q.with(backend, QueueConfig(opposites: [["like", "unlike"]])) { q in
            try await q.enqueue("h")
            try await q.enqueue("a", key: "k", action: "like")
            try await q.enqueue("b", key: "other")
            q.clock.advance(by: 1)
            let dup = try await q.enqueueOutcome(VisitorRequest(key: "k", action: "like", priority: 9))
            #expect(dup.created && dup.view.status == .merged && dup.view.mergedInto == "a")
            #expect(dup.view.finishedAt == q.at(1))
            #expect(try await q.state().waiting.map(\.id) == ["a", "b"])
            // Only the most recent waiting visitor with the key is checked: a.
            let c = try await q.enqueue("c", key: "k", action: "unlike")
            #expect(c.status == .cancelled && c.cancelledWith == "a" && c.reason == "opposite")
            let a = try await q.visitor("a")
            #expect(a.status == .cancelled && a.cancelledWith == "c" && a.reason == "opposite")
            #expect(a.finishedAt == q.at(1))
            // Granted visitors are never merged into.
            #expect(try await q.enqueue("h2", key: "k", action: "like").status == .waiting)
            let counts = try await q.counts()
            #expect(counts.mergedTotal == 1 && counts.cancelledTotal == 2 && counts.waiting == 2)
        }
    }

    @Test(arguments: both) func withKeepLatestTheNewerDuplicateTakesTheOlderOnesPlace(_ backend: TestBackend)
        async throws
    {
        try await Q.with(backend, QueueConfig(dedup: .key, dedupKeep: .latest, opposites: [["like", "unlike"]])) { q in
            try await q.enqueue("h")
            try await q.enqueue("a", key: "k", action: "like", priority: 1)
            try await q.enqueue("b", key: "other")
            q.clock.advance(by: 1)
            let c = try await q.enqueueOutcome(VisitorRequest(id: "c", key: "k", action: "like"))
            #expect(c.created && c.view.status == .waiting && c.view.position == 1 && c.view.priority == 1)
            let a = try await q.visitor("a")
            #expect(a.status == .merged && a.mergedInto == "c" && a.reason == "replaced")
            #expect(a.finishedAt == q.at(1))
            #expect(try await q.state().waiting.map(\.id) == ["c", "b"])
            // The replacement is the key's most recent waiter: an opposite meets it.
            #expect(try await q.enqueue("u", key: "k", action: "unlike").cancelledWith == "c")
            let counts = try await q.counts()
            #expect(counts.mergedTotal == 1 && counts.cancelledTotal == 2 && counts.waiting == 1)
        }
    }

    @Test(arguments: both) func adjacentComparesOnlyWithTheMostRecentArrivalStillWaiting(_ backend: TestBackend)
        async throws
    {
        try await Q.with(backend, QueueConfig(dedup: .adjacent, opposites: [["like", "unlike"]])) { q in
            try await q.enqueue("holder")
            try await q.enqueue("a", key: "k", action: "like")
            #expect(try await q.enqueue("b", key: "k", action: "like").mergedInto == "a")
            try await q.enqueue("c", key: "j", action: "x")
            #expect(try await q.enqueue("d", key: "k", action: "like").status == .waiting)  // c came last
            #expect(try await q.enqueue("e", key: "k", action: "unlike").cancelledWith == "d")
            // d is gone; the most recent arrival still waiting is c again.
            #expect(try await q.enqueue("f", key: "j", action: "x").mergedInto == "c")
            // Priority does not matter, arrival does.
            try await q.enqueue("g", key: "p", priority: 10)
            try await q.enqueue("h", key: "q", priority: -10)
            #expect(try await q.enqueue("j2", key: "q").mergedInto == "h")
            #expect(try await q.enqueue("i", key: "p").status == .waiting)
        }
    }

    @Test(arguments: both) func dedupActsWhenADelayEnds(_ backend: TestBackend) async throws {
        try await Q.with(backend, QueueConfig(opposites: [["like", "unlike"]])) { q in
            try await q.enqueue("holder")
            try await q.enqueue("a", key: "k", action: "like")
            #expect(try await q.enqueue("d", key: "k", action: "like", delay: 5).status == .delayed)
            try await q.enqueue("o", key: "j", action: "like", delay: 5)
            q.clock.advance(by: 1)
            try await q.enqueue("w", key: "j", action: "unlike")
            q.clock.advance(by: 4)
            let merged = try await q.visitor("d")
            #expect(merged.status == .merged && merged.mergedInto == "a" && merged.finishedAt == q.at(5))
            #expect(try await q.visitor("o").cancelledWith == "w")
            #expect(try await q.state().waiting.map(\.id) == ["a"])
        }
    }

    @Test(arguments: both) func afterSwitchingToKeyModeDuplicatesMergeIntoTheMostRecent(_ backend: TestBackend)
        async throws
    {
        try await Q.with(backend, QueueConfig(dedup: .off)) { q in
            try await q.enqueue("holder")
            try await q.enqueue("a", key: "k")
            #expect(try await q.enqueue("b", key: "k").status == .waiting)
            try await q.patch(QueuePatch(dedup: .key))
            #expect(try await q.enqueue("c", key: "k").mergedInto == "b")
            try await q.remove("b")
            #expect(try await q.enqueue("d", key: "k").mergedInto == "a")
            try await q.remove("a")
            #expect(try await q.enqueue("e", key: "k").status == .waiting)
        }
    }

    @Test(arguments: both) func delayedVisitorsEnterTheLineWhenTheirDelayEnds(_ backend: TestBackend) async throws {
        try await Q.with(backend) { q in
            try await q.enqueue("h")
            #expect(try await q.enqueue("d1", delay: 3).status == .delayed)
            try await q.enqueue("d2", delay: 2)
            try await q.enqueue("w")
            let first = try await q.state()
            #expect(first.delayed.map(\.id) == ["d2", "d1"] && first.counts.delayed == 2)
            q.clock.advance(by: 2)
            #expect(try await q.state().waiting.map(\.id) == ["w", "d2"])
            q.clock.advance(by: 1)
            let after = try await q.state()
            #expect(after.waiting.map(\.id) == ["w", "d2", "d1"] && after.delayed.isEmpty)
            // A delay ending on an empty slot is a grant.
            try await q.remove("h")
            try await q.remove("w")
            try await q.remove("d2")
            try await q.remove("d1")
            try await q.enqueue("x", delay: 1)
            q.clock.advance(by: 1)
            let x = try await q.visitor("x")
            #expect(x.status == .granted && x.grantedAt == q.at(4))
        }
    }

    @Test(arguments: both) func maxWaitingCountsDelayedVisitorsAndAnswersFull(_ backend: TestBackend) async throws {
        try await Q.with(backend, QueueConfig(capacity: 1, maxWaiting: 2, holdSeconds: 10)) { q in
            try await q.enqueue("a")
            try await q.enqueue("b")
            try await q.enqueue("d", delay: 5)
            await #expect(throws: QueueError.full(retryAfterSeconds: 10)) { try await q.enqueue("c") }
            // A merge needs no room; an existing id answers the visitor.
            #expect(try await q.enqueueOutcome(VisitorRequest(id: "b")).created == false)
            try await q.remove("d")
            #expect(try await q.enqueue("c").status == .waiting)
            #expect(try await q.counts().enqueuedTotal == 4)
        }
    }

    @Test(arguments: both) func historyKeepsOnlyTheLastFinishedVisitors(_ backend: TestBackend) async throws {
        try await Q.with(backend, QueueConfig(holdSeconds: 0, history: 3)) { q in
            for i in 0..<10 {
                try await q.enqueue("v\(i)")
                try await q.complete("v\(i)")
            }
            _ = try await q.state(limit: 0)
            for i in 0..<7 {
                await #expect(throws: QueueError.notFound("visitor \"v\(i)\"")) { try await q.visitor("v\(i)") }
            }
            for i in 7..<10 { #expect(try await q.status("v\(i)") == .completed) }
            // A forgotten client id can be used again.
            #expect(try await q.enqueueOutcome(VisitorRequest(id: "v0")).created)
        }
    }

    /// Seed 003: with `history: 2` a repeated id was granted again once
    /// two others had finished; `dedup_seconds` keeps it known for as long.
    @Test(arguments: both) func dedupSecondsKeepsIdsKnownBeyondHistory(_ backend: TestBackend) async throws {
        try await Q.with(backend, QueueConfig(holdSeconds: 0, history: 2, dedupSeconds: 60)) { q in
            try await q.enqueue("h1")
            try await q.complete("h1")
            for i in 0..<4 {
                try await q.enqueue("v\(i)")
                try await q.complete("v\(i)")
            }
            q.clock.advance(by: 59)
            let again = try await q.enqueueOutcome(VisitorRequest(id: "h1"))
            #expect(!again.created && again.view.status == .completed && again.view.finishedAt == q.at(0))
            q.clock.advance(by: 1)
            _ = try await q.state(limit: 0)
            await #expect(throws: QueueError.notFound("visitor \"h1\"")) { try await q.visitor("h1") }
            #expect(try await q.enqueueOutcome(VisitorRequest(id: "h1")).created)
            // Within history, an id is known however old it is.
            q.clock.advance(by: 600)
            #expect(try await q.status("v3") == .completed)
            try await q.patch(QueuePatch(dedupSeconds: 0))
            #expect(try await q.queue.readConfig().value().dedupSeconds == 0)
        }
    }

    // MARK: Reading

    @Test(arguments: both) func pagesFollowTheirCursorsAndListEachVisitorOnce(_ backend: TestBackend) async throws {
        try await Q.with(backend, QueueConfig(capacity: 3)) { q in
            for id in ["h1", "h2", "h3"] { try await q.enqueue(id) }
            for (i, priority) in [0, 2, 0, 1, 2, 0, 0].enumerated() { try await q.enqueue("w\(i)", priority: priority) }
            let expected = ["h1", "h2", "h3", "w1", "w4", "w3", "w0", "w2", "w5", "w6"]
            var listed: [String] = []
            var cursor: QueueCursor?
            var pages = 0
            repeat {
                let page = try await q.state(limit: 2, after: cursor)
                listed += (page.holding + page.waiting).map(\.id)
                #expect(page.cursors.count == page.holding.count + page.waiting.count)
                cursor = page.more ? page.cursors.last : nil
                pages += 1
                // A visitor leaving between pages does not shift the rest.
                if pages == 2 { try await q.remove("w1") }
            } while cursor != nil && pages < 10
            #expect(listed == expected)
            #expect(pages == 5)
            let waiting = try await q.state(limit: 2, after: .holding(fence: Int64.max)).waiting
            #expect(waiting.map(\.id) == ["w4", "w3"] && waiting.map(\.position) == [1, 2])
        }
    }

    @Test(arguments: both) func theWaitEstimateFollowsTheHoldersExpiries(_ backend: TestBackend) async throws {
        try await Q.with(backend, QueueConfig(capacity: 1, holdSeconds: 60, idleSeconds: 0, claimSeconds: 0)) { q in
            try await q.enqueue("quick")
            q.clock.advance(by: 0.027)
            try await q.complete("quick")  // the mean of finished holds: 27 ms
            q.clock.advance(by: 0.973)
            try await q.enqueue("holder")
            #expect(try await q.enqueue("next").estimatedWaitSeconds == 60)
            q.clock.advance(by: 30.5)
            #expect(try await q.visitor("next").estimatedWaitSeconds == 29.5)
            // The next round: one mean hold after the holder's expiry.
            #expect(try await q.enqueue("after").estimatedWaitSeconds == 29.527)
        }
    }

    /// A queue without a hold limit: the mean of finished holds says when a
    /// slot frees only while no holder has held longer; past that, and with
    /// nothing finished yet, the estimate is null with its reason, never ~0.
    @Test(arguments: both) func anEstimateThatCannotBeMadeIsNullWithItsReason(_ backend: TestBackend) async throws {
        try await Q.with(backend, QueueConfig(capacity: 1, holdSeconds: 0, idleSeconds: 0, claimSeconds: 0)) { q in
            try await q.enqueue("first")
            let none = try await q.enqueue("early")
            #expect(none.estimatedWaitSeconds == nil && none.estimatedWaitReason == .noHoldLimit)
            q.clock.advance(by: 0.5)
            try await q.complete("first")  // the mean of finished holds: 0.5 s
            #expect(try await q.status("early") == .granted)
            q.clock.advance(by: 0.25)
            let soon = try await q.enqueue("next")
            #expect(soon.estimatedWaitSeconds == 0.5 && soon.estimatedWaitReason == nil)
            q.clock.advance(by: 120)  // early has held for two minutes
            let late = try await q.visitor("next")
            #expect(late.estimatedWaitSeconds == nil && late.estimatedWaitReason == .noHoldLimit)
            try await q.patch(QueuePatch(capacity: 0))
            #expect(try await q.visitor("next").estimatedWaitReason == .closed)
        }
    }

    // MARK: Try-acquire and undelivered grants

    @Test(arguments: both) func aTryWithoutAWaitIsGrantedOrCancelledAtOnce(_ backend: TestBackend) async throws {
        try await Q.with(backend, QueueConfig(capacity: 1, holdSeconds: 60)) { q in
            let a = try await q.enqueueOutcome(VisitorRequest(id: "a"), tryOnce: true)
            #expect(a.view.status == .granted && a.created)
            let b = try await q.enqueueOutcome(VisitorRequest(id: "b"), tryOnce: true)
            #expect(b.view.status == .cancelled && b.view.reason == "timeout" && b.created)
            let again = try await q.enqueueOutcome(VisitorRequest(id: "b"), tryOnce: true)
            #expect(again.view == b.view && !again.created)
            let counts = try await q.counts()
            #expect(counts.enqueuedTotal == 2 && counts.cancelledTotal == 1 && counts.timedOutTotal == 1)
        }
    }

    @Test(arguments: both) func aTryStillWaitingAtItsDeadlineIsCancelled(_ backend: TestBackend) async throws {
        try await Q.with(backend, QueueConfig(capacity: 1, holdSeconds: 60)) { q in
            try await q.enqueue("a")
            try await q.enqueue("b")
            try await q.enqueue("c")
            let deadline = q.later(5)
            let tryB = q.parkOutOfLine("b", until: deadline, cancellingOnTimeout: true)
            let waitC = q.parkOutOfLine("c", until: deadline)
            await q.parked(2)
            q.clock.advance(by: 5)
            let b = try await tryB.value
            #expect(b.status == .cancelled && b.reason == "timeout" && b.finishedAt == deadline)
            // Without cancelling, the visitor keeps its place.
            #expect(try await waitC.value.status == .waiting)
            try await q.complete("a")
            #expect(try await q.status("c") == .granted)
            #expect(try await q.counts().timedOutTotal == 1)
        }
    }

    @Test(arguments: both) func anUndeliveredGrantIsReleasedOnlyForItsFence(_ backend: TestBackend) async throws {
        try await Q.with(backend, QueueConfig(capacity: 1, holdSeconds: 60)) { q in
            let fence = try #require(try await q.enqueue("a").fence)
            try await q.enqueue("b")
            q.queue.releaseUndelivered(id: "a", fence: fence + 1)
            #expect(try await q.status("a") == .granted)
            q.queue.releaseUndelivered(id: "a", fence: fence)
            await eventually { (try? await q.status("a")) == .released }
            let a = try await q.visitor("a")
            #expect(a.reason == "undelivered")
            #expect(try await q.status("b") == .granted)
        }
    }

    /// A retry with the same id answered the grant: the undo of the request
    /// before it leaves the grant alone (`b`, not retried, is the control).
    @Test(arguments: both) func aGrantAnsweredToARetryIsNotUndone(_ backend: TestBackend) async throws {
        try await Q.with(backend, QueueConfig(capacity: 2, holdSeconds: 60)) { q in
            let a = try await q.enqueue("a")
            let b = try await q.enqueue("b")
            let retry = try await q.enqueueOutcome(VisitorRequest(id: "a"))
            #expect(retry.view == a && !retry.created)
            q.queue.releaseUndelivered(id: "a", fence: try #require(a.fence))
            q.queue.releaseUndelivered(id: "b", fence: try #require(b.fence))
            await eventually { (try? await q.status("b")) == .released }
            try await Task.sleep(for: .milliseconds(100))
            #expect(try await q.status("a") == .granted)
        }
    }

    // MARK: Long-polls

    @Test(arguments: both) func longPollsAreWokenByACompleteFromAnotherTask(_ backend: TestBackend) async throws {
        try await Q.with(backend) { q in
            try await q.enqueue("a")
            try await q.enqueue("b")
            let deadline = q.later(30)
            let onB = q.parkOutOfLine("b", until: deadline)
            let onA = q.parkForChange("a", from: .granted, until: deadline)
            await q.parked(2)
            // On Redis the answer comes through the notice: the clock does not move.
            let complete = Task { try await q.complete("a") }
            _ = try await complete.value
            let b = try await onB.value
            #expect(b.status == .granted && b.grantedAt == q.at(0))
            #expect(try await onA.value.status == .completed)
            #expect(await q.parkedCount() == 0)
        }
    }

    @Test(arguments: both) func aLongPollIsWokenByAHoldExpiringOnTheClock(_ backend: TestBackend) async throws {
        try await Q.with(backend, QueueConfig(holdSeconds: 10)) { q in
            try await q.enqueue("a")
            try await q.enqueue("b")
            let waiter = q.parkOutOfLine("b", until: q.later(60))
            await q.parked(1)
            q.clock.advance(by: 9.5)
            await q.parked(1)  // Redis: re-parked after its 1 s re-read
            q.clock.advance(by: 0.5)
            let b = try await waiter.value
            #expect(b.status == .granted && b.grantedAt == q.at(10))
            #expect(try await q.status("a") == .expired)
        }
    }

    @Test(arguments: both) func aChangeWaitAnswersTheUnchangedViewAtItsDeadline(_ backend: TestBackend) async throws {
        try await Q.with(backend) { q in
            try await q.enqueue("a")
            try await q.enqueue("b")
            let waiter = q.parkForChange("b", from: .waiting, until: q.later(5))
            await q.parked(1)
            q.clock.advance(by: 4.999)
            await q.parked(1)  // still waiting (Redis: re-parked after its 1 s re-reads)
            q.clock.advance(by: 0.001)
            let b = try await waiter.value
            #expect(b.status == .waiting && b.position == 1)
            #expect(await q.parkedCount() == 0)
        }
    }

    @Test(arguments: both) func waitsAnswerAtOnceWhenThereIsNothingToWaitFor(_ backend: TestBackend) async throws {
        try await Q.with(backend) { q in
            try await q.enqueue("a")
            #expect(try await q.parkForChange("a", from: .waiting, until: q.later(30)).value.status == .granted)
            #expect(try await q.parkOutOfLine("a", until: q.later(30)).value.status == .granted)
            try await q.enqueue("b")
            #expect(try await q.parkForChange("b", from: .waiting, until: q.clock.now()).value.status == .waiting)
            await #expect(throws: QueueError.notFound("visitor \"zz\"")) {
                try await q.parkForChange("zz", from: .waiting, until: q.later(30)).value
            }
            #expect(await q.parkedCount() == 0)
        }
    }

    @Test(arguments: both) func delayedThenGrantedIsSeenAsOneChange(_ backend: TestBackend) async throws {
        try await Q.with(backend) { q in
            try await q.enqueue("d", delay: 3)
            let changed = q.parkForChange("d", from: .delayed, until: q.later(30))
            let leftLine = q.parkOutOfLine("d", until: q.later(30))
            await q.parked(2)
            q.clock.advance(by: 3)
            #expect(try await changed.value.status == .granted)
            #expect(try await leftLine.value.status == .granted)
        }
    }

    @Test(arguments: both) func aCancelledWithdrawingWaitCancelsTheVisitor(_ backend: TestBackend) async throws {
        try await Q.with(backend, QueueConfig(capacity: 1, holdSeconds: 60)) { q in
            // Subscribed first: Redis emits events when the notice comes back, after the call returned.
            let seen = q.recordEvents()
            try await q.enqueue("a")
            try await q.enqueue("b")
            try await q.enqueue("c")
            let deadline = q.later(30)
            let poster = q.parkOutOfLine("b", until: deadline, withdrawing: true)
            let keeping = q.parkOutOfLine("c", until: deadline)
            let watcher = q.parkForChange("b", from: .waiting, until: deadline)
            await q.parked(3)
            poster.cancel()
            keeping.cancel()
            let b = try await poster.value
            #expect(b.status == .cancelled && b.reason == "disconnected")
            #expect(try await watcher.value.status == .cancelled)
            await eventually { seen.all.last == "cancelled:b:disconnected" }
            #expect(seen.all == ["granted:a:-", "enqueued:b:-", "enqueued:c:-", "cancelled:b:disconnected"])
            // Without withdrawing, the hang-up only ends the wait.
            #expect(try await keeping.value.status == .waiting)
            try await q.complete("a")
            #expect(try await q.status("c") == .granted)
            #expect(try await q.counts().timedOutTotal == 0)
        }
    }

    @Test(arguments: both) func aWaitCancelledBeforeItParksWithdrawsToo(_ backend: TestBackend) async throws {
        try await Q.with(backend) { q in
            try await q.enqueue("a")
            try await q.enqueue("b")
            let queue = q.queue
            let deadline = q.later(30)
            let poster = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await queue.parkUntilOutOfLine(
                    id: "b", until: deadline, withdrawing: true, cancellingOnTimeout: false
                ).view()
            }
            #expect(try await poster.value.reason == "disconnected")
            #expect(await q.parkedCount() == 0)
        }
    }

    /// Redis only (memory has no read in flight): a task cancelled while its
    /// long-poll reads the visitor still withdraws it.
    @Test func aCancellationDuringARedisReadStillWithdraws() async throws {
        try await Q.with(.redis, QueueConfig(capacity: 1, holdSeconds: 60)) { q in
            try await q.enqueue("a")
            try await q.enqueue("b")
            let server = try #require(q.server)
            let board = try #require(q.queue as? RedisQueue).board
            server.signal(SIGSTOP)
            let poster = q.parkOutOfLine("b", until: q.later(30), withdrawing: true)
            await eventually { board.openCount == 1 }
            try await Task.sleep(for: .milliseconds(50))  // the read is sent, Redis does not answer
            poster.cancel()
            server.signal(SIGCONT)
            let b = try await poster.value
            #expect(b.status == .cancelled && b.reason == "disconnected")
            #expect(try await q.status("b") == .cancelled)
        }
    }

    /// Redis only: with Redis down, a cancelled long-poll ends at once (its
    /// client is gone) instead of re-reading until its deadline.
    @Test func aCancelledLongPollEndsWhileRedisIsDown() async throws {
        try await Q.with(.redis, QueueConfig(capacity: 1, holdSeconds: 60)) { q in
            try await q.enqueue("a")
            try await q.enqueue("b")
            let keeping = q.parkOutOfLine("b", until: q.later(30))
            await q.parked(1)
            q.server?.stop()
            let ended = SeenEvents()
            Task {
                _ = try? await keeping.value
                ended.list.withLock { $0.append("ended") }
            }
            keeping.cancel()
            let start = ContinuousClock.now
            while ended.all.isEmpty && ContinuousClock.now - start < .seconds(3) {
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(ended.all == ["ended"], "the cancelled long-poll kept re-reading")
            q.clock.advance(by: 31)  // ends it anyway, at its deadline
            _ = try? await keeping.value
        }
    }

    @Test(arguments: both) func deletingTheQueueAnswersItsLongPollsGone(_ backend: TestBackend) async throws {
        try await Q.with(backend) { q in
            try await q.enqueue("a")
            try await q.enqueue("b")
            let waiter = q.parkOutOfLine("b", until: q.later(30))
            await q.parked(1)
            switch q.queue {
            case let memory as VisitorQueue: await memory.close()
            case let redis as RedisQueue: #expect(try await redis.delete())
            default: Issue.record("unknown backend")
            }
            await #expect(throws: QueueError.gone) { try await waiter.value }
            await #expect(throws: QueueError.gone) { try await q.enqueue("c") }
        }
    }

    // MARK: Events

    /// One story on each backend: the same events (type, visitor, reason) in the same order.
    @Test(arguments: both) func bothBackendsTellTheSameStoryInEvents(_ backend: TestBackend) async throws {
        try await Q.with(
            backend,
            QueueConfig(
                capacity: 1, holdSeconds: 10, opposites: [["like", "unlike"]], idleSeconds: 0, claimSeconds: 0)
        ) { q in
            let seen = q.recordEvents()
            try await q.enqueue("a")
            try await q.enqueue("b", key: "k", action: "like")
            try await q.enqueue("m", key: "k", action: "like")
            try await q.enqueue("c", key: "k", action: "unlike")
            try await q.enqueue("d")
            try await q.enqueue("e", delay: 2)
            q.clock.advance(by: 2)
            try await q.complete("a")
            _ = try await q.enqueueOutcome(VisitorRequest(id: "t"), tryOnce: true)
            q.clock.advance(by: 10)
            _ = try await q.state()
            try await q.remove("e")
            let expected = [
                "granted:a:-", "enqueued:b:-", "merged:m:-", "cancelled:b:opposite", "cancelled:c:opposite",
                "enqueued:d:-", "enqueued:e:-", "waiting:e:-", "completed:a:-", "granted:d:-", "cancelled:t:timeout",
                "expired:d:-", "granted:e:-", "released:e:client",
            ]
            await eventually { seen.all.count >= expected.count }
            #expect(seen.all == expected)
        }
    }
}
