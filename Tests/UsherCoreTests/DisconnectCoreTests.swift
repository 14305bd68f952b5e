import TestSupport
import Testing

@testable import Locking
@testable import UsherCore

/// What a client's hang-up takes back, in the managers: a cancelled task
/// (the server's sign of a hang-up) withdraws what its wait was for, and the
/// undo of an answer that never reached its client gives the grant, lease
/// or hand-out back. On a `ManualClock`; hang-ups are `Task.cancel()`.
@Suite struct DisconnectCoreTests {
    typealias F = QueueFixtures
    let clock = ManualClock()

    func later(_ seconds: Double) -> Timestamp { clock.now().adding(seconds: seconds) }

    // MARK: - The queue engine

    @Test func disconnectCancelsAWaitingVisitorAndNothingElse() throws {
        var e = F.engine(QueueConfig(capacity: 1))
        let a = try e.add("a")
        try e.add("b")
        let b = try e.disconnect(id: "b", now: F.at(1))
        #expect(b.status == .cancelled && b.reason == "disconnected" && b.finishedAt == F.at(1))
        #expect(e.counts.cancelledTotal == 1 && e.counts.waiting == 0)
        // A holder is not disconnected: its grant came first.
        #expect(try e.disconnect(id: "a", now: F.at(1)) == a)
        // Its slot, freed, goes to nobody.
        _ = try e.complete(id: "a", now: F.at(2))
        #expect(e.counts.holding == 0)
    }

    @Test func undoGrantReleasesTheHolderAndPassesTheSlotOn() throws {
        var e = F.engine(QueueConfig(capacity: 1, holdSeconds: 60))
        let a = try e.add("a")
        try e.add("b")
        let fence = try #require(a.fence)
        let undone = e.undoGrant(id: "a", fence: fence, now: F.at(1))
        #expect(undone?.status == .released && undone?.reason == "undelivered")
        #expect(try e.visitor(id: "b", now: F.at(1)).status == .granted)
        #expect(e.counts.releasedTotal == 1 && e.counts.grantedTotal == 2)
        let again = e.undoGrant(id: "a", fence: fence, now: F.at(1))
        #expect(again == nil)
    }

    @Test func undoGrantOfAnotherGrantChangesNothing() throws {
        var e = F.engine(QueueConfig(capacity: 1, holdSeconds: 10))
        let a = try e.add("a")
        try e.add("b")
        let fence = try #require(a.fence)
        let other = e.undoGrant(id: "a", fence: fence + 1, now: F.at(1))
        #expect(other == nil)
        // Expired meanwhile: the slot is b's now, and stays so.
        let late = e.undoGrant(id: "a", fence: fence, now: F.at(10))
        #expect(late == nil)
        #expect(try e.visitor(id: "a", now: F.at(10)).status == .expired)
        #expect(try e.visitor(id: "b", now: F.at(10)).status == .granted)
    }

    /// An enqueue naming a known id (a client's retry) may be the answer
    /// that carried the grant: no undo takes that grant back afterwards,
    /// whether the retry found it granted or still waiting.
    @Test func undoGrantLeavesAGrantARetryNamedAlone() throws {
        var e = F.engine(QueueConfig(capacity: 1, holdSeconds: 60))
        let a = try e.add("a")
        try e.add("b")
        let retry = try e.enqueue(VisitorRequest(id: "a"), now: F.at(1))
        #expect(retry.view == a && !retry.created)
        #expect(e.undoGrant(id: "a", fence: try #require(a.fence), now: F.at(1)) == nil)
        #expect(try e.visitor(id: "a", now: F.at(1)).status == .granted)
        _ = try e.enqueue(VisitorRequest(id: "b"), now: F.at(2))
        _ = try e.complete(id: "a", now: F.at(3))
        let b = try e.visitor(id: "b", now: F.at(3))
        #expect(b.status == .granted)
        #expect(e.undoGrant(id: "b", fence: try #require(b.fence), now: F.at(4)) == nil)
        #expect(e.counts.holding == 1 && e.counts.releasedTotal == 0)
    }

    // MARK: - The queue's long-poll

    func queue(_ config: QueueConfig = QueueConfig(capacity: 1, holdSeconds: 60), events: EventLog? = nil)
        -> VisitorQueue
    {
        VisitorQueue(name: "deploy", config: config, clock: clock, events: events)
    }

