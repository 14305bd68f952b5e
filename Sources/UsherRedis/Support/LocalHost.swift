import Locking
import UsherCore

/// What this process keeps about one Redis-backed resource besides its
/// store: where its copy is in its life, the one timer at the resource's
/// next deadline, and the board its long-polls wait on. Every Redis manager
/// (`RedisResource`) has one; the resource's state itself is all in Redis.
package final class LocalHost: Sendable {
    let kind: String
    let name: String
    let backend: RedisBackend
    let board: NoticeBoard
    private let timer = Locked(DeadlineTimer())
    private let phaseState = Locked(RedisPhase.open)
    /// What the timer runs: the manager's `catchUp`, held weakly (see `drive`).
    private let tick = Locked<(@Sendable () async -> Void)?>(nil)

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

    /// Lets the timer run `resource.catchUp()` (weakly held: a store that
    /// outlives its manager arms nothing). Called once the manager exists.
    func drive(_ resource: some RedisResource) {
        tick.withLock { $0 = { [weak resource] in await resource?.catchUp() } }
    }

    /// What a store calls with each reply's next deadline.
    var onDeadline: @Sendable (Timestamp?) -> Void { { [weak self] in self?.arm(at: $0) } }

    /// What a store calls when a script finds the resource's keys missing:
    /// while this copy is open, the instance looks into it (deleted or lost).
    var onMissing: @Sendable () -> Void {
        { [weak self] in
            guard let self, phase == .open else { return }
            backend.noticeMissing(kind: kind, name: name)
        }
    }

    /// Keeps one timer at or before `next`; it runs `tick` (whose reply arms
    /// the next one). Harmless when another instance ticks first.
    func arm(at next: Timestamp?) {
        guard let next, phase == .open, let tick = tick.withLock({ $0 }) else { return }
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
