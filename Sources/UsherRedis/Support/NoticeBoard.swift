import Locking
import UsherCore

/// Where parked long-polls on a Redis-backed resource wait for a notice
/// about their subject (a visitor id, …) from any instance.
///
/// A waiter opens a ticket first, then reads the subject, then waits on the
/// ticket: a notice that arrives between the read and the wait is not lost.
/// A wait also ends at its deadline (the caller passes at most a second
/// ahead, so that a lost notice costs at most a second: pub/sub is not
/// reliable) and when its task is cancelled (the client hung up).
final class NoticeBoard: Sendable {
    struct Ticket: Sendable {
        fileprivate let token: UInt64
        fileprivate let subject: String
    }

    private enum Slot {
        /// Opened, nothing posted yet, nobody waiting.
        case open
        /// Posted (or cancelled) before anyone waited: the wait returns at once.
        case signalled
        case waiting(CheckedContinuation<Void, Never>, (any ScheduledTimer)?)
    }

    private struct State {
        var next: UInt64 = 0
        var slots: [UInt64: Slot] = [:]
        var bySubject: [String: Set<UInt64>] = [:]
    }

    private let state = Locked(State())
    private let clock: any UsherClock

    init(clock: any UsherClock) {
        self.clock = clock
    }

    /// Starts listening for notices about `subject`.
    func open(_ subject: String) -> Ticket {
        state.withLock { s in
            s.next += 1
            s.slots[s.next] = .open
            s.bySubject[subject, default: []].insert(s.next)
            return Ticket(token: s.next, subject: subject)
        }
    }

    /// Waits until a notice about the ticket's subject is posted (since
    /// `open`), `deadline` passes or the task is cancelled; closes the ticket.
    func wait(_ ticket: Ticket, until deadline: Timestamp) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let parked = state.withLock { s -> Bool in
                    guard case .open = s.slots[ticket.token] else { return false }
                    s.slots[ticket.token] = .waiting(continuation, nil)
                    return true
                }
                guard parked else {
                    continuation.resume()
                    return
                }
                let timer = clock.schedule(at: deadline) { [weak self] in self?.signal(ticket.token) }
                let stillWaiting = state.withLock { s -> Bool in
                    guard case .waiting(let c, nil) = s.slots[ticket.token] else { return false }
                    s.slots[ticket.token] = .waiting(c, timer)
                    return true
                }
                if !stillWaiting { timer.cancel() }
            }
        } onCancel: {
            signal(ticket.token)
        }
        close(ticket)
    }

    /// Stops listening without waiting.
    package func close(_ ticket: Ticket) {
        let slot = state.withLock { s -> Slot? in
            s.bySubject[ticket.subject]?.remove(ticket.token)
            if s.bySubject[ticket.subject]?.isEmpty == true { s.bySubject[ticket.subject] = nil }
            return s.slots.removeValue(forKey: ticket.token)
        }
        if case .waiting(let continuation, let timer) = slot {
            timer?.cancel()
            continuation.resume()
        }
    }

    /// A notice about `subject` arrived: its waiters wake.
    func post(_ subject: String) {
        let tokens = state.withLock { $0.bySubject[subject] ?? [] }
        for token in tokens { signal(token) }
    }

    /// Notices may have been missed (the subscriber reconnected), or the
    /// resource's phase changed: every waiter wakes and checks again.
    func postAll() {
        let tokens = state.withLock { Array($0.slots.keys) }
        for token in tokens { signal(token) }
    }

    /// Tickets open now (for tests).
    var openCount: Int { state.withLock { $0.slots.count } }

    /// Tickets open now on `subject` (a pipeline's parked consumers or producers).
    func openCount(of subject: String) -> Int { state.withLock { $0.bySubject[subject]?.count ?? 0 } }

    /// Waiters parked with their deadline timer set (for tests: a clock may be advanced now).
    var parkedCount: Int {
        state.withLock { s in
            s.slots.values.count { slot in
                if case .waiting(_, .some) = slot { return true }
                return false
            }
        }
    }

    private func signal(_ token: UInt64) {
        let waiting = state.withLock { s -> (CheckedContinuation<Void, Never>, (any ScheduledTimer)?)? in
            switch s.slots[token] {
            case .open:
                s.slots[token] = .signalled
                return nil
            case .waiting(let continuation, let timer):
                s.slots[token] = .signalled
                return (continuation, timer)
            case .signalled, nil:
                return nil
            }
        }
        if let (continuation, timer) = waiting {
            timer?.cancel()
            continuation.resume()
        }
    }
}
