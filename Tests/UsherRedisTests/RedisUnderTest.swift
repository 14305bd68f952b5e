import Foundation
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// Where a resource under test is kept.
enum TestBackend: String, CaseIterable, CustomStringConvertible, Sendable {
    case memory
    case redis

    var description: String { rawValue }
}

/// A redis-server of its own and a `RedisBackend` on it whose scripts take
/// their time from the test's clock: the Redis side of every *ServiceTests
/// fixture.
struct RedisUnderTest: Sendable {
    let server: RedisServer
    let backend: RedisBackend

    /// Starts both; returns once the backend is connected.
    init(clock: ManualClock) async throws {
        server = try await RedisServer()
        backend = try RedisBackend(
            settings: RedisSettings(url: "redis://127.0.0.1:\(server.port)"), time: .clock(clock), clock: clock)
        try backend.start { _ in }
        let backend = backend
        await eventually { await backend.unavailableReason() == nil }
    }

    /// Makes `resource` hear notices; returns once the subscriber is in.
    func listen(_ resource: some RedisResource) async {
        resource.listen()
        let backend = backend
        await eventually {
            let reply = try? await backend.command(["PUBSUB", "NUMSUB", backend.channel])
            return (reply?.array?.last?.int ?? 0) > 0
        }
    }

    func stop() async {
        await backend.stop()
        server.stop()
    }
}

/// One resource behind its service protocol, on either backend, on a
/// `ManualClock`, with an event log that keeps what it emits.
final class ServiceRig<Service: Sendable>: Sendable {
    let clock: ManualClock
    let events: EventLog
    let service: Service
    private let redis: RedisUnderTest?

    /// `memory` makes the in-memory resource; `shared` makes the Redis one on
    /// the rig's redis-server, creates it and listens through the fixture.
    init(
        _ backend: TestBackend, clock: ManualClock = ManualClock(),
        memory: (ManualClock, EventLog) -> Service,
        shared: (RedisUnderTest, EventLog) async throws -> Service
    ) async throws {
        let events = EventLog(clock: clock)
        _ = events.observe { _ in }
        self.clock = clock
        self.events = events
        switch backend {
        case .memory:
            service = memory(clock, events)
            redis = nil
        case .redis:
            let redis = try await RedisUnderTest(clock: clock)
            service = try await shared(redis, events)
            self.redis = redis
        }
    }

    func stop() async {
        await redis?.stop()
    }
}

/// Waits up to 5 s for `condition`; records an issue when it never holds.
func eventually(sourceLocation: SourceLocation = #_sourceLocation, _ condition: () async -> Bool) async {
    let deadline = ContinuousClock.now + .seconds(5)
    while ContinuousClock.now < deadline {
        if await condition() { return }
        try? await Task.sleep(for: .milliseconds(1))
    }
    Issue.record("condition never became true", sourceLocation: sourceLocation)
}

/// Polls `condition` every 5 ms for up to 5 s.
func poll(_ condition: () async -> Bool) async -> Bool {
    for _ in 0..<1000 {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return await condition()
}
