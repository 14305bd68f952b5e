import Dispatch
import Testing

@testable import UsherCore

/// A task executor like the HTTP server's: jobs on a concurrent Dispatch queue.
final class ConcurrentTaskExecutor: TaskExecutor, @unchecked Sendable {
    private let queue = DispatchQueue(label: "usher.test.tasks", attributes: .concurrent)

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        queue.async { unowned.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }
}

/// `parkCall` from many tasks that prefer an executor of their own, as the
/// HTTP server's deferred answers do: each manager parks them all and answers
/// each once. (The release-only race of a registration that ran on the
/// task's executor is caught by `Benchmarks/run-longpoll`, not here.)
@Suite struct ParkedCallTests {
    let clock = ManualClock()
    let executor = ConcurrentTaskExecutor()

    func later(_ seconds: Double) -> Timestamp { clock.now().adding(seconds: seconds) }

    @Test func machineWaiters() async throws {
        let m = StateMachine(name: "m", definitionName: "player", definition: .player, clock: clock)
        let v = await m.snapshot().version
        let deadline = later(30)
        let waiters = (0..<20).map { _ in
            Task(executorPreference: executor) { try await m.waitForVersion(other: v, until: deadline) }
        }
        await MachineFixtures.eventually { await m.waitingCount == 20 }
        #expect(clock.pendingCount == 20)
        try m.withIsolation { m throws(MachineError) in _ = try m.fire(event: "prepare") }
        for w in waiters { #expect(try await w.value.version == v + 1) }
        #expect(clock.pendingCount == 0)
    }

    @Test func windowWaiters() async throws {
        let w = WindowSlot(name: "w", config: WindowConfig(), clock: clock)
        let deadline = later(30)
        let waiters = (0..<20).map { _ in
            Task(executorPreference: executor) { try await w.waitForShowing(after: nil, until: deadline) }
        }
        await MachineFixtures.eventually { await w.waiterCount == 20 }
        _ = try await w.show(ShowRequest(id: "a"))
        for waiter in waiters { #expect(try await waiter.value?.id == "a") }
        #expect(await w.waiterCount == 0)
    }

    @Test func pipelineConsumersAndTheirDeadlines() async throws {
        let p = Pipeline(name: "p", config: PipelineConfig(), clock: clock)
        let consumers = (0..<20).map { _ in
            Task(executorPreference: executor) { try await p.takeWaiting(max: 1, until: later(5)) }
        }
        await MachineFixtures.eventually { await p.waitingConsumers == 20 }
        _ = try await p.push(PipelinePushRequest(id: "a", payload: .null))
        clock.advance(by: 5)
        var got: [String] = []
        for c in consumers { got += try await c.value.map(\.id) }
        #expect(got == ["a"])
        #expect(await p.waitingConsumers == 0)
    }
}
