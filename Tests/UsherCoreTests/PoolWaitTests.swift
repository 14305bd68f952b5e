import Foundation
import Testing

@testable import Locking
@testable import UsherCore

/// Fetchers that wait: the queue engine's FIFO line, `max_waiting`, and the
/// element that an expiry, a recycle or a new element hands over at once.
@Suite struct PoolWaitTests {
    typealias F = QueueFixtures
    let clock = ManualClock()

    func pool(_ config: PoolConfig) -> LeasePool { LeasePool(name: "p", config: config, clock: clock) }

    func later(_ seconds: Double) -> Timestamp { clock.now().adding(seconds: seconds) }

    @Test func aWaitingFetcherIsServedByAnExpiryAtOnce() async throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(1), leaseSeconds: 10))
        let a = try p.fetchNow()
        let deadline = later(30)
        let waiter = Task { try await p.fetch(FetchRequest(holder: "w"), until: deadline) }
        await F.eventually { await p.waiterCount == 1 }
        #expect(try p.stateNow().waiting == 1)
        clock.advance(by: 10)
        let got = try await waiter.value
        #expect(got.element == "e0" && got.holder == "w" && got.status == .active && got.grantedAt == F.at(10))
        #expect(got.createdAt == F.at(0))
        #expect(try #require(got.fence) > (a.fence ?? .max))
        let s = try p.stateNow()
        #expect(s.counts.expiredTotal == 1 && s.waiting == 0 && s.leased == 1)
        try p.checkInvariants()
    }

    @Test func waitingFetchersAreServedInFIFOOrder() async throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(1)))
        let held = try p.fetchNow()
        var waiters: [Task<Lease, any Error>] = []
        for i in 0..<3 {
            let deadline = later(30)
            waiters.append(Task { try await p.fetch(FetchRequest(id: "w\(i)"), until: deadline) })
            await F.eventually { await p.waiterCount == i + 1 }
        }
        var previous = held.id
        for i in 0..<3 {
            _ = try p.recycleNow(lease: previous)
            let got = try await waiters[i].value
            #expect(got.id == "w\(i)")
            previous = got.id
        }
    }

    @Test func aWaitThatEndsLeavesTheLineAndAnswersPoolExhausted() async throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(1), leaseSeconds: 60))
        let held = try p.fetchNow()
        let deadline = later(5)
        let waiter = Task { try await p.fetch(FetchRequest(id: "w"), until: deadline) }
        await F.eventually { await p.waiterCount == 1 }
        clock.advance(by: 5)
        await #expect(throws: PoolError.exhausted(nextExpiryAt: held.expiresAt)) { try await waiter.value }
        #expect(try p.stateNow().waiting == 0)
        // It left no trace: a retry with the same id is a new fetch.
        _ = try p.recycleNow(lease: held.id)
        #expect(try p.fetchNow(FetchRequest(id: "w")).status == .active)
        try p.checkInvariants()
    }

    @Test func aCancelledWaitLeavesTheLine() async throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(1)))
        _ = try p.fetchNow()
        let waiter = Task { try await p.fetch(FetchRequest(), until: later(30)) }
        await F.eventually { await p.waiterCount == 1 }
        waiter.cancel()
        await #expect(throws: PoolError.exhausted(nextExpiryAt: later(60))) { try await waiter.value }
        #expect(try p.stateNow().waiting == 0)
    }

    @Test func moreWaitersThanMaxWaitingIsFull() async throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(1), maxWaiting: 1))
        _ = try p.fetchNow()
        let waiter = Task { try await p.fetch(FetchRequest(), until: later(30)) }
        await F.eventually { await p.waiterCount == 1 }
        await #expect(throws: PoolError.full(retryAfterSeconds: 60)) {
            try await p.fetch(FetchRequest(), until: later(30))
        }
        // Without wait, nothing waits: the answer is pool_exhausted, not queue_full.
        #expect(throws: PoolError.exhausted(nextExpiryAt: later(60))) { try p.fetchNow() }
        waiter.cancel()
        _ = try? await waiter.value
    }

    @Test func aWaitWithAFreeElementAnswersAtOnce() async throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(1)))
        let got = try await p.fetch(FetchRequest(id: "a"), until: later(30))
        #expect(got.element == "e0" && clock.pendingCount == 1)  // only the lease's expiry
        // A retry of a waiting fetch joins the same wait.
        let w1 = Task { try await p.fetch(FetchRequest(id: "w"), until: later(30)) }
        await F.eventually { await p.waiterCount == 1 }
        let w2 = Task { try await p.fetch(FetchRequest(id: "w"), until: later(30)) }
        await F.eventually { await p.waiterCount == 2 }
        _ = try p.recycleNow(lease: "a")
        #expect(try await w1.value == w2.value)
    }

    @Test func twoWaitsOnOneFetchBothEndAsPoolExhausted() async throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(1)))
        let held = try p.fetchNow()
        let short = Task { try await p.fetch(FetchRequest(id: "w"), until: later(1)) }
        await F.eventually { await p.waiterCount == 1 }
        let long = Task { try await p.fetch(FetchRequest(id: "w"), until: later(2)) }
        await F.eventually { await p.waiterCount == 2 }
        clock.advance(by: 1)  // the first wait ends and takes the fetch out of the line
        await #expect(throws: PoolError.exhausted(nextExpiryAt: held.expiresAt)) { try await short.value }
        clock.advance(by: 1)
        await #expect(throws: PoolError.exhausted(nextExpiryAt: held.expiresAt)) { try await long.value }
        #expect(try p.stateNow().waiting == 0)
    }

    @Test func deleteAndShutdownAnswerWaitingFetchers() async throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(1)))
        _ = try p.fetchNow()
        let gone = Task { try await p.fetch(FetchRequest(), until: later(30)) }
        await F.eventually { await p.waiterCount == 1 }
        await p.close()
        await #expect(throws: PoolError.gone) { try await gone.value }

        let s = pool(PoolConfig(elements: PoolFixtures.elements(1)))
        let held = try s.fetchNow()
        let stopping = Task { try await s.fetch(FetchRequest(id: "w"), until: later(30)) }
        await F.eventually { await s.waiterCount == 1 }
        await s.shutdown()
        await #expect(throws: PoolError.shuttingDown) { try await stopping.value }
        // The fetcher left the line: the element is not handed to a client that is gone.
        _ = try s.recycleNow(lease: held.id)
        #expect(try s.stateNow().available == 1)
    }

    /// Fetchers parking while a server thread recycles through `withIsolation`:
    /// a grant that lands between a fetcher's check and its registration must
    /// still answer it (every fetch is served; none is left parked).
    @Test func everyWaitingFetcherIsAnsweredWhileAThreadRecycles() async throws {
        let p = pool(PoolConfig(elements: PoolFixtures.elements(2), maxWaiting: 10_000))
        let fetchers = 200
        let served = Counter()
        let stop = Flag()
        let recycler = Thread {
            while !stop.isSet {
                let leases = (try? p.stateNow())?.elements.compactMap { $0.lease?.id } ?? []
                for id in leases { _ = try? p.recycleNow(lease: id) }
            }
        }
        recycler.start()
        let deadline = later(3600)
        let executor = QueueTaskExecutor()
        let tasks = (0..<fetchers).map { i in
            // As the HTTP server runs deferred answers: with a task executor preference.
            Task(executorPreference: executor) {
                _ = try await p.fetch(FetchRequest(id: "f\(i)"), until: deadline)
                served.add()
            }
        }
        await F.eventually { served.value == fetchers }
        stop.set()
        for t in tasks { t.cancel() }
        #expect(served.value == fetchers)
        #expect(await p.waiterCount == 0)
    }
}

/// Runs tasks' jobs on a concurrent Dispatch queue (like the HTTP server's deferred answers).
final class QueueTaskExecutor: TaskExecutor, @unchecked Sendable {
    private let queue = DispatchQueue(label: "test.deferred", attributes: .concurrent)

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        queue.async { unowned.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    func asUnownedTaskExecutor() -> UnownedTaskExecutor { UnownedTaskExecutor(ordinary: self) }
}

/// A count shared by tasks and threads.
final class Counter: Sendable {
    private let state = Locked(0)
    func add() { state.withLock { $0 += 1 } }
    var value: Int { state.withLock { $0 } }
}