    @Test func aCancelledWithdrawingWaitCancelsTheVisitorAndTellsOtherWaiters() async throws {
        let events = EventLog(clock: clock)
        let seen = record(events)
        let q = queue(events: events)
        _ = try await q.enqueue(VisitorRequest(id: "a"))
        _ = try await q.enqueue(VisitorRequest(id: "b"))
        let deadline = later(30)
        let poster = Task { try await q.waitWhileWaiting(id: "b", until: deadline, withdrawing: true) }
        let watcher = Task { try await q.waitForChange(id: "b", from: .waiting, until: deadline) }
        await F.eventually { await q.waiterCount == 2 }
        poster.cancel()
        let b = try await poster.value
        #expect(b.status == .cancelled && b.reason == "disconnected")
        #expect(try await watcher.value.status == .cancelled)
        #expect(await q.waiterCount == 0 && clock.pendingCount == 1)  // only a's hold
        #expect(seen.list.withLock { $0 }.last == #"cancelled:"disconnected""#)
    }

    @Test func aCancelledWaitWithoutWithdrawingLeavesTheVisitorInLine() async throws {
        let q = queue()
        _ = try await q.enqueue(VisitorRequest(id: "a"))
        _ = try await q.enqueue(VisitorRequest(id: "b"))
        let poster = Task { try await q.waitWhileWaiting(id: "b", until: later(30)) }
        await F.eventually { await q.waiterCount == 1 }
        poster.cancel()
        #expect(try await poster.value.status == .waiting)
        _ = try await q.complete(id: "a")
        #expect(try await q.visitor(id: "b").status == .granted)
    }

