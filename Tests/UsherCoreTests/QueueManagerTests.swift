import Foundation
import Testing

@testable import Locking
@testable import UsherCore

/// The `VisitorQueue` actor on a `ManualClock`: long-polls, the one timer, lifecycle.
@Suite struct QueueManagerTests {
    typealias F = QueueFixtures
    let clock = ManualClock()

    func queue(_ config: QueueConfig = QueueConfig()) -> VisitorQueue {
        VisitorQueue(name: "jobs", config: config, clock: clock)
    }

    func later(_ seconds: Double) -> Timestamp { clock.now().adding(seconds: seconds) }

    @Test func operationsRunSynchronouslyThroughWithIsolation() throws {
        let q = queue()
        let (a, created) = try q.withIsolation { q throws(QueueError) in try q.enqueue(VisitorRequest(id: "a")) }
        #expect(created && a.status == .granted && a.fence == clock.now().micros)
        let done = try q.withIsolation { q throws(QueueError) in try q.complete(id: "a") }
        #expect(done.status == .completed)
        #expect(throws: QueueError.notGranted(current: .completed)) {
            try q.withIsolation { q throws(QueueError) in try q.complete(id: "a") }
        }
    }

    @Test func aWaiterIsWokenByACompleteWithTheFinalState() async throws {
        let q = queue()
        _ = try await q.enqueue(VisitorRequest(id: "a"))
        _ = try await q.enqueue(VisitorRequest(id: "b"))
        let deadline = later(30)
        let onB = Task { try await q.waitForChange(id: "b", from: .waiting, until: deadline) }
        let onA = Task { try await q.waitForChange(id: "a", from: .granted, until: deadline) }
        await F.eventually { await q.waiterCount == 2 }
        _ = try q.withIsolation { q throws(QueueError) in try q.complete(id: "a") }
        let b = try await onB.value
        #expect(b.status == .granted && b.grantedAt == clock.now())
        #expect(try await onA.value.status == .completed)
        #expect(await q.waiterCount == 0)
        // b's hold expiry is the only thing left on the clock: the deadline timers were cancelled.
        #expect(clock.pendingCount == 1)
    }

    @Test func aWaiterIsWokenByHoldExpiryOnTheClock() async throws {
        let q = queue(QueueConfig(holdSeconds: 10))
        _ = try await q.enqueue(VisitorRequest(id: "a"))
        _ = try await q.enqueue(VisitorRequest(id: "b"))
        let waiter = Task { try await q.waitWhileWaiting(id: "b", until: later(60)) }
        await F.eventually { await q.waiterCount == 1 }
        clock.advance(by: 9.5)
        #expect(await q.waiterCount == 1)
        clock.advance(by: 0.5)  // the queue's timer runs inside advance
        let b = try await waiter.value
        #expect(b.status == .granted && b.grantedAt == F.t0.adding(seconds: 10))
        #expect(try await q.visitor(id: "a").status == .expired)
    }

    @Test func aDeadlineReturnsTheUnchangedView() async throws {
        let q = queue()
        _ = try await q.enqueue(VisitorRequest(id: "a"))
        _ = try await q.enqueue(VisitorRequest(id: "b"))
        let waiter = Task { try await q.waitForChange(id: "b", from: .waiting, until: later(5)) }
        await F.eventually { await q.waiterCount == 1 }
        clock.advance(by: 4.999)
        #expect(await q.waiterCount == 1)
        clock.advance(by: 0.001)
        let b = try await waiter.value
        #expect(b.status == .waiting && b.position == 1)
        #expect(await q.waiterCount == 0)
    }

    @Test func aDeadlineAndAChangeAtTheSameInstantResumeOnceWithTheChange() async throws {
        let q = queue(QueueConfig(holdSeconds: 10))
        _ = try await q.enqueue(VisitorRequest(id: "a", holdSeconds: 1))
        _ = try await q.enqueue(VisitorRequest(id: "b"))
        let deadline = later(5)
        let waiters = (0..<3).map { _ in Task { try await q.waitForChange(id: "b", from: .waiting, until: deadline) } }
        await F.eventually { await q.waiterCount == 3 }
        // The hold now ends exactly at the waiters' deadline, and the queue's
        // timer is scheduled after theirs, so the deadline timers fire first.
        _ = try await q.extend(id: "a", holdSeconds: 5)
        clock.advance(by: 5)
        for w in waiters { #expect(try await w.value.status == .granted) }
        #expect(await q.waiterCount == 0)
    }

    @Test func waitsReturnAtOnceWhenThereIsNothingToWaitFor() async throws {
        let q = queue()
        _ = try await q.enqueue(VisitorRequest(id: "a"))
        #expect(try await q.waitForChange(id: "a", from: .waiting, until: later(30)).status == .granted)
        #expect(try await q.waitWhileWaiting(id: "a", until: later(30)).status == .granted)
        _ = try await q.enqueue(VisitorRequest(id: "b"))
        #expect(try await q.waitForChange(id: "b", from: .waiting, until: clock.now()).status == .waiting)
        await #expect(throws: QueueError.notFound("visitor \"zz\"")) {
            try await q.waitForChange(id: "zz", from: .waiting, until: later(30))
        }
        #expect(await q.waiterCount == 0)
    }

    @Test func delayedThenGrantedIsSeenAsOneChange() async throws {
        let q = queue()
        _ = try await q.enqueue(VisitorRequest(id: "d", delaySeconds: 3))
        let changed = Task { try await q.waitForChange(id: "d", from: .delayed, until: later(30)) }
        let leftLine = Task { try await q.waitWhileWaiting(id: "d", until: later(30)) }
        await F.eventually { await q.waiterCount == 2 }
        clock.advance(by: 3)
        #expect(try await changed.value.status == .granted)
        #expect(try await leftLine.value.status == .granted)
    }

    @Test func leavingTheDelayIsNotTheEndOfAPostWait() async throws {
        let q = queue()
        _ = try await q.enqueue(VisitorRequest(id: "h"))
        _ = try await q.enqueue(VisitorRequest(id: "d", delaySeconds: 3))
        let changed = Task { try await q.waitForChange(id: "d", from: .delayed, until: later(30)) }
        let leftLine = Task { try await q.waitWhileWaiting(id: "d", until: later(30)) }
        await F.eventually { await q.waiterCount == 2 }
        clock.advance(by: 3)
        #expect(try await changed.value.status == .waiting)
        #expect(await q.waiterCount == 1)
        _ = try await q.remove(id: "h")
        #expect(try await leftLine.value.status == .granted)
    }

    @Test func closeAnswersWaitersWithGoneAndStopsEverything() async throws {
        let q = queue()
        _ = try await q.enqueue(VisitorRequest(id: "a"))
        _ = try await q.enqueue(VisitorRequest(id: "b"))
        let waiter = Task { try await q.waitForChange(id: "b", from: .waiting, until: later(30)) }
        await F.eventually { await q.waiterCount == 1 }
        await q.close()
        await #expect(throws: QueueError.gone) { try await waiter.value }
        #expect(clock.pendingCount == 0)
        await #expect(throws: QueueError.gone) { try await q.enqueue(VisitorRequest()) }
        await #expect(throws: QueueError.gone) { try await q.waitForChange(id: "b", from: .waiting, until: later(1)) }
    }

    @Test func shutdownAnswersWaitersWithShuttingDown() async throws {
        let q = queue()
        _ = try await q.enqueue(VisitorRequest(id: "a"))
        _ = try await q.enqueue(VisitorRequest(id: "b"))
        let waiter = Task { try await q.waitWhileWaiting(id: "b", until: later(30)) }
        await F.eventually { await q.waiterCount == 1 }
        await q.shutdown()
        await #expect(throws: QueueError.shuttingDown) { try await waiter.value }
        await #expect(throws: QueueError.shuttingDown) { try await q.waitWhileWaiting(id: "b", until: later(30)) }
        // In-flight requests still work during the grace period.
        #expect(try await q.complete(id: "a").status == .completed)
        #expect(clock.pendingCount == 1)  // b's hold
    }

    @Test func aCancelledWaiterIsAnsweredWithTheCurrentView() async throws {
        let q = queue()
        _ = try await q.enqueue(VisitorRequest(id: "a"))
        _ = try await q.enqueue(VisitorRequest(id: "b"))
        let waiter = Task { try await q.waitForChange(id: "b", from: .waiting, until: later(30)) }
        await F.eventually { await q.waiterCount == 1 }
        waiter.cancel()
        #expect(try await waiter.value.status == .waiting)
        #expect(await q.waiterCount == 0)
    }

    @Test func theTimerFollowsTheNextDeadline() async throws {
        let q = queue(QueueConfig(holdSeconds: 10))
        #expect(clock.pendingCount == 0)
        _ = try await q.enqueue(VisitorRequest(id: "a", holdSeconds: 1))
        #expect(clock.pendingCount == 1)
        _ = try await q.extend(id: "a", holdSeconds: 5)
        #expect(clock.pendingCount == 1)
        clock.advance(by: 5)
        #expect(try await q.visitor(id: "a").status == .expired)
        #expect(clock.pendingCount == 0)
        _ = try await q.enqueue(VisitorRequest(id: "b", holdSeconds: 2))
        _ = try await q.complete(id: "b")
        // The timer is not moved when the next deadline goes away or later:
        // it fires, finds nothing due, and does not re-arm.
        #expect(clock.pendingCount == 1)
        clock.advance(by: 2)
        #expect(clock.pendingCount == 0)
        #expect(await q.counts.expiredTotal == 1)
        // A later deadline keeps the armed timer; an earlier one replaces it.
        _ = try await q.enqueue(VisitorRequest(id: "c", holdSeconds: 4))
        _ = try await q.extend(id: "c", holdSeconds: 8)
        #expect(clock.pendingCount == 1)
        clock.advance(by: 4)
        #expect(try await q.visitor(id: "c").status == .granted)
        #expect(clock.pendingCount == 1)  // re-armed at c's new deadline
        clock.advance(by: 4)
        #expect(try await q.visitor(id: "c").status == .expired)
        #expect(clock.pendingCount == 0)
        let patched = try await q.apply(QueuePatch(capacity: 0))
        let config = await q.config
        #expect(patched.capacity == 0 && config.capacity == 0)
        #expect(await q.counts.completedTotal == 1)
    }

    @Test func syncCallsFromAThreadInterleaveWithAwaitedCalls() async throws {
        let q = queue(QueueConfig(capacity: 0, maxWaiting: 100_000))
        let finished = Flag()
        let thread = Thread {
            for i in 0..<2000 {
                _ = try? q.withIsolation { q throws(QueueError) in try q.enqueue(VisitorRequest(id: "t\(i)")) }
            }
            finished.set()
        }
        thread.start()
        for i in 0..<2000 { _ = try await q.enqueue(VisitorRequest(id: "a\(i)")) }
        await F.eventually { finished.isSet }
        let counts = await q.counts
        #expect(counts.waiting == 4000 && counts.enqueuedTotal == 4000)
        let state = try await q.state(limit: 4000)
        #expect(Set(state.waiting.map(\.id)).count == 4000)
        _ = try await q.apply(QueuePatch(capacity: 4000))
        #expect(await q.counts.holding == 4000)
    }
}

/// A flag set by one thread and read by another.
final class Flag: Sendable {
    private let state = Locked(false)
    func set() { state.withLock { $0 = true } }
    var isSet: Bool { state.withLock { $0 } }
}
