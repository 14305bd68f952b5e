import Foundation
import Locking
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// One queue behind `QueueService` on a `ManualClock`: a `VisitorQueue`, or
/// a `RedisQueue` on a redis-server of its own whose scripts take their time
/// from the same clock. Made and stopped by `with`.
final class QueueUnderTest: Sendable {
    static let t0 = Timestamp(micros: 1_767_225_600_000_000)

    let backend: TestBackend
    let clock = ManualClock(start: t0)
    let events: EventLog
    let queue: any QueueService
    private let redis: RedisUnderTest?
    /// The redis-server (Redis only), for tests that stop or pause it.
    var server: RedisServer? { redis?.server }

    private init(_ backend: TestBackend, _ config: QueueConfig) async throws {
        self.backend = backend
        events = EventLog(clock: clock)
        switch backend {
        case .memory:
            redis = nil
            queue = VisitorQueue(name: "q", config: config, clock: clock, events: events)
        case .redis:
            let redis = try await RedisUnderTest(clock: clock)
            let made = RedisQueue(name: "q", backend: redis.backend, events: events)
            #expect(try await made.create(config).created)
            await redis.listen(made)
            self.redis = redis
            queue = made
        }
    }

    /// Runs `body` on a new queue of `backend`, then stops what it started.
    static func with(
        _ backend: TestBackend, _ config: QueueConfig = QueueConfig(),
        _ body: (QueueUnderTest) async throws -> Void
    ) async throws {
        let q = try await QueueUnderTest(backend, config)
        do {
            try await body(q)
        } catch {
            await q.stop()
            throw error
        }
        await q.stop()
    }

    private func stop() async {
        await redis?.stop()
    }

    // MARK: Operations through `QueueService`

    func at(_ seconds: Double) -> Timestamp { Self.t0.adding(seconds: seconds) }
    func later(_ seconds: Double) -> Timestamp { clock.now().adding(seconds: seconds) }

    @discardableResult
    func enqueue(
        _ id: String? = nil, key: String? = nil, action: String? = nil, priority: Int = 0, hold: Double? = nil,
        delay: Double? = nil
    ) async throws(QueueError) -> VisitorView {
        try await enqueueOutcome(
            VisitorRequest(id: id, key: key, action: action, priority: priority, holdSeconds: hold, delaySeconds: delay)
        ).view
    }

    func enqueueOutcome(_ r: VisitorRequest, tryOnce: Bool = false) async throws(QueueError) -> EnqueueOutcome {
        try await queue.enqueueVisitor(r, tryOnce: tryOnce).value()
    }

    @discardableResult
    func complete(_ id: String) async throws(QueueError) -> VisitorView {
        try await queue.completeVisitor(id).value()
    }

    @discardableResult
    func remove(_ id: String) async throws(QueueError) -> VisitorView {
        try await queue.removeVisitor(id).value()
    }

    @discardableResult
    func extend(_ id: String, _ holdSeconds: Double? = nil) async throws(QueueError) -> VisitorView {
        try await queue.extendVisitor(id, holdSeconds: holdSeconds).value()
    }

    func visitor(_ id: String) async throws(QueueError) -> VisitorView {
        try await queue.readVisitor(id).value()
    }

    func status(_ id: String) async throws(QueueError) -> VisitorStatus {
        try await visitor(id).status
    }

    func state(limit: Int = 100, after cursor: QueueCursor? = nil) async throws(QueueError) -> QueueState {
        try await queue.readState(limit: limit, after: cursor).value()
    }

    func counts() async throws(QueueError) -> QueueCounts { try await state(limit: 0).counts }

    @discardableResult
    func patch(_ patch: QueuePatch) async throws(QueueError) -> QueueConfig {
        try await queue.applyPatch(patch).value()
    }

    /// `parkUntilOutOfLine` in a task of its own.
    func parkOutOfLine(
        _ id: String, until deadline: Timestamp, withdrawing: Bool = false, cancellingOnTimeout: Bool = false
    ) -> Task<VisitorView, any Error> {
        let queue = queue
        return Task {
            try await queue.parkUntilOutOfLine(
                id: id, until: deadline, withdrawing: withdrawing, cancellingOnTimeout: cancellingOnTimeout
            ).view()
        }
    }

    /// `parkUntilChange` in a task of its own.
    func parkForChange(_ id: String, from status: VisitorStatus, until deadline: Timestamp) -> Task<
        VisitorView, any Error
    > {
        let queue = queue
        return Task { try await queue.parkUntilChange(id: id, from: status, until: deadline).view() }
    }

    // MARK: Waiting for the other tasks

    /// Long-polls parked now with their deadline on the clock (the clock may be advanced).
    func parkedCount() async -> Int {
        switch queue {
        case let memory as VisitorQueue: await memory.waiterCount
        case let redis as RedisQueue: redis.board.parkedCount
        default: 0
        }
    }

    /// Waits until `n` long-polls are parked.
    func parked(_ n: Int, sourceLocation: SourceLocation = #_sourceLocation) async {
        await eventually(sourceLocation: sourceLocation) { await self.parkedCount() == n }
    }

    /// Records every visitor event as `type:id:reason` (reason `-` when none).
    func recordEvents() -> SeenEvents {
        let seen = SeenEvents()
        _ = events.observe { e in
            guard case .visitor(let v) = e.subject else { return }
            seen.list.withLock { $0.append("\(e.type):\(v.id):\(v.reason ?? "-")") }
        }
        return seen
    }

}

/// What an event subscriber saw.
final class SeenEvents: Sendable {
    let list = Locked<[String]>([])

    var all: [String] { list.withLock { $0 } }
}
