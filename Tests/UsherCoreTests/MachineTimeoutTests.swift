import Testing

@testable import UsherCore

/// State timeouts, driven by a `ManualClock`.
@Suite struct MachineTimeoutTests {
    let clock = ManualClock()

    func lock() -> StateMachine {
        StateMachine(name: "door", definitionName: "lock", definition: MachineFixtures.lock, clock: clock)
    }

    @Test func aTimeoutFiresAndIsRecorded() async throws {
        let m = lock()
        let t0 = clock.now()
        let claimed = try await m.fire(event: "claim")
        clock.advance(by: 9.999)
        #expect(await m.snapshot().state == "Held")
        clock.advance(by: 0.001)
        let s = await m.snapshot()
        #expect(s.state == "Idle")
        #expect(s.version == claimed.version + 1)
        #expect(s.enteredAt == t0.adding(seconds: 10))
        #expect(
            s.history.last
                == MachineTransition(
                    event: "expire", from: "Held", to: "Idle", version: claimed.version + 1,
                    at: t0.adding(seconds: 10), cause: .timeout, data: nil))
        #expect(clock.pendingCount == 0)
    }

    @Test func leavingTheStateCancelsTheTimer() async throws {
        let m = lock()
        try await m.fire(event: "claim")
        clock.advance(by: 5)
        let released = try await m.fire(event: "release")
        #expect(clock.pendingCount == 0)
        clock.advance(by: 60)
        let s = await m.snapshot()
        #expect(s.state == "Idle")
        #expect(s.version == released.version)
    }

    @Test func aSelfTransitionRestartsTheTimer() async throws {
        let m = lock()
        let t0 = clock.now()
        try await m.fire(event: "claim")
        clock.advance(by: 6)
        try await m.fire(event: "renew")
        #expect(clock.pendingCount == 1)
        clock.advance(by: 6)  // 12 s after the claim, 6 after the renewal
        #expect(await m.snapshot().state == "Held")
        clock.advance(by: 4)
        let s = await m.snapshot()
        #expect(s.state == "Idle")
        #expect(s.history.last?.at == t0.adding(seconds: 16))
        #expect(s.history.map(\.event) == ["claim", "renew", "expire"])
    }

    @Test func reEnteringStartsANewTimer() async throws {
        let m = lock()
        let t0 = clock.now()
        try await m.fire(event: "claim")
        clock.advance(by: 8)
        try await m.fire(event: "release")
        clock.advance(by: 1)
        try await m.fire(event: "claim")
        clock.advance(by: 9.5)  // past the first claim's deadline
        #expect(await m.snapshot().state == "Held")
        clock.advance(by: 0.5)
        let s = await m.snapshot()
        #expect(s.state == "Idle")
        #expect(s.history.last?.at == t0.adding(seconds: 19))
    }

    @Test func theInitialStatesTimeoutsStartAtCreationAndChain() async throws {
        let t0 = clock.now()
        let m = StateMachine(name: "c", definitionName: nil, definition: MachineFixtures.chain, clock: clock)
        #expect(clock.pendingCount == 1)
        clock.advance(by: 15)
        let s = await m.snapshot()
        #expect(s.state == "C")
        #expect(s.history.map(\.event) == ["next", "finish"])
        #expect(s.history.map(\.at) == [t0.adding(seconds: 10), t0.adding(seconds: 15)])
        #expect(s.history.allSatisfy { $0.cause == .timeout })
        #expect(clock.pendingCount == 0)
    }

    @Test func aTimeoutWakesAWaiter() async throws {
        let m = lock()
        let claimed = try await m.fire(event: "claim")
        let waiter = Task { try await m.waitForVersion(other: claimed.version, until: clock.now().adding(seconds: 30)) }
        await MachineFixtures.eventually { await m.waitingCount == 1 }
        clock.advance(by: 10)
        let s = try await waiter.value
        #expect(s.state == "Idle")
        #expect(s.version == claimed.version + 1)
        #expect(clock.pendingCount == 0)
    }

    @Test func aStaleTimerThatStillRunsDoesNothing() async throws {
        let m = lock()
        try await m.fire(event: "claim")  // entry 1
        try await m.fire(event: "renew")  // entry 2
        // A timer whose cancel came too late (it was already running) carries entry 1's token.
        await m.timeoutFired(TimeoutToken(entry: 1, index: 0))
        let s = await m.snapshot()
        #expect(s.state == "Held")
        #expect(s.history.count == 2)
    }

    @Test func closingStopsTimeouts() async throws {
        let m = lock()
        try await m.fire(event: "claim")
        await m.close()
        clock.advance(by: 20)
        #expect(await m.snapshot().state == "Held")
    }
}
