import Locking
import UsherCore

/// What this process keeps about one Redis-backed resource besides its
/// store: where its copy is in its life, the one timer at the resource's
/// next deadline, and the board its long-polls wait on. Queues and machines
/// share it; the resource's state itself is all in Redis.
package final class LocalHost: Sendable {
    let kind: String
    let name: String
    let backend: RedisBackend
    let board: NoticeBoard
    private let timer = Locked(DeadlineTimer())
    private let phaseState = Locked(RedisPhase.open)

    init(kind: String, name: String, backend: RedisBackend) {
        self.kind = kind
        self.name = name
        self.backend = backend
        self.board = NoticeBoard(clock: backend.clock)
    }

    var phase: RedisPhase { phaseState.withLock { $0 } }

    /// Starts hearing notices about the resource for `listener`.
    func listen(_ listener: any NoticeListener) {
        backend.register(listener, kind: kind, name: name)
    }

    /// Keeps one timer at or before `next`; it runs `tick` (whose reply arms
    /// the next one). Harmless when another instance ticks first.
    func arm(at next: Timestamp?, tick: @escaping @Sendable () async -> Void) {
        guard let next, phase == .open else { return }
        let clock = backend.clock
        timer.withLock { t in
            if let armed = t.deadline, armed <= next { return }
            t.cancel()
            t.deadline = next
            t.timer = clock.schedule(at: next) { [weak self] in
                self?.timer.withLock { $0.fired() }
                Task { await tick() }
            }
        }
    }

    /// The resource was deleted: waiters here wake to find it gone, the timer stops.
    func close() {
        phaseState.withLock { $0 = .closed }
        timer.withLock { $0.cancel() }
        backend.unregister(kind: kind, name: name)
        board.postAll()
    }

    /// The server is stopping: waiters here wake to find it so.
    func shutdown() {
        phaseState.withLock { if $0 == .open { $0 = .shuttingDown } }
        timer.withLock { $0.cancel() }
        board.postAll()
    }
}

/// Where this process's copy of a Redis-backed resource is in its life.
enum RedisPhase: Sendable {
    case open
    /// The server is stopping: waits are refused.
    case shuttingDown
    /// The resource was deleted (through any instance).
    case closed
}

/// The one timer of a Redis-backed resource and when it is set for.
struct DeadlineTimer: Sendable {
    var deadline: Timestamp?
    var timer: (any ScheduledTimer)?

    mutating func cancel() {
        timer?.cancel()
        timer = nil
        deadline = nil
    }

    mutating func fired() {
        timer = nil
        deadline = nil
    }
}

/// A weak reference that can be set after the closure holding it is made.
final class WeakBox<T: AnyObject & Sendable>: Sendable {
    private let reference = Locked<Weak?>(nil)
    private struct Weak: @unchecked Sendable { weak var value: T? }

    var value: T? {
        get { reference.withLock { $0?.value } }
        set { reference.withLock { $0 = Weak(value: newValue) } }
    }
}
