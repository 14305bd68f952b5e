import TestSupport
import Testing

@testable import UsherCore

/// The showing long-poll: how a screen learns what to display next.
@Suite struct WindowWaitTests {
    typealias F = QueueFixtures
    let clock = ManualClock()

    func later(_ seconds: Double) -> Timestamp { clock.now().adding(seconds: seconds) }

    @Test func withoutAfterItWaitsWhileNothingIsShowing() async throws {
        let w = WindowSlot(name: "w", config: WindowConfig(), clock: clock)
        let deadline = later(30)
        let waiter = Task { try await w.waitForShowing(after: nil, until: deadline) }
        await F.eventually { await w.waiterCount == 1 }
        _ = try await w.show(ShowRequest(id: "a"))
        #expect(try await waiter.value?.id == "a")
        // Something is showing: it answers at once.
        #expect(try await w.waitForShowing(after: nil, until: deadline)?.id == "a")
        #expect(await w.waiterCount == 0)
    }

    @Test func aDismissAndTheNextShowingAreOneChange() async throws {
        let w = WindowSlot(name: "w", config: WindowConfig(), clock: clock)
        _ = try await w.show(ShowRequest(id: "a"))
        _ = try await w.show(ShowRequest(id: "b"))
        let deadline = later(30)
        let waiters = (0..<3).map { _ in Task { try await w.waitForShowing(after: "a", until: deadline) } }
        await F.eventually { await w.waiterCount == 3 }
        _ = try await w.dismiss()
        // Nobody sees the window empty between a and b.
        for waiter in waiters { #expect(try await waiter.value?.id == "b") }
    }

    @Test func afterTheLastItemItAnswersNull() async throws {
        let w = WindowSlot(name: "w", config: WindowConfig(), clock: clock)
        _ = try await w.show(ShowRequest(id: "a"))
        let waiter = Task { try await w.waitForShowing(after: "a", until: later(30)) }
        await F.eventually { await w.waiterCount == 1 }
        _ = try await w.dismiss(id: "a")
        #expect(try await waiter.value == nil)
    }

    @Test func anAutoDismissOnTheClockWakesTheScreen() async throws {
        let w = WindowSlot(name: "w", config: WindowConfig(displaySeconds: 2), clock: clock)
        _ = try await w.show(ShowRequest(id: "a"))
        _ = try await w.show(ShowRequest(id: "b"))
        let waiter = Task { try await w.waitForShowing(after: "a", until: later(30)) }
        await F.eventually { await w.waiterCount == 1 }
        clock.advance(by: 1.9)
        #expect(await w.waiterCount == 1)
        clock.advance(by: 0.1)
        let b = try await waiter.value
        #expect(b?.id == "b" && b?.shownAt == F.at(2))
    }

    @Test func theDeadlineAnswersWhatIsShownAndAnotherItemAnswersAtOnce() async throws {
        let w = WindowSlot(name: "w", config: WindowConfig(), clock: clock)
        _ = try await w.show(ShowRequest(id: "a"))
        let waiter = Task { try await w.waitForShowing(after: "a", until: later(5)) }
        await F.eventually { await w.waiterCount == 1 }
        clock.advance(by: 5)
        #expect(try await waiter.value?.id == "a")
        // `after` names something else (the screen is behind): at once.
        #expect(try await w.waitForShowing(after: "old", until: later(5))?.id == "a")
    }

    @Test func closeAndShutdownAnswerWaiters() async throws {
        let w = WindowSlot(name: "w", config: WindowConfig(), clock: clock)
        let gone = Task { try await w.waitForShowing(after: nil, until: later(30)) }
        await F.eventually { await w.waiterCount == 1 }
        await w.close()
        await #expect(throws: WindowError.gone) { try await gone.value }
        await #expect(throws: WindowError.gone) { try await w.show(ShowRequest()) }

        let s = WindowSlot(name: "s", config: WindowConfig(), clock: clock)
        let stopping = Task { try await s.waitForShowing(after: nil, until: later(30)) }
        await F.eventually { await s.waiterCount == 1 }
        await s.shutdown()
        await #expect(throws: WindowError.shuttingDown) { try await stopping.value }
        await #expect(throws: WindowError.shuttingDown) { try await s.waitForShowing(after: nil, until: later(30)) }
        #expect(try await s.show(ShowRequest(id: "still")).item.status == .showing)
    }
}
