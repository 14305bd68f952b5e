import Dispatch
import Foundation
import Locking

/// A scheduled call that can be cancelled before it runs.
package protocol ScheduledTimer: Sendable {
    /// Prevents the call if it has not run yet. Safe to call more than once.
    func cancel()
}

/// The one source of time for every manager: `now` and delayed calls.
///
/// Production uses `SystemClock`; tests use `ManualClock` and advance it by
/// hand, so nothing in the core ever sleeps in a test.
package protocol UsherClock: Sendable {
    /// The current time.
    func now() -> Timestamp
    /// Calls `action` once, at or after `deadline`, unless the timer is cancelled.
    func schedule(at deadline: Timestamp, _ action: @escaping @Sendable () -> Void) -> any ScheduledTimer
}

/// Wall-clock time; delayed calls run on one process-wide `DispatchTimerQueue`
/// (one heap of deadlines, one Dispatch timer armed for the earliest), so a
/// cancelled call is gone at once, closure included.
package struct SystemClock: UsherClock {
    private let timers: DispatchTimerQueue

    package init() {
        timers = .shared
    }

    package func now() -> Timestamp {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Timestamp(micros: Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000)
    }

    package func schedule(at deadline: Timestamp, _ action: @escaping @Sendable () -> Void) -> any ScheduledTimer {
        timers.schedule(after: max(0, now().seconds(until: deadline)), action)
    }
}

/// A clock that moves only when told to; scheduled calls run synchronously
/// inside `advance`, in deadline order.
final class ManualClock: UsherClock, Sendable {
    private struct State {
        var now: Timestamp
        /// Deadlines in the timestamps' microseconds.
        var timers = TimerHeap()
    }
    private let state: Locked<State>

    /// Starts at `start` (default 2026-01-01T00:00:00Z).
    init(start: Timestamp = Timestamp(micros: 1_767_225_600_000_000)) {
        state = Locked(State(now: start))
    }

    func now() -> Timestamp { state.withLock { $0.now } }

    func schedule(at deadline: Timestamp, _ action: @escaping @Sendable () -> Void) -> any ScheduledTimer {
        Handle(clock: self, id: state.withLock { $0.timers.insert(at: deadline.micros, action) })
    }

    /// The number of calls still scheduled.
    var pendingCount: Int { state.withLock { $0.timers.count } }

    /// Moves time forward by `seconds`, running every call that falls due, in
    /// order (by deadline, then by when it was scheduled).
    func advance(by seconds: Double) {
        let target = state.withLock { $0.now.adding(seconds: seconds) }
        while let action = state.withLock({ s -> TimerHeap.Action? in
            guard let due = s.timers.popDue(notAfter: target.micros) else { return nil }
            if due.deadline > s.now.micros { s.now = Timestamp(micros: due.deadline) }
            return due.action
        }) {
            action()
        }
        state.withLock { $0.now = target }
    }

    fileprivate func cancel(_ id: TimerHeap.Handle) {
        // Released here, after unlocking: a closure's captures may schedule or cancel.
        let action = state.withLock { $0.timers.remove(id) }
        _ = action
    }

    private struct Handle: ScheduledTimer {
        let clock: ManualClock
        let id: TimerHeap.Handle
        func cancel() { clock.cancel(id) }
    }
}
