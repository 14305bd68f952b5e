import TestSupport
import Testing

@testable import UsherCore

/// `waitForVersion`: the long-poll behind `GET /v1/machines/{m}?wait=S&version=V`.
@Suite struct MachineWaitTests {
    let clock = ManualClock()

    func player() -> StateMachine {
        StateMachine(name: "jukebox", definitionName: "player", definition: .player, clock: clock)
    }

    @Test func returnsAtOnceWhenTheVersionAlreadyDiffers() async throws {
        let m = player()
        let s = try await m.waitForVersion(other: 42, until: clock.now().adding(seconds: 30))
        #expect(s.state == "NotReady")
        #expect(clock.pendingCount == 0)
    }

    @Test func returnsAtOnceWhenTheDeadlineHasPassed() async throws {
        let m = player()
        let v = await m.snapshot().version
        let s = try await m.waitForVersion(other: v, until: clock.now())
        #expect(s.version == v)
        #expect(await m.waitingCount == 0)
    }

    @Test func aTransitionWakesEveryWaiter() async throws {
        let m = player()
        let v = await m.snapshot().version
        let deadline = clock.now().adding(seconds: 30)
        let waiters = (0..<3).map { _ in Task { try await m.waitForVersion(other: v, until: deadline) } }
        await MachineFixtures.eventually { await m.waitingCount == 3 }
        #expect(clock.pendingCount == 3)

        try m.withIsolation { m throws(MachineError) in _ = try m.fire(event: "prepare") }
        for w in waiters {
            let s = try await w.value
            #expect(s.state == "Ready")
            #expect(s.version == v + 1)
        }
        // The deadline timers were cancelled when the waiters woke early.
        #expect(clock.pendingCount == 0)
        #expect(await m.waitingCount == 0)
    }

    @Test func aWaiterTimesOutWithTheUnchangedSnapshot() async throws {
        let m = player()
        let v = await m.snapshot().version
        let waiter = Task { try await m.waitForVersion(other: v, until: clock.now().adding(seconds: 5)) }
        await MachineFixtures.eventually { await m.waitingCount == 1 }
        clock.advance(by: 4.999)
        #expect(await m.waitingCount == 1)
        clock.advance(by: 0.001)
        let s = try await waiter.value
        #expect(s.version == v)
        #expect(s.state == "NotReady")
        #expect(await m.waitingCount == 0)
    }

    @Test func closeAnswersParkedWaitersWithGone() async throws {
        let m = player()
        let v = await m.snapshot().version
        let waiter = Task { try await m.waitForVersion(other: v, until: clock.now().adding(seconds: 30)) }
        await MachineFixtures.eventually { await m.waitingCount == 1 }
        await m.close()
        await #expect(throws: MachineError.gone) { try await waiter.value }
        #expect(clock.pendingCount == 0)
    }

    @Test func shutdownAnswersParkedWaitersWithShuttingDown() async throws {
        let m = player()
        let v = await m.snapshot().version
        let waiter = Task { try await m.waitForVersion(other: v, until: clock.now().adding(seconds: 30)) }
        await MachineFixtures.eventually { await m.waitingCount == 1 }
        await m.shutdown()
        await #expect(throws: MachineError.shuttingDown) { try await waiter.value }
        #expect(clock.pendingCount == 0)
    }

    @Test func aCancelledWaiterReturnsAndLeavesNothingBehind() async throws {
        let m = player()
        let v = await m.snapshot().version
        let waiter = Task { try await m.waitForVersion(other: v, until: clock.now().adding(seconds: 30)) }
        await MachineFixtures.eventually { await m.waitingCount == 1 }
        waiter.cancel()
        let s = try await waiter.value
        #expect(s.version == v)
        await MachineFixtures.eventually { await m.waitingCount == 0 }
        #expect(clock.pendingCount == 0)
    }

    @Test func anAlreadyCancelledTaskDoesNotPark() async throws {
        let m = player()
        let v = await m.snapshot().version
        let deadline = clock.now().adding(seconds: 30)
        let waiter = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await m.waitForVersion(other: v, until: deadline)
        }
        let s = try await waiter.value
        #expect(s.version == v)
        #expect(await m.waitingCount == 0)
        #expect(clock.pendingCount == 0)
    }
}
