import Dispatch
import Foundation
import Testing

@testable import Locking
@testable import UsherCore

/// Many tasks and plain threads firing at one machine at once: every event is
/// one transaction, so each step has exactly one winner and the history is a
/// valid path of the definition.
@Suite struct MachineRaceTests {
    let clock = ManualClock()

    /// What the racers got back.
    final class Outcomes: Sendable {
        private let state = Locked<(wins: [TransitionResult], losses: [MachineError])>(([], []))
        func win(_ r: TransitionResult) { state.withLock { $0.wins.append(r) } }
        func lose(_ e: MachineError) { state.withLock { $0.losses.append(e) } }
        var wins: [TransitionResult] { state.withLock { $0.wins } }
        var losses: [MachineError] { state.withLock { $0.losses } }
    }

    /// Runs `body` on `count` new threads; returns when all have finished, without blocking a task.
    static func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) async {
        let group = DispatchGroup()
        for i in 0..<count {
            group.enter()
            Thread {
                body(i)
                group.leave()
            }.start()
        }
        await withCheckedContinuation { c in group.notify(queue: .global()) { c.resume() } }
    }

    /// Fires from `tasks` tasks (awaiting the actor) and `threads` threads
    /// (`withIsolation`) at once, each calling `event(racer)` `times` times.
    static func race(
        _ m: StateMachine, tasks: Int, threads: Int, times: Int,
        event: @escaping @Sendable (Int) -> (String, Int64?), into outcomes: Outcomes
    ) async {
        async let onThreads: Void = onThreads(threads) { racer in
            for _ in 0..<times {
                let (e, expected) = event(racer)
                do throws(MachineError) {
                    outcomes.win(
                        try m.withIsolation { m throws(MachineError) in
                            try m.fire(event: e, expectedVersion: expected, data: .int(racer))
                        })
                } catch { outcomes.lose(error) }
            }
        }
        await withTaskGroup(of: Void.self) { group in
            for t in 0..<tasks {
                let racer = threads + t
                group.addTask {
                    for _ in 0..<times {
                        let (e, expected) = event(racer)
                        do throws(MachineError) {
                            outcomes.win(try await m.fire(event: e, expectedVersion: expected, data: .int(racer)))
                        } catch { outcomes.lose(error) }
                    }
                }
            }
        }
        await onThreads
    }

    /// Checks that `history` is a path of `definition`: consecutive, each step allowed.
    static func expectValidPath(_ history: [MachineTransition], of definition: MachineDefinition) {
        for (a, b) in zip(history, history.dropFirst()) {
            #expect(a.to == b.from)
            #expect(b.version == a.version + 1)
        }
        for t in history {
            #expect(definition.target(of: t.event, from: t.from) == t.to)
        }
    }

    @Test func eachStepHasExactlyOneWinner() async throws {
        let m = StateMachine(name: "jukebox", definitionName: "player", definition: .player, clock: clock)
        for _ in 0..<30 {
            let before = await m.snapshot()
            let event = MachineFixtures.playerEvent(after: before.state)
            let outcomes = Outcomes()
            // Half the racers send If-Match, half do not.
            await Self.race(
                m, tasks: 8, threads: 8, times: 1,
                event: { racer in
                    (event, racer.isMultiple(of: 2) ? before.version : nil)
                }, into: outcomes)

            let after = await m.snapshot()
            #expect(outcomes.wins.count == 1)
            #expect(outcomes.losses.count == 15)
            #expect(after.version == before.version + 1)
            let win = try #require(outcomes.wins.first)
            #expect(win.previousState == before.state)
            #expect(win.state == after.state)
            #expect(win.version == after.version)
            for loss in outcomes.losses {
                let expected: Bool
                switch loss {
                case .versionMismatch(let current): expected = current == after.version
                case .invalidTransition(let state, let allowed):
                    expected = state == after.state && !allowed.contains(event)
                default: expected = false
                }
                #expect(expected, "unexpected loss \(loss)")
            }
        }
    }

    @Test func aFreeForAllBurstLeavesAValidPath() async throws {
        let m = StateMachine(name: "jukebox", definitionName: "player", definition: .player, clock: clock)
        let v0 = await m.snapshot().version
        let outcomes = Outcomes()
        let events = MachineDefinition.player.events
        await Self.race(
            m, tasks: 16, threads: 16, times: 100,
            event: { _ in
                (events.randomElement()!, nil)
            }, into: outcomes)

        let final = await m.snapshot()
        let wins = outcomes.wins.sorted { $0.version < $1.version }
        #expect(wins.count + outcomes.losses.count == 3200)
        #expect(final.version == v0 + Int64(wins.count))
        #expect(wins.map(\.version) == Array((v0 + 1)..<(v0 + 1 + Int64(wins.count))))
        var state = MachineDefinition.player.initial
        for w in wins {
            #expect(w.previousState == state)
            #expect(MachineDefinition.player.target(of: w.event, from: w.previousState) == w.state)
            state = w.state
        }
        #expect(final.state == state)
        #expect(
            outcomes.losses.allSatisfy {
                if case .invalidTransition = $0 { true } else { false }
            })
        #expect(final.history.count == min(50, wins.count))
        #expect(final.history.map(\.version) == wins.suffix(50).map(\.version))
        #expect(final.history.map(\.event) == wins.suffix(50).map(\.event))
        Self.expectValidPath(final.history, of: .player)
    }

    @Test func eventsRacingTimeoutsLeaveAValidPathAndNoStrayTimers() async throws {
        let m = StateMachine(name: "door", definitionName: "lock", definition: MachineFixtures.lock, clock: clock)
        let outcomes = Outcomes()
        let events = ["claim", "renew", "release"]
        let clock = self.clock
        async let ticking: Void = Self.onThreads(1) { _ in
            for _ in 0..<2000 { clock.advance(by: 0.5) }
        }
        await Self.race(
            m, tasks: 8, threads: 8, times: 200,
            event: { _ in
                (events.randomElement()!, nil)
            }, into: outcomes)
        await ticking

        let final = await m.snapshot()
        Self.expectValidPath(final.history, of: MachineFixtures.lock)
        for w in outcomes.wins {
            #expect(MachineFixtures.lock.target(of: w.event, from: w.previousState) == w.state)
        }
        #expect(Set(outcomes.wins.map(\.version)).count == outcomes.wins.count)
        // Exactly the current entry's timers are pending: one while Held, none while Idle.
        #expect(clock.pendingCount == (final.state == "Held" ? 1 : 0))
    }
}
