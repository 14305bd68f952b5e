import Dispatch
import Foundation
import Synchronization

/// A scheduled call that can be cancelled before it runs.
public protocol ScheduledTimer: Sendable {
    /// Prevents the call if it has not run yet. Safe to call more than once.
    func cancel()
}

/// The one source of time for every manager: `now` and delayed calls.
///
/// Production uses `SystemClock`; tests use `ManualClock` and advance it by
/// hand, so nothing in the core ever sleeps in a test.
public protocol UsherClock: Sendable {
    /// The current time.
    func now() -> Timestamp
    /// Calls `action` once, at or after `deadline`, unless the timer is cancelled.
    func schedule(at deadline: Timestamp, _ action: @escaping @Sendable () -> Void) -> any ScheduledTimer
}

/// Wall-clock time; delayed calls run on a Dispatch queue.
public struct SystemClock: UsherClock {
    public init() {}

    public func now() -> Timestamp {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Timestamp(micros: Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000)
    }

    public func schedule(at deadline: Timestamp, _ action: @escaping @Sendable () -> Void) -> any ScheduledTimer {
        let item = DispatchWorkItem(block: action)
        let delay = max(0, now().seconds(until: deadline))
        DispatchQueue.global().asyncAfter(deadline: .now() + delay, execute: item)
        return DispatchTimer(item: item)
    }

    private struct DispatchTimer: ScheduledTimer, @unchecked Sendable {
        let item: DispatchWorkItem
        func cancel() { item.cancel() }
    }
}

/// A clock that moves only when told to; scheduled calls run synchronously
/// inside `advance`, in deadline order.
public final class ManualClock: UsherClock, Sendable {
    private struct Entry {
        let id: Int
        let deadline: Timestamp
        let action: @Sendable () -> Void
    }
    private struct State {
        var now: Timestamp
        var nextID = 0
        var entries: [Entry] = []
    }
    private let state: Mutex<State>

    /// Starts at `start` (default 2026-01-01T00:00:00Z).
    public init(start: Timestamp = Timestamp(micros: 1_767_225_600_000_000)) {
        state = Mutex(State(now: start))
    }

    public func now() -> Timestamp { state.withLock { $0.now } }

    public func schedule(at deadline: Timestamp, _ action: @escaping @Sendable () -> Void) -> any ScheduledTimer {
        let id = state.withLock { s -> Int in
            s.nextID += 1
            s.entries.append(Entry(id: s.nextID, deadline: deadline, action: action))
            return s.nextID
        }
        return Handle(clock: self, id: id)
    }

    /// The number of calls still scheduled.
    public var pendingCount: Int { state.withLock { $0.entries.count } }

    /// Moves time forward by `seconds`, running every call that falls due, in order.
    public func advance(by seconds: Double) {
        let target = state.withLock { $0.now.adding(seconds: seconds) }
        while true {
            let next: Entry? = state.withLock { s in
                guard let i = s.entries.indices.filter({ s.entries[$0].deadline <= target })
                    .min(by: { (s.entries[$0].deadline, s.entries[$0].id) < (s.entries[$1].deadline, s.entries[$1].id) })
                else { return nil }
                let e = s.entries.remove(at: i)
                if e.deadline > s.now { s.now = e.deadline }
                return e
            }
            guard let entry = next else { break }
            entry.action()
        }
        state.withLock { $0.now = target }
    }

    fileprivate func cancel(id: Int) {
        state.withLock { $0.entries.removeAll { $0.id == id } }
    }

    private struct Handle: ScheduledTimer {
        let clock: ManualClock
        let id: Int
        func cancel() { clock.cancel(id: id) }
    }
}
