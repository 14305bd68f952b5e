import Foundation
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// `MachineService` on both backends with a `ManualClock`: the same calls,
/// the same answers, the same events.
@Suite struct MachineServiceTests {
    enum Backend: String, CaseIterable, Sendable { case memory, redis }

    /// A machine on one backend, its clock and the events it emitted.
    final class Rig: Sendable {
        let clock: ManualClock
        let events: EventLog
        let machine: any MachineService
        private let redis: (server: RedisServer, backend: RedisBackend)?

        init(_ backend: Backend, definition: MachineDefinition) async throws {
            let clock = ManualClock()
            let events = EventLog(clock: clock)
            events.subscribe(after: nil, start: { _ in }, deliver: { _ in })
            self.clock = clock
            self.events = events
            switch backend {
            case .memory:
                machine = StateMachine(
                    name: "m", definitionName: nil, definition: definition, clock: clock, events: events)
                redis = nil
            case .redis:
                let server = try await RedisServer()
                let shared = try RedisBackend(
                    settings: RedisSettings(url: "redis://127.0.0.1:\(server.port)"), time: .clock(clock), clock: clock)
                try shared.start { _ in }
                let made = RedisMachine(name: "m", backend: shared, events: events)
                _ = try await made.create(definitionName: nil, definition: definition)
                made.listen()
                // Notices are heard once the subscriber is in.
                let subscribed = await poll {
                    let reply = try? await shared.command(["PUBSUB", "NUMSUB", shared.channel])
                    return (reply?.array?.last?.int ?? 0) > 0
                }
                #expect(subscribed)
                machine = made
                redis = (server, shared)
            }
        }

        func stop() async {
            guard let redis else { return }
            await redis.backend.stop()
            redis.server.stop()
        }

        /// The types of the events emitted so far.
        var eventTypes: [String] { events.buffered().map(\.type) }
    }

    @Test(arguments: Backend.allCases)
    func aStateTimeoutFiresWhenTheClockPassesIt(_ backend: Backend) async throws {
        let rig = try await Rig(backend, definition: RedisMachineFixtures.lock)
        let claimed = try await rig.machine.fireEvent("claim", expectedVersion: nil, data: nil).value()
        #expect(claimed.state == "Held")
        rig.clock.advance(by: 9.9)
        #expect(try await rig.machine.readSnapshot().value().state == "Held")
        rig.clock.advance(by: 0.1)
        #expect(await poll { (try? await rig.machine.readSnapshot().value().state) == "Idle" })
        let snapshot = try await rig.machine.readSnapshot().value()
        #expect(snapshot.history.last?.cause == .timeout)
        #expect(snapshot.enteredAt == rig.clock.now())
        #expect(await poll { rig.eventTypes == ["transition", "transition"] })
        await rig.stop()
    }

    @Test(arguments: Backend.allCases)
    func transactionsEmitWhatTheMemoryMachineEmits(_ backend: Backend) async throws {
        let rig = try await Rig(backend, definition: RedisMachineFixtures.lock)
        let opened = try await rig.machine.openTransaction(
            event: "claim", expectedVersion: nil, data: .object([("by", .string("a"))]), seconds: 5
        ).value()
        #expect(opened.status == .open)
        await #expect(throws: MachineError.transactionOpen(opened)) {
            try await rig.machine.fireEvent("claim", expectedVersion: nil, data: nil).value()
        }
        let committed = try await rig.machine.commitTransaction(opened.id).value()
        #expect(committed.state == "Held")
        let second = try await rig.machine.openTransaction(
            event: "release", expectedVersion: committed.version, data: nil, seconds: 5
        ).value()
        #expect(try await rig.machine.abortTransaction(second.id).value().status == .aborted)
        await #expect(throws: MachineError.transactionEnded(.aborted)) {
            try await rig.machine.commitTransaction(second.id).value()
        }
        // An expiry comes from the clock, as a timeout does.
        let third = try await rig.machine.openTransaction(
            event: "release", expectedVersion: nil, data: nil, seconds: 1
        ).value()
        rig.clock.advance(by: 1)
        #expect(await poll { (try? await rig.machine.readSnapshot().value().transaction) == nil })
        #expect(try await rig.machine.readSnapshot().value().history.last?.transaction == third.id)
        #expect(
            await poll {
                rig.eventTypes == [
                    "transaction-opened", "transition", "transaction-committed", "transaction-opened",
                    "transaction-aborted", "transaction-opened", "transaction-aborted",
                ]
            }, "\(rig.eventTypes)")
        await rig.stop()
    }

    @Test(arguments: Backend.allCases)
    func aParkedWaitSeesTheNextVersion(_ backend: Backend) async throws {
        let rig = try await Rig(backend, definition: RedisMachineFixtures.lock)
        let machine = rig.machine
        let seen = try await machine.readSnapshot().value().version
        let deadline = rig.clock.now().adding(seconds: 30)
        let waiting = Task { try await machine.parkUntilVersion(other: seen, until: deadline) }
        await #expect(throws: MachineError.versionMismatch(current: seen)) {
            try await machine.fireEvent("claim", expectedVersion: seen + 1, data: nil).value()
        }
        let fired = try await machine.fireEvent("claim", expectedVersion: seen, data: nil).value()
        #expect(try await waiting.value.version == fired.version)
        // Already past: answered at once with the same version.
        let now = try await machine.parkUntilVersion(other: fired.version, until: rig.clock.now())
        #expect(now.version == fired.version)
        await rig.stop()
    }
}

/// Polls `condition` every 5 ms for up to 5 s.
private func poll(_ condition: () async -> Bool) async -> Bool {
    for _ in 0..<1000 {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return await condition()
}
