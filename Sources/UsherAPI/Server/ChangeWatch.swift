import Locking
import UsherCore

/// Requests parked until a resource changes (`GET /v1/{kind}/{name}?wait=S`).
/// Each is woken by the resource's next event (on Redis, any instance's
/// change), by its deadline, or by its client hanging up, and then reads the
/// state again. One observer of the event log serves them all; it is added
/// at the first wait (events are built from then on, as for a first stream).
/// Each parked request holds a connection, so `max_connections` bounds them.
final class ChangeWatch: Sendable {
    private struct Key: Hashable {
        let kind: String
        let name: String
    }

    private struct Parked {
        let continuation: CheckedContinuation<Void, Never>
        var timer: (any ScheduledTimer)?
    }

    private struct State {
        var parked: [Key: [UInt64: Parked]] = [:]
        var nextToken: UInt64 = 0
        /// Events seen since the observer was added.
        var seen: UInt64 = 0
        var observing = false
    }

    private let state = Locked(State())
    private let events: EventLog
    private let clock: any UsherClock

    init(events: EventLog, clock: any UsherClock) {
        self.events = events
        self.clock = clock
    }

    /// A mark to take before reading what a wait compares: a wait from it
    /// ends at once if any event came after it (the read may predate it).
    func mark() -> UInt64 {
        // Observing first: an event between the mark and the observer's start would wake nobody.
        if !state.withLock({ $0.observing }) { observe() }
        return state.withLock { $0.seen }
    }

    /// Parks until the next event of `kind` (singular, as events name it)
    /// `name` after `mark`, `deadline`, or cancellation.
    func nextChange(of kind: String, _ name: String, after mark: UInt64, until deadline: Timestamp) async {
        let key = Key(kind: kind, name: name)
        let token = state.withLock { s -> UInt64 in
            defer { s.nextToken += 1 }
            return s.nextToken
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let parked = state.withLock { s -> Bool in
                    guard s.seen == mark else { return false }
                    s.parked[key, default: [:]][token] = Parked(continuation: continuation)
                    return true
                }
                guard parked else { return continuation.resume() }
                let timer = clock.schedule(at: deadline) { [weak self] in self?.answer(key, token) }
                let stillParked = state.withLock { s -> Bool in
                    guard s.parked[key]?[token] != nil else { return false }
                    s.parked[key]?[token]?.timer = timer
                    return true
                }
                if !stillParked { timer.cancel() }
                // Cancelled before it was parked: the handler found nothing to answer.
                if Task.isCancelled { answer(key, token) }
            }
        } onCancel: {
            answer(key, token)
        }
    }

    /// Requests parked now (tests).
    var parkedCount: Int { state.withLock { $0.parked.values.reduce(0) { $0 + $1.count } } }

    private func observe() {
        let first = state.withLock { s -> Bool in
            defer { s.observing = true }
            return !s.observing
        }
        guard first else { return }
        _ = events.observe { [weak self] event in self?.heard(event) }
    }

    /// Runs under the event log's lock: wakes the event's resource's waits.
    private func heard(_ event: ResourceEvent) {
        let woken = state.withLock { s -> [Parked] in
            s.seen += 1
            guard let parked = s.parked.removeValue(forKey: Key(kind: event.kind, name: event.name)) else { return [] }
            return Array(parked.values)
        }
        for p in woken { wake(p) }
    }

    private func answer(_ key: Key, _ token: UInt64) {
        let taken = state.withLock { s -> Parked? in
            let p = s.parked[key]?.removeValue(forKey: token)
            if s.parked[key]?.isEmpty == true { s.parked[key] = nil }
            return p
        }
        if let taken { wake(taken) }
    }

    private func wake(_ p: Parked) {
        p.timer?.cancel()
        p.continuation.resume()
    }
}
