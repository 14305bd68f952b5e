import Foundation
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// One window behind `WindowService` on a `ManualClock`: a `WindowSlot`, or
/// a `RedisWindow` on a redis-server of its own whose scripts take their
/// time from the same clock. Made and stopped by `with`.
final class WindowUnderTest: Sendable {
    static let t0 = QueueUnderTest.t0

    let backend: TestBackend
    let clock = ManualClock(start: t0)
    let events: EventLog
    let window: any WindowService
    private let redis: RedisUnderTest?

    private init(_ backend: TestBackend, _ config: WindowConfig) async throws {
        self.backend = backend
        events = EventLog(clock: clock)
        switch backend {
        case .memory:
            redis = nil
            window = WindowSlot(name: "w", config: config, clock: clock, events: events)
        case .redis:
            let redis = try await RedisUnderTest(clock: clock)
            let made = RedisWindow(name: "w", backend: redis.backend, events: events)
            #expect(try await made.create(config).created)
            await redis.listen(made)
            self.redis = redis
            window = made
        }
    }

    /// Runs `body` on a new window of `backend`, then stops what it started.
    static func with(
        _ backend: TestBackend, _ config: WindowConfig = WindowConfig(), _ body: (WindowUnderTest) async throws -> Void
    ) async throws {
        let w = try await WindowUnderTest(backend, config)
        do {
            try await body(w)
        } catch {
            await w.stop()
            throw error
        }
        await w.stop()
    }

    private func stop() async {
        await redis?.stop()
    }

    /// Redis stops answering (the window's calls fail `backendUnavailable`).
    func stopRedis() { redis?.server.stop() }

    func later(_ seconds: Double) -> Timestamp { clock.now().adding(seconds: seconds) }

    // MARK: Operations through `WindowService`

    @discardableResult
    func show(_ r: ShowRequest) async throws -> WindowItem {
        try await window.showItem(r).value().item
    }

    func dismiss(_ id: String? = nil) async throws -> Dismissal {
        try await window.dismissItem(id: id).value()
    }

    func showing() async throws -> String? {
        try await window.readShowing().value()?.id
    }

    func item(_ id: String) async throws -> WindowItem {
        try await window.readItem(id).value()
    }

    func state(limit: Int = 100, after cursor: QueueCursor? = nil) async throws -> WindowState {
        try await window.readState(limit: limit, after: cursor).value()
    }

    func queued() async throws -> [String] { try await state().queued.map(\.id) }
    func counts() async throws -> WindowCounts { try await state(limit: 0).counts }

    /// `parkUntilShowing` in a task of its own.
    func parkForShowing(after: String?, until deadline: Timestamp) -> Task<WindowItem?, any Error> {
        let window = window
        return Task { try await window.parkUntilShowing(after: after, until: deadline).item() }
    }

    /// `parkUntilChange` in a task of its own.
    func parkForChange(_ id: String, from status: WindowItemStatus, until deadline: Timestamp) -> Task<
        WindowItem, any Error
    > {
        let window = window
        return Task { try await window.parkUntilChange(id: id, from: status, until: deadline).item() }
    }

    /// Waits until `n` long-polls are parked (with their deadline on the clock).
    func parked(_ n: Int, sourceLocation: SourceLocation = #_sourceLocation) async {
        await eventually(sourceLocation: sourceLocation) { await self.parkedCount() == n }
    }

    private func parkedCount() async -> Int {
        switch window {
        case let memory as WindowSlot: await memory.waiterCount
        case let redis as RedisWindow: redis.board.parkedCount
        default: 0
        }
    }

    /// Records every window item event as `type:id`.
    func recordEvents() -> SeenEvents {
        let seen = SeenEvents()
        _ = events.observe { e in
            guard case .windowItem(let item) = e.subject else { return }
            seen.list.withLock { $0.append("\(e.type):\(item.id)") }
        }
        return seen
    }
}
