import Answers
import RedisClient
import UsherCore

/// A manager of one resource kept in Redis (queue, window, pool, pipeline,
/// machine): its store and what this process does about it (`host`). The
/// lifecycle is the same for every kind and lives here; each manager keeps
/// its own operations, waits and events.
package protocol RedisResource: NoticeListener {
    associatedtype Store: ResourceStore
    var name: String { get }
    /// The resource's state in Redis, one script call an operation.
    var store: Store { get }
    /// Phase, timer and long-polls in this process.
    var host: LocalHost { get }
}

/// What a Redis manager asks of its store beyond its kind's operations.
package protocol ResourceStore: Sendable {
    associatedtype Failure: ResourceFailure
    /// Deletes the resource's keys; false when it was not there.
    func delete() async throws(Failure) -> Bool
    /// Applies what is due now; the reply arms the next deadline.
    func tick() async throws(Failure)
}

/// The failures every kind's error has in common.
package protocol ResourceFailure: Error {
    /// The resource was deleted.
    static var gone: Self { get }
    /// The server is stopping.
    static var shuttingDown: Self { get }
    /// Redis did not answer.
    static func backendUnavailable(_ why: String) -> Self
    /// True for `backendUnavailable`: a wait tries again rather than end.
    var isBackendUnavailable: Bool { get }
    /// True for `gone`.
    var isGone: Bool { get }
}

extension QueueError: ResourceFailure {
    package var isBackendUnavailable: Bool { if case .backendUnavailable = self { true } else { false } }
    package var isGone: Bool { if case .gone = self { true } else { false } }
}
extension WindowError: ResourceFailure {
    package var isBackendUnavailable: Bool { if case .backendUnavailable = self { true } else { false } }
    package var isGone: Bool { if case .gone = self { true } else { false } }
}
extension PoolError: ResourceFailure {
    package var isBackendUnavailable: Bool { if case .backendUnavailable = self { true } else { false } }
    package var isGone: Bool { if case .gone = self { true } else { false } }
}
extension PipelineError: ResourceFailure {
    package var isBackendUnavailable: Bool { if case .backendUnavailable = self { true } else { false } }
    package var isGone: Bool { if case .gone = self { true } else { false } }
}
extension MachineError: ResourceFailure {
    package var isBackendUnavailable: Bool { if case .backendUnavailable = self { true } else { false } }
    package var isGone: Bool { if case .gone = self { true } else { false } }
}

extension RedisResource {
    /// The longest a long-poll sleeps without checking: notices may be lost.
    static var pollSeconds: Double { 1.0 }

    /// Where long-polls parked in this process wait for notices.
    var board: NoticeBoard { host.board }

    /// Reads with `read` until `met` holds for what it answers, `deadline`
    /// passes, or the task is cancelled (then, given `withdraw`, answers what
    /// it does instead: the waiter taken back); re-reads at every notice about
    /// `subject` and at least every `pollSeconds`. Redis unreachable until
    /// the deadline, or when cancelled: `backendUnavailable`.
    func park<T: Sendable>(
        _ subject: String, until deadline: Timestamp,
        read: (Store) async throws(Store.Failure) -> T, met: (T) -> Bool,
        withdraw: ((Store) async throws(Store.Failure) -> T)? = nil
    ) async -> Result<T, Store.Failure> {
        let clock = host.backend.clock
        while true {
            switch host.phase {
            case .closed: return .failure(.gone)
            case .shuttingDown: return .failure(.shuttingDown)
            case .open: break
            }
            if Task.isCancelled, let withdraw {
                do throws(Store.Failure) { return .success(try await withdraw(store)) } catch { return .failure(error) }
            }
            let ticket = board.open(subject)
            let answer: Result<T, Store.Failure>
            do throws(Store.Failure) { answer = .success(try await read(store)) } catch { answer = .failure(error) }
            let now = clock.now()
            let ends: Bool
            switch answer {
            // Cancelled during the read with a `withdraw`: the next turn withdraws.
            case .success(let value): ends = met(value) || now >= deadline || (Task.isCancelled && withdraw == nil)
            // A cancelled wait would not sleep again: it ends rather than spin.
            case .failure(let error) where error.isBackendUnavailable: ends = now >= deadline || Task.isCancelled
            case .failure: ends = true
            }
            if ends {
                board.close(ticket)
                return answer
            }
            await board.wait(ticket, until: min(deadline, now.adding(seconds: Self.pollSeconds)))
        }
    }

    /// Starts hearing notices about the resource (once it is the one registered here).
    package func listen() {
        host.listen(self)
    }

    /// Deletes the resource in Redis (every instance hears it and closes its
    /// copy) and from the index; false when it was not there. Returns once
    /// this instance heard the deletion too (at most a second), so that what
    /// the deleting script told first (the holders it ended) reached this
    /// instance's events before it forgets the resource, as on every other.
    package func delete() async throws(Store.Failure) -> Bool {
        let existed = try await store.delete()
        do throws(ScriptFailure) { try await host.backend.announceDeleted(kind: host.kind, name: name) } catch {
            throw Store.Failure.backendUnavailable("\(error)")
        }
        if existed { await untilClosed(within: 1) }
        return existed
    }

    /// Waits until the resource is closed here, or `seconds` pass.
    private func untilClosed(within seconds: Double) async {
        let clock = host.backend.clock
        let deadline = clock.now().adding(seconds: seconds)
        while true {
            // Any subject: closing wakes every ticket.
            let ticket = board.open("closed")
            guard host.phase == .open, clock.now() < deadline else { return board.close(ticket) }
            await board.wait(ticket, until: deadline)
        }
    }

    /// Applies what is due now (after a start or a reconnect: deadlines other
    /// instances armed are armed here too).
    package func catchUp() async {
        try? await store.tick()
    }

    /// Deleted (through any instance): waiters here are answered `gone`, the timer stops.
    package func close() { host.close() }

    /// The server is stopping: waiters here are answered `shuttingDown`.
    package func shutdown() { host.shutdown() }

    /// Missed notices: every wait here re-reads, and what came due is applied.
    package func resynchronize() {
        board.postAll()
        Task { await catchUp() }
    }

    /// Whether the resource's notices are worth reading here: a wait is
    /// parked or `events` records. When not, they are dropped unread: the
    /// timer is armed by this process's own answers, and every operation
    /// applies what is due first.
    func isHeard(_ events: EventLog?) -> Bool {
        board.openCount > 0 || (events?.isRecording ?? false)
    }

    /// Keeps one timer at or before the next deadline; it runs `tick`, whose
    /// reply arms the next one. Harmless when another instance ticks first.
    func arm(at next: Timestamp?) {
        host.arm(at: next)
    }

    /// One store call, later, refused once the resource is closed.
    func call<T: Sendable>(_ body: @escaping @Sendable (Store) async throws(Store.Failure) -> T)
        -> Pending<T, Store.Failure>
    {
        .async { [self] () async throws(Store.Failure) -> T in
            guard host.phase != .closed else { throw Store.Failure.gone }
            return try await body(store)
        }
    }
}

extension RedisQueueStore: ResourceStore {}
extension RedisWindowStore: ResourceStore {}
extension RedisPoolStore: ResourceStore {}
extension RedisPipelineStore: ResourceStore {}
extension RedisMachineStore: ResourceStore {}
