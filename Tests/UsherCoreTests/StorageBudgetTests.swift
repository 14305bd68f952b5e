import Testing

@testable import UsherCore

/// `max_stored_bytes`: every kind charges what it stores to one budget,
/// refuses a write that would pass it (storing nothing), and gives the
/// bytes back when records leave or the resource is deleted.
@Suite struct StorageBudgetTests {
    /// A 1 KiB string payload.
    static let kilobyte = JSONValue.string(String(repeating: "x", count: 1024))

    @Test func costIsOverheadStringsAndPayload() {
        #expect(StorageBudget.cost("ab", nil, "c") == StorageBudget.recordOverhead + 3)
        // A value costs its strings and one overhead per value (4) and per key (1).
        let v = JSONValue.object([("k", .array([.string("abc"), .int(1)]))])
        #expect(StorageBudget.size(of: v) == 5 * StorageBudget.valueOverhead + 1 + 3)
        #expect(StorageBudget.size(of: nil) == 0)
    }

    @Test func reserveRefusesBeyondTheLimitAndTakesNothing() {
        let budget = StorageBudget(limit: 100)
        #expect(throws: Never.self) { try budget.reserve(60) }
        #expect(throws: StorageFull(used: 60, limit: 100, requested: 41)) { try budget.reserve(41) }
        #expect(budget.usedBytes == 60)
        budget.release(60)
        #expect(budget.usedBytes == 0)
    }

