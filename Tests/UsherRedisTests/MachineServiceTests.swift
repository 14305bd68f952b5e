import Foundation
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// `MachineService` on both backends with a `ManualClock`: the same calls,
/// the same answers, the same events.
@Suite struct MachineServiceTests {
    typealias Backend = TestBackend
    typealias Rig = ServiceRig<any MachineService>

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

extension ServiceRig<any MachineService> {
    /// A machine on one backend, its clock and the events it emitted.
    convenience init(_ backend: TestBackend, definition: MachineDefinition) async throws {
        try await self.init(backend) { clock, events in
            StateMachine(name: "m", definitionName: nil, definition: definition, clock: clock, events: events)
        } shared: { redis, events in
            let made = RedisMachine(name: "m", backend: redis.backend, events: events)
            _ = try await made.create(definitionName: nil, definition: definition)
            await redis.listen(made)
            return made
        }
    }

    var machine: any MachineService { service }

    /// The types of the events emitted so far.
    var eventTypes: [String] { events.buffered().map(\.type) }
}
