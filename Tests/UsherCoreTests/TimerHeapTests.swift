import Dispatch
import Testing

@testable import Locking
@testable import UsherCore

/// `TimerHeap` and the clocks built on it: order, cancellation that frees the
/// closure at once, many timers, deadlines already past.
@Suite struct TimerHeapTests {
    /// Something a scheduled closure captures, to see when it is released.
    final class Captured: Sendable {}

    /// Records the order calls ran in.
    final class Log: Sendable {
        private let entries = Locked<[Int]>([])
        func append(_ i: Int) { entries.withLock { $0.append(i) } }
        var all: [Int] { entries.withLock { $0 } }
    }

    @Test func popsByDeadlineThenScheduleOrder() {
        var heap = TimerHeap()
        let log = Log()
        for (i, deadline) in [30, 10, 20, 10, 5, 30].enumerated() {
            _ = heap.insert(at: Int64(deadline)) { log.append(i) }
        }
        #expect(heap.nextDeadline == 5)
        #expect(heap.popDue(notAfter: 4) == nil)
        var deadlines: [Int64] = []
        while let due = heap.popDue(notAfter: 100) {
            deadlines.append(due.deadline)
            due.action()
        }
        #expect(deadlines == [5, 10, 10, 20, 30, 30])
        #expect(log.all == [4, 1, 3, 2, 0, 5])
        #expect(heap.isEmpty)
    }

    @Test func removeReleasesTheClosureAtOnce() {
        var heap = TimerHeap()
        weak var weakCaptured: Captured?
        let id: TimerHeap.Handle
        do {
            let captured = Captured()
            weakCaptured = captured
            id = heap.insert(at: 10) { _ = captured }
            _ = heap.insert(at: 20) {}
        }
        #expect(weakCaptured != nil)
        #expect(heap.remove(id) != nil)
        #expect(weakCaptured == nil)
        #expect(heap.count == 1)
        #expect(heap.remove(id) == nil)  // twice: nothing
    }

    @Test func aStaleHandleDoesNotCancelTheCallThatReusedItsSlot() {
        var heap = TimerHeap()
        let log = Log()
        let first = heap.insert(at: 1) { log.append(1) }
        heap.popDue(notAfter: 1)?.action()
        let second = heap.insert(at: 2) { log.append(2) }
        #expect(heap.remove(first) == nil)
        #expect(heap.count == 1)
        heap.popDue(notAfter: 2)?.action()
        #expect(log.all == [1, 2])
        #expect(heap.remove(second) == nil)
    }

    @Test func manyTimersWithRemovalsMatchASortedModel() {
        var heap = TimerHeap()
        var generator = SeededGenerator(seed: 7)
        var handles: [(handle: TimerHeap.Handle, deadline: Int64, order: Int)] = []
        for order in 0..<10_000 {
            let deadline = Int64(generator.next() % 1_000)
            handles.append((heap.insert(at: deadline) {}, deadline, order))
        }
        var kept: [(deadline: Int64, order: Int)] = []
        for (i, h) in handles.enumerated() {
            if i % 3 == 0 {
                #expect(heap.remove(h.handle) != nil)
            } else {
                kept.append((h.deadline, h.order))
            }
        }
        #expect(heap.count == kept.count)
        kept.sort { $0.deadline != $1.deadline ? $0.deadline < $1.deadline : $0.order < $1.order }
        var popped: [Int64] = []
        while let due = heap.popDue(notAfter: .max) { popped.append(due.deadline) }
        #expect(popped == kept.map(\.deadline))
        #expect(heap.isEmpty)
        // Empty after a burst: the slots were given back, and the heap still works.
        let h = heap.insert(at: 3) {}
        #expect(heap.nextDeadline == 3)
        #expect(heap.remove(h) != nil)
        #expect(heap.remove(handles[1].handle) == nil)
    }

    @Test func manualClockRunsCallsInOrderAndFreesCancelledOnes() {
        let clock = ManualClock()
        let log = Log()
        let start = clock.now()
        weak var weakCaptured: Captured?
        let cancelled: any ScheduledTimer
        do {
            let captured = Captured()
            weakCaptured = captured
            cancelled = clock.schedule(at: start.adding(seconds: 2)) { _ = captured }
        }
        _ = clock.schedule(at: start.adding(seconds: 3)) { log.append(3) }
        _ = clock.schedule(at: start.adding(seconds: 1)) {
            log.append(1)
            // Scheduled from a call, due within the same advance.
            _ = clock.schedule(at: clock.now().adding(seconds: 1.5)) { log.append(25) }
        }
        cancelled.cancel()
        #expect(weakCaptured == nil)
        #expect(clock.pendingCount == 2)
        clock.advance(by: 5)
        #expect(log.all == [1, 25, 3])
        #expect(clock.now() == start.adding(seconds: 5))
        cancelled.cancel()  // after it left: nothing
        #expect(clock.pendingCount == 0)
    }

    @Test func manualClockRunsADeadlineInThePastAtTheNextAdvance() {
        let clock = ManualClock()
        let log = Log()
        _ = clock.schedule(at: clock.now().adding(seconds: -5)) { log.append(1) }
        clock.advance(by: 0)
        #expect(log.all == [1])
    }

    /// The Dispatch-backed queue behind `SystemClock`: waits only for calls
    /// due at once, never for a duration.
    @Test func dispatchQueueRunsDueCallsInOrderAndFreesCancelledOnes() {
        let queue = DispatchTimerQueue(label: "usher.timers.test")
        let log = Log()
        let done = DispatchSemaphore(value: 0)
        weak var weakCaptured: Captured?
        do {
            let captured = Captured()
            weakCaptured = captured
            let far = queue.schedule(after: 3600) { _ = captured }
            #expect(queue.pendingCount == 1)
            far.cancel()
        }
        #expect(weakCaptured == nil)
        #expect(queue.pendingCount == 0)
        let never = queue.schedule(after: 3600) { log.append(0) }
        _ = queue.schedule(after: -1) { log.append(1) }
        _ = queue.schedule(after: 0) {
            log.append(2)
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(log.all == [1, 2])
        #expect(queue.pendingCount == 1)
        never.cancel()
        #expect(queue.pendingCount == 0)
    }
}