    @Test func queueChargesVisitorsAndFreesEvictedOnesAndAllOnDelete() throws {
        let one = StorageBudget.cost("a", payload: Self.kilobyte)
        let budget = StorageBudget(limit: 2 * one)
        let clock = ManualClock()
        var config = QueueConfig()
        config.history = 0
        let queue = VisitorQueue(name: "q", config: config, clock: clock, budget: budget)
        _ = try queue.withIsolation { q throws(QueueError) in
            try q.enqueue(VisitorRequest(id: "a", payload: Self.kilobyte))
        }
        _ = try queue.withIsolation { q throws(QueueError) in
            try q.enqueue(VisitorRequest(id: "b", payload: Self.kilobyte))
        }
        #expect(budget.usedBytes == 2 * one)
        // Full: 507 with the figures, and nothing stored.
        #expect(throws: QueueError.storageFull(StorageFull(used: 2 * one, limit: 2 * one, requested: one))) {
            _ = try queue.withIsolation { q throws(QueueError) in
                try q.enqueue(VisitorRequest(id: "c", payload: Self.kilobyte))
            }
        }
        #expect(queue.withIsolation { $0.counts.enqueuedTotal } == 2)
        #expect(throws: QueueError.notFound("visitor \"c\"")) {
            _ = try queue.withIsolation { q throws(QueueError) in try q.visitor(id: "c") }
        }
        // Completed and forgotten (history 0): its bytes come back at the next operation.
        _ = try queue.withIsolation { q throws(QueueError) in try q.complete(id: "a") }
        _ = queue.withIsolation { $0.counts }
        #expect(budget.usedBytes == one)
        _ = try queue.withIsolation { q throws(QueueError) in
            try q.enqueue(VisitorRequest(id: "c", payload: Self.kilobyte))
        }
        #expect(budget.usedBytes == 2 * one)
        queue.withIsolation { $0.close() }
        #expect(budget.usedBytes == 0)
    }

    @Test func serverMadeIdsAreChargedAsStored() throws {
        let budget = StorageBudget()
        let queue = VisitorQueue(name: "q", config: QueueConfig(), clock: ManualClock(), budget: budget)
        let (view, _) = try queue.withIsolation { q throws(QueueError) in try q.enqueue(VisitorRequest()) }
        #expect(budget.usedBytes == StorageBudget.cost(view.id))
        _ = try queue.withIsolation { q throws(QueueError) in try q.remove(id: view.id) }
        queue.withIsolation { $0.close() }
        #expect(budget.usedBytes == 0)
    }

    @Test func windowChargesItemsAndFreesThemOnDelete() throws {
        let budget = StorageBudget()
        let window = WindowSlot(name: "w", config: WindowConfig(), clock: ManualClock(), budget: budget)
        _ = try window.withIsolation { w throws(WindowError) in
            try w.show(ShowRequest(id: "i1", title: "t", payload: Self.kilobyte))
        }
        #expect(budget.usedBytes > 1024)
        let tight = StorageBudget(limit: budget.usedBytes + 100)
        let small = WindowSlot(name: "s", config: WindowConfig(), clock: ManualClock(), budget: tight)
        _ = try small.withIsolation { w throws(WindowError) in
            try w.show(ShowRequest(id: "i1", title: "t", payload: Self.kilobyte))
        }
        #expect(throws: WindowError.self) {
            _ = try small.withIsolation { w throws(WindowError) in
                try w.show(ShowRequest(id: "i2", payload: Self.kilobyte))
            }
        }
        window.withIsolation { $0.close() }
        #expect(budget.usedBytes == 0)
    }

    @Test func poolChargesElementsAndLeases() throws {
        let budget = StorageBudget()
        let pool = LeasePool(
            name: "p", config: PoolConfig(elements: [PoolElementSpec(id: "e1", data: Self.kilobyte)]),
            clock: ManualClock(),
            budget: budget)
        let declared = StorageBudget.cost("e1", payload: Self.kilobyte)
        #expect(budget.usedBytes == declared)
        _ = try pool.withIsolation { p throws(PoolError) in try p.putElement("e2", data: Self.kilobyte) }
        #expect(budget.usedBytes == 2 * declared)
        // New data for an element replaces its charge.
        _ = try pool.withIsolation { p throws(PoolError) in try p.putElement("e2", data: nil) }
        #expect(budget.usedBytes == declared + StorageBudget.cost("e2"))
        _ = try pool.withIsolation { p throws(PoolError) in try p.removeElement("e2", force: false) }
        #expect(budget.usedBytes == declared)
        let lease = try pool.withIsolation { p throws(PoolError) in try p.fetch(FetchRequest()) }
        #expect(budget.usedBytes > declared)
        _ = try pool.withIsolation { p throws(PoolError) in try p.recycle(lease: lease.id) }
        pool.withIsolation { $0.close() }
        #expect(budget.usedBytes == 0)
    }

    @Test func poolRefusesAnElementBeyondTheBudget() throws {
        let budget = StorageBudget(limit: StorageBudget.cost("e1", payload: Self.kilobyte) + 10)
        let pool = LeasePool(name: "p", config: PoolConfig(), clock: ManualClock(), budget: budget)
        _ = try pool.withIsolation { p throws(PoolError) in try p.putElement("e1", data: Self.kilobyte) }
        #expect(throws: PoolError.self) {
            _ = try pool.withIsolation { p throws(PoolError) in try p.putElement("e2", data: Self.kilobyte) }
        }
        // A failed replacement keeps the old data and its charge.
        let before = budget.usedBytes
        #expect(throws: PoolError.self) {
            _ = try pool.withIsolation { p throws(PoolError) in
                try p.putElement("e1", data: .array([Self.kilobyte, Self.kilobyte]))
            }
        }
        #expect(budget.usedBytes == before)
        #expect(try pool.withIsolation { p throws(PoolError) in try p.state(limit: 10) }.size == 1)
    }

    @Test func pipelineChargesItemsUntilTheyLeaveDeadOnesIncluded() throws {
        let budget = StorageBudget()
        let clock = ManualClock()
        let pipeline = Pipeline(
            name: "p", config: PipelineConfig(capacity: 2, maxDeliveries: 1), clock: clock, budget: budget)
        let one = StorageBudget.cost("a", payload: Self.kilobyte)
        _ = try pipeline.withIsolation { p throws(PipelineError) in
            try p.push(PipelinePushRequest(id: "a", payload: Self.kilobyte))
        }
        _ = try pipeline.withIsolation { p throws(PipelineError) in
            try p.push(PipelinePushRequest(id: "b", payload: Self.kilobyte))
        }
        #expect(budget.usedBytes == 2 * one)
        // Consumed: the payload is gone, the remembered id stays. Released past
        // max_deliveries: dead, still stored.
        let remembered = StorageBudget.cost("a")
        _ = try pipeline.withIsolation { p throws(PipelineError) in try p.take(max: 1) }
        _ = try pipeline.withIsolation { p throws(PipelineError) in try p.consume("a") }
        #expect(budget.usedBytes == one + remembered)
        _ = try pipeline.withIsolation { p throws(PipelineError) in try p.take(max: 1) }
        _ = try pipeline.withIsolation { p throws(PipelineError) in try p.release("b") }
        #expect(pipeline.withIsolation { $0.state(limit: 0).dead } == 1)
        #expect(budget.usedBytes == one + remembered)
        _ = try pipeline.withIsolation { p throws(PipelineError) in try p.cancel("b") }
        #expect(budget.usedBytes == 2 * remembered)
        // Forgetting them (history 0) gives the rest back.
        _ = try pipeline.withIsolation { p throws(PipelineError) in try p.apply(PipelinePatch(history: 0)) }
        #expect(budget.usedBytes == 0)
        // A server-made id, then the pipeline deleted.
        _ = try pipeline.withIsolation { p throws(PipelineError) in try p.push(PipelinePushRequest(payload: .int(1))) }
        #expect(budget.usedBytes > 0)
        pipeline.withIsolation { $0.close() }
        #expect(budget.usedBytes == 0)
    }

    @Test func pipelineBatchIsAllOrNothingAgainstTheBudget() throws {
        let one = StorageBudget.cost("a", payload: Self.kilobyte)
        let budget = StorageBudget(limit: 2 * one + 10)
        let pipeline = Pipeline(name: "p", config: PipelineConfig(), clock: ManualClock(), budget: budget)
        #expect(throws: PipelineError.self) {
            _ = try pipeline.withIsolation { p throws(PipelineError) in
                try p.pushBatch(["a", "b", "c"].map { PipelinePushRequest(id: $0, payload: Self.kilobyte) })
            }
        }
        #expect(budget.usedBytes == 0)
        #expect(pipeline.withIsolation { $0.state(limit: 10).ready } == 0)
    }

    @Test func machineChargesItsHistoryAndDropsTheOldest() throws {
        let budget = StorageBudget()
        let machine = StateMachine(
            name: "m", definitionName: "player", definition: .player, clock: ManualClock(), budget: budget)
        let events = ["prepare", "start", "teardown"]
        for i in 0..<60 {
            _ = try machine.withIsolation { m throws(MachineError) in
                try m.fire(event: events[i % 3], data: Self.kilobyte)
            }
        }
        let each = budget.usedBytes / 50
        #expect(budget.usedBytes > 50 * 1024 && budget.usedBytes < 51 * each)
        machine.withIsolation { $0.close() }
        #expect(budget.usedBytes == 0)
        let tight = StorageBudget(limit: 100)
        let small = StateMachine(
            name: "s", definitionName: "player", definition: .player, clock: ManualClock(), budget: tight)
        #expect(throws: MachineError.self) {
            _ = try small.withIsolation { m throws(MachineError) in try m.fire(event: "prepare", data: Self.kilobyte) }
        }
        #expect(small.withIsolation { $0.snapshot().state } == "NotReady")
    }

    @Test func eventBufferDropsItsOldestToStayWithinTheBudget() {
        let draft = ResourceEvent.Draft(kind: "queue", name: "q", type: "granted", subject: .summary(Self.kilobyte))
        let one = StorageBudget.cost("queue", "q", "granted", payload: Self.kilobyte)
        let budget = StorageBudget(limit: 3 * one)
        let log = EventLog(capacity: 100, clock: ManualClock(), budget: budget)
        _ = log.observe { _ in }
        for _ in 0..<5 { log.emit(draft) }
        #expect(log.bufferedIDs() == [3, 4, 5])
        #expect(budget.usedBytes == 3 * one)
        // Another owner takes the rest: the buffer gives way, events still flow.
        budget.charge(3 * one)
        log.emit(draft)
        #expect(log.bufferedIDs() == [6])  // kept, uncharged, until the next event
        #expect(log.storedBytes == 0)
    }
}
