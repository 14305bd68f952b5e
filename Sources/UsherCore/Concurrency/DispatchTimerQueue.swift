import Dispatch
import Locking

/// `SystemClock`'s delayed calls: one `TimerHeap` of monotonic deadlines and
/// one Dispatch timer source armed for the earliest.
///
/// Not an `asyncAfter` per call: a cancelled `DispatchWorkItem` stays in
/// Dispatch's timer list, with everything its block captured, until its
/// deadline. Here a cancel takes the entry out of the heap and releases its
/// closure at once.
///
/// Due calls run one after another on the queue's serial Dispatch queue, in
/// deadline order. They should be short (the managers' callbacks take the
/// resource's lock, do one step and return).
final class DispatchTimerQueue: @unchecked Sendable {
    // @unchecked: `source` is a Dispatch object (thread-safe, not marked
    // Sendable); everything mutable is inside `state`.

    /// The queue every `SystemClock` uses.
    static let shared = DispatchTimerQueue(label: "usher.timers")

    private struct State {
        /// Deadlines in `DispatchTime` uptime nanoseconds.
        var timers = TimerHeap()
        /// When the source is set to fire (nil: not armed).
        var armed: Int64?
    }

    private let state = Locked(State())
    private let source: any DispatchSourceTimer

    /// How late Dispatch may fire, to coalesce wake-ups.
    private static let leeway = DispatchTimeInterval.milliseconds(1)

    init(label: String) {
        source = DispatchSource.makeTimerSource(queue: DispatchQueue(label: label))
        source.setEventHandler { [weak self] in self?.fire() }
        source.resume()
    }

    deinit {
        source.cancel()
    }

    /// Calls `action` once, `seconds` from now (at once when not positive),
    /// unless the returned timer is cancelled first.
    func schedule(after seconds: Double, _ action: @escaping @Sendable () -> Void) -> any ScheduledTimer {
        let deadline = Self.uptime() &+ Self.nanoseconds(seconds)
        let id = state.withLock { s in
            let id = s.timers.insert(at: deadline, action)
            if s.armed.map({ deadline < $0 }) ?? true { arm(&s, at: deadline) }
            return id
        }
        return Handle(queue: self, id: id)
    }

    /// Calls still scheduled.
    var pendingCount: Int { state.withLock { $0.timers.count } }

    /// Takes a call out of the heap. The timer stays armed: if it was the
    /// earliest, the source fires, finds nothing due and re-arms.
    fileprivate func cancel(_ id: TimerHeap.Handle) {
        // Released here, after unlocking: a closure's captures may schedule or cancel.
        let action = state.withLock { $0.timers.remove(id) }
        _ = action
    }

    /// The source fired: run what is due, re-arm for the next deadline.
    private func fire() {
        let now = Self.uptime()
        let due = state.withLock { s -> [TimerHeap.Action] in
            s.armed = nil
            var due: [TimerHeap.Action] = []
            while let d = s.timers.popDue(notAfter: now) { due.append(d.action) }
            if let next = s.timers.nextDeadline { arm(&s, at: next) }
            return due
        }
        for action in due { action() }
    }

    /// Sets the source for `deadline`. Called holding the lock, so that the
    /// last setting always matches `armed`.
    private func arm(_ s: inout State, at deadline: Int64) {
        s.armed = deadline
        source.schedule(deadline: DispatchTime(uptimeNanoseconds: UInt64(max(1, deadline))), leeway: Self.leeway)
    }

    private static func uptime() -> Int64 {
        Int64(clamping: DispatchTime.now().uptimeNanoseconds)
    }

    /// Whole nanoseconds in `seconds`, 0 for a past deadline, capped at about 100 years.
    private static func nanoseconds(_ seconds: Double) -> Int64 {
        guard seconds > 0 else { return 0 }
        return seconds >= 3e9 ? 3_000_000_000 * 1_000_000_000 : Int64(seconds * 1e9)
    }

    private struct Handle: ScheduledTimer {
        let queue: DispatchTimerQueue
        let id: TimerHeap.Handle
        func cancel() { queue.cancel(id) }
    }
}
