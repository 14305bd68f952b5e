import TestSupport
import Testing

@testable import Locking
@testable import UsherCore

/// `on_timeout=cancel`, a try-acquire (Redisson `tryLock(waitTime)`): a
/// visitor still waiting when its request's wait ends is cancelled, reason
/// `timeout`, so the caller leaves nothing behind. On a `ManualClock`.
@Suite struct TryAcquireTests {
    typealias F = QueueFixtures
    let clock = ManualClock()

    func later(_ seconds: Double) -> Timestamp { clock.now().adding(seconds: seconds) }

    func queue(events: EventLog? = nil) -> VisitorQueue {
        VisitorQueue(name: "lock", config: QueueConfig(capacity: 1, holdSeconds: 60), clock: clock, events: events)
    }

    // MARK: - The engine

    @Test func timeOutCancelsWaitingAndDelayedVisitorsOnly() throws {
        var e = F.engine(QueueConfig(capacity: 1))
        let a = try e.add("a")
        try e.add("b")
        try e.add("c", delay: 5)
        let b = try e.timeOut(id: "b", now: F.at(1))
        #expect(b.status == .cancelled && b.reason == "timeout" && b.finishedAt == F.at(1))
        let c = try e.timeOut(id: "c", now: F.at(2))
        #expect(c.status == .cancelled && c.reason == "timeout")
        // A holder's grant came first: it stays.
        #expect(try e.timeOut(id: "a", now: F.at(3)) == a)
        // A finished visitor is answered as it is, and counted once.
        #expect(try e.timeOut(id: "b", now: F.at(3)).finishedAt == F.at(1))
        #expect(e.counts.cancelledTotal == 2 && e.counts.timedOutTotal == 2)
        #expect(e.counts.waiting == 0 && e.counts.delayed == 0 && e.counts.holding == 1)
        #expect(throws: QueueError.notFound("visitor \"zz\"")) { try e.timeOut(id: "zz", now: F.at(3)) }
    }

    // MARK: - The queue's long-poll

    @Test func aVisitorStillWaitingAtTheDeadlineIsCancelled() async throws {
        let events = EventLog(clock: clock)
        let seen = record(events)
        let q = queue(events: events)
        _ = try await q.enqueue(VisitorRequest(id: "a"))
        _ = try await q.enqueue(VisitorRequest(id: "b"))
        let deadline = later(5)
        let poster = Task { try await q.waitWhileWaiting(id: "b", until: deadline, cancellingOnTimeout: true) }
        await F.eventually { await q.waiterCount == 1 }
        clock.advance(by: 5)
        let b = try await poster.value
        #expect(b.status == .cancelled && b.reason == "timeout" && b.finishedAt == deadline)
        // Nothing is left behind: a's slot goes to nobody.
        _ = try await q.complete(id: "a")
        let counts = await q.counts
        #expect(counts.holding == 0 && counts.waiting == 0 && counts.timedOutTotal == 1)
        #expect(seen.list.withLock { $0 }.contains(#"cancelled:"timeout""#))
    }

    @Test func aGrantBeforeTheDeadlineIsAnswered() async throws {
        let q = queue()
        _ = try await q.enqueue(VisitorRequest(id: "a"))
        _ = try await q.enqueue(VisitorRequest(id: "b"))
        let poster = Task { try await q.waitWhileWaiting(id: "b", until: later(5), cancellingOnTimeout: true) }
        await F.eventually { await q.waiterCount == 1 }
        clock.advance(by: 2)
        _ = try await q.complete(id: "a")
        #expect(try await poster.value.status == .granted)
        clock.advance(by: 10)
        #expect(try await q.visitor(id: "b").status == .granted)
        #expect(await q.counts.timedOutTotal == 0)
    }

    @Test func withoutCancellingTheVisitorKeepsWaiting() async throws {
        let q = queue()
        _ = try await q.enqueue(VisitorRequest(id: "a"))
        _ = try await q.enqueue(VisitorRequest(id: "b"))
        let poster = Task { try await q.waitWhileWaiting(id: "b", until: later(5)) }
        await F.eventually { await q.waiterCount == 1 }
        clock.advance(by: 5)
        #expect(try await poster.value.status == .waiting)
    }

    @Test func aHangUpIsLeftToOnDisconnect() async throws {
        let q = queue()
        _ = try await q.enqueue(VisitorRequest(id: "a"))
        _ = try await q.enqueue(VisitorRequest(id: "b"))
        _ = try await q.enqueue(VisitorRequest(id: "c"))
        let withdrawing = Task {
            try await q.waitWhileWaiting(id: "b", until: later(5), withdrawing: true, cancellingOnTimeout: true)
        }
        let keeping = Task { try await q.waitWhileWaiting(id: "c", until: later(5), cancellingOnTimeout: true) }
        await F.eventually { await q.waiterCount == 2 }
        withdrawing.cancel()
        keeping.cancel()
        #expect(try await withdrawing.value.reason == "disconnected")
        // `on_disconnect=keep`: the hang-up only ended the wait; the visitor stays in line.
        #expect(try await keeping.value.status == .waiting)
        #expect(await q.counts.timedOutTotal == 0)
    }

    @Test func withoutAWaitAVisitorNotGrantedAtOnceIsCancelledInTheSameStep() async throws {
        let events = EventLog(clock: clock)
        let seen = record(events)
        let q = queue(events: events)
        let a = try await q.enqueueOrTimeOut(VisitorRequest(id: "a"))
        #expect(a.view.status == .granted && a.created)
        let b = try await q.enqueueOrTimeOut(VisitorRequest(id: "b"))
        #expect(b.view.status == .cancelled && b.view.reason == "timeout" && b.created)
        #expect(seen.list.withLock { $0 } == ["granted:null", #"cancelled:"timeout""#])
        let counts = await q.counts
        #expect(counts.enqueuedTotal == 2 && counts.cancelledTotal == 1 && counts.timedOutTotal == 1)
        // A retry with the same id answers the cancelled visitor as it is.
        let again = try await q.enqueueOrTimeOut(VisitorRequest(id: "b"))
        #expect(again.view == b.view && !again.created)
    }
}

extension TryAcquireTests {
    /// What the enqueue itself applied (an expiry, the grant it made) is
    /// still reported with the try-acquire's cancellation.
    @Test func aTryWithoutAWaitKeepsTheChangesOfItsEnqueue() throws {
        var e = F.engine(QueueConfig(capacity: 1, holdSeconds: 5))
        try e.add("a")
        try e.add("b")
        _ = e.drainChanges()
        let c = try e.enqueueOrTimeOut(VisitorRequest(id: "c"), now: F.at(5))
        #expect(c.view.status == .cancelled && c.view.reason == "timeout" && c.created)
        #expect(Set(e.drainChanges()) == ["a", "b", "c"])
        #expect(try e.visitor(id: "b", now: F.at(5)).status == .granted)
        #expect(e.counts.timedOutTotal == 1 && e.counts.expiredTotal == 1)
    }
}