    @Test func aWaitCancelledBeforeItParksWithdrawsToo() async throws {
        let q = queue()
        _ = try await q.enqueue(VisitorRequest(id: "a"))
        _ = try await q.enqueue(VisitorRequest(id: "b"))
        let deadline = later(30)
        let poster = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await q.waitWhileWaiting(id: "b", until: deadline, withdrawing: true)
        }
        #expect(try await poster.value.reason == "disconnected")
        #expect(await q.waiterCount == 0)
    }

    @Test func aGrantBeforeTheCancellationWinsAndItsUndoReleases() async throws {
        let q = queue()
        _ = try await q.enqueue(VisitorRequest(id: "a"))
        _ = try await q.enqueue(VisitorRequest(id: "b"))
        _ = try await q.enqueue(VisitorRequest(id: "c"))
        let poster = Task { try await q.waitWhileWaiting(id: "b", until: later(30), withdrawing: true) }
        await F.eventually { await q.waiterCount == 1 }
        _ = try await q.complete(id: "a")
        poster.cancel()
        let b = try await poster.value
        #expect(b.status == .granted)
        let fence = try #require(b.fence)
        let undone = try await q.undoGrant(id: "b", fence: fence)
        #expect(undone?.status == .released && undone?.reason == "undelivered")
        #expect(try await q.visitor(id: "c").status == .granted)
    }

    /// A grant and a cancellation racing: the answer always tells the state,
    /// and a cancelled visitor is never granted afterwards.
    @Test func aGrantRacingACancellationIsConsistent() async throws {
        var outcomes: Set<VisitorStatus> = []
        for _ in 0..<200 {
            let q = queue()
            _ = try await q.enqueue(VisitorRequest(id: "a"))
            _ = try await q.enqueue(VisitorRequest(id: "b"))
            let poster = Task { try await q.waitWhileWaiting(id: "b", until: later(30), withdrawing: true) }
            await F.eventually { await q.waiterCount == 1 }
            async let completed = q.complete(id: "a")
            poster.cancel()
            _ = try await completed
            let b = try await poster.value
            outcomes.insert(b.status)
            #expect(try await q.visitor(id: "b").status == b.status)
            if let fence = b.fence { _ = try await q.undoGrant(id: "b", fence: fence) }
            let counts = await q.counts
            #expect(counts.holding == 0 && counts.waiting == 0)
        }
        #expect(outcomes.isSubset(of: [.granted, .cancelled]))
    }

    // MARK: - Pools

    func pool(_ elements: Int = 1) -> LeasePool {
        LeasePool(name: "p", config: PoolConfig(elements: PoolFixtures.elements(elements)), clock: clock)
    }

    @Test func anUndeliveredLeaseIsRecycledToTheNextFetcher() async throws {
        let p = pool()
        let a = try p.fetchNow(FetchRequest(id: "a"))
        let waiter = Task { try await p.fetch(FetchRequest(id: "w"), until: later(30)) }
        await F.eventually { await p.waiterCount == 1 }
        let fence = try #require(a.fence)
        let undone = try await p.recycleUndelivered(lease: "a", fence: fence)
        #expect(undone?.status == .recycled && undone?.reason == "undelivered")
        #expect(try await waiter.value.element == "e0")
        #expect(try await p.recycleUndelivered(lease: "a", fence: fence) == nil)
        #expect(try p.stateNow().counts.recycledTotal == 1)
        try p.checkInvariants()
    }

    @Test func aCancelledFetchIsWithdrawnInTheSameStep() async throws {
        let p = pool()
        _ = try p.fetchNow()
        let deadline = later(30)
        let waiter = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await p.fetch(FetchRequest(id: "w"), until: deadline)
        }
        await #expect(throws: PoolError.self) { try await waiter.value }
        #expect(try p.stateNow().waiting == 0)
        try p.checkInvariants()
    }

    // MARK: - Pipelines

    let t0 = Timestamp(micros: 1_767_225_600_000_000)

    @Test func undeliverPutsTheItemBackWithoutCountingTheHandOut() throws {
        var e = PipelineEngine(config: PipelineConfig(ackSeconds: 60, maxDeliveries: 1), createdAt: t0, seed: 1)
        try e.add("a")
        try e.add("b")
        let taken = try e.take(max: 1, now: t0)
        let undone = e.undeliver("a", fence: taken[0].fence, now: t0.adding(seconds: 1))
        let item = try #require(undone)
        #expect(item.status == .ready && item.deliveries == 0 && item.takenAt == nil && item.fence == nil)
        #expect(e.inFlightCount == 0 && e.deadCount == 0 && e.position(of: "a") == 1)
        #expect(e.counts.deliveredTotal == 1)  // a total never goes down
        // Handed out again: its first delivery; consumed with its new fence.
        let again = try e.take(max: 1, now: t0.adding(seconds: 2))
        #expect(again.map(\.id) == ["a"] && again[0].deliveries == 1)
        let stale = e.undeliver("a", fence: taken[0].fence, now: t0.adding(seconds: 2))
        #expect(stale == nil)
        _ = try e.consume("a", fence: again[0].fence, now: t0.adding(seconds: 3))
    }

    @Test func undeliverOfALaterHandOutKeepsTheEarlierOnes() throws {
        var e = PipelineEngine(config: PipelineConfig(ackSeconds: 10, maxDeliveries: 3), createdAt: t0, seed: 1)
        try e.add("a")
        _ = try e.take(max: 1, now: t0)
        let second = try e.take(max: 1, now: t0.adding(seconds: 10))  // the ack ran out: redelivered
        #expect(second[0].deliveries == 2)
        let undone = e.undeliver("a", fence: second[0].fence, now: t0.adding(seconds: 11))
        let item = try #require(undone)
        #expect(item.deliveries == 1 && item.status == .ready && item.fence == second[0].fence)
    }

    @Test func aConsumerOrProducerCancelledBeforeItStartsTakesAndPushesNothing() async throws {
        let p = Pipeline(name: "jobs", config: PipelineConfig(capacity: 1), clock: clock)
        _ = try await p.push(PipelinePushRequest(id: "x", payload: .null))
        let deadline = later(30)
        let consumer = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await p.takeWaiting(max: 1, until: deadline)
        }
        #expect(try await consumer.value.isEmpty)
        #expect(await p.state().ready == 1)
        _ = try await p.take(max: 1)
        _ = try await p.consume("x")  // room again
        let producer = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await p.pushWaiting(PipelinePushRequest(id: "y", payload: .null), until: deadline)
        }
        await #expect(throws: PipelineError.full(retryAfterSeconds: 1)) { try await producer.value }
        #expect(await p.state().ready == 0)
    }

    @Test func undeliveredItemsGoToAParkedConsumerWithAReleasedEvent() async throws {
        let events = EventLog(clock: clock)
        let seen = record(events)
        let p = Pipeline(name: "jobs", config: PipelineConfig(ackSeconds: 60), clock: clock, events: events)
        _ = try await p.push(PipelinePushRequest(id: "x", payload: .null))
        let taken = try await p.take(max: 1)
        let consumer = Task { try await p.takeWaiting(max: 1, until: later(30)) }
        await PipelineFixtures.eventually { await p.waitingConsumers == 1 }
        let back = await p.undeliver([(id: "x", fence: taken[0].fence)])
        #expect(back.map(\.id) == ["x"])
        let next = try await consumer.value
        #expect(next.map(\.id) == ["x"] && next[0].deliveries == 1)
        #expect(seen.list.withLock { $0 }.contains(#"released:"undelivered""#))
    }
}

/// Events seen by a subscriber.
final class SeenEvents: Sendable {
    let list = Locked<[String]>([])
}

/// Every event of `events` from now on, as `type:reason` (`null` without one).
func record(_ events: EventLog) -> SeenEvents {
    let seen = SeenEvents()
    _ = events.observe { e in
        seen.list.withLock { $0.append("\(e.type):\(e.subject.reason.map { "\"\($0)\"" } ?? "null")") }
    }
    return seen
}

extension EventSubject {
    /// The `reason` the event's object carries, if any.
    var reason: String? {
        switch self {
        case .visitor(let v): v.reason
        case .lease(let lease): lease.reason
        case .pipelineItem(_, let reason): reason
        default: nil
        }
    }
}
