import Testing

@testable import UsherCore

/// `StateMachine`: events through `await` and through `withIsolation`, errors, lifecycle.
@Suite struct MachineActorTests {
    let clock = ManualClock()

    func player() -> StateMachine {
        StateMachine(name: "jukebox", definitionName: "player", definition: .player, clock: clock)
    }

    @Test func walksThePlayerPath() async throws {
        let m = player()
        let v0 = clock.now().micros
        #expect(await m.snapshot().version == v0)
        let r1 = try await m.fire(event: "prepare")
        #expect(
            r1
                == TransitionResult(
                    MachineTransition(
                        event: "prepare", from: "NotReady", to: "Ready", version: v0 + 1, at: clock.now(),
                        cause: .event, data: nil)))
        clock.advance(by: 1)
        try await m.fire(event: "start", expectedVersion: v0 + 1, data: .string("side A"))
        clock.advance(by: 1)
        let r3 = try await m.fire(event: "teardown")
        #expect(r3.state == "NotReady")
        #expect(r3.previousState == "Running")
        #expect(r3.version == v0 + 3)

        let s = await m.snapshot()
        #expect(s.name == "jukebox")
        #expect(s.definitionName == "player")
        #expect(s.state == "NotReady")
        #expect(s.allowedEvents == ["prepare"])
        #expect(s.enteredAt == clock.now())
        #expect(s.history.map(\.event) == ["prepare", "start", "teardown"])
        #expect(s.history[1].data == .string("side A"))
        #expect(s.history.allSatisfy { $0.cause == .event })
    }

    @Test func runsSynchronouslyFromAPlainThread() throws {
        let m = player()
        let r = try m.withIsolation { m throws(MachineError) in try m.fire(event: "prepare") }
        #expect(r.state == "Ready")
        #expect(m.withIsolation { $0.snapshot().state } == "Ready")
    }

    @Test func reportsInvalidTransitionsWithTheAllowedEvents() async {
        let m = player()
        await #expect(throws: MachineError.invalidTransition(state: "NotReady", allowedEvents: ["prepare"])) {
            try await m.fire(event: "teardown")
        }
        #expect(await m.snapshot().history.isEmpty)
    }

    @Test func reportsUnknownEvents() async {
        let m = player()
        await #expect(throws: MachineError.unknownEvent(allowedEvents: ["prepare"])) {
            try await m.fire(event: "eject")
        }
    }

    @Test func checksTheExpectedVersion() async throws {
        let m = player()
        let v = await m.snapshot().version
        try await m.fire(event: "prepare", expectedVersion: v)
        await #expect(throws: MachineError.versionMismatch(current: v + 1)) {
            try await m.fire(event: "start", expectedVersion: v)
        }
        #expect(await m.snapshot().state == "Ready")
    }

    @Test func closeMakesEverythingGone() async throws {
        let m = StateMachine(name: "m", definitionName: nil, definition: MachineFixtures.lock, clock: clock)
        try await m.fire(event: "claim")
        #expect(clock.pendingCount == 1)
        await m.close()
        #expect(clock.pendingCount == 0)
        await #expect(throws: MachineError.gone) { try await m.fire(event: "release") }
        await #expect(throws: MachineError.gone) {
            try await m.waitForVersion(other: 0, until: clock.now().adding(seconds: 5))
        }
        #expect(await m.snapshot().state == "Held")
    }

    @Test func shutdownRefusesLaterCalls() async throws {
        let m = player()
        await m.shutdown()
        await #expect(throws: MachineError.shuttingDown) { try await m.fire(event: "prepare") }
        await m.close()
        await #expect(throws: MachineError.gone) { try await m.fire(event: "prepare") }
    }

    @Test func inlineDefinitionsShowInTheSnapshot() async {
        let m = StateMachine(name: "door", definitionName: nil, definition: MachineFixtures.lock, clock: clock)
        let snapshot = await m.snapshot()
        #expect(snapshot.definitionName == nil && snapshot.definition == MachineFixtures.lock)
        #expect(snapshot.allowedEvents == ["claim"])
    }
}
