import Testing

@testable import UsherCore

/// Transactions (`open`, `commit`, `abort`, expiry), driven by a `ManualClock`.
@Suite struct MachineTransactionTests {
    let clock = ManualClock()

    func player(events: EventLog? = nil, budget: StorageBudget = StorageBudget()) -> StateMachine {
        StateMachine(
            name: "jukebox", definitionName: "player", definition: .player, clock: clock, events: events,
            budget: budget)
    }

    func lock() -> StateMachine {
        StateMachine(name: "door", definitionName: "lock", definition: MachineFixtures.lock, clock: clock)
    }

    @Test func openThenCommitMakesTheTransitionAsAnEventWould() async throws {
        let m = player()
        let v0 = await m.snapshot().version
        let t0 = clock.now()
        let opened = try await m.open(event: "prepare", data: .string("side A"), seconds: 30)
        #expect(opened.event == "prepare")
        #expect(opened.from == "NotReady")
        #expect(opened.to == "Ready")
        #expect(opened.status == .open)
        #expect(opened.version == v0 + 1)
        #expect(opened.openedAt == t0)
        #expect(opened.expiresAt == t0.adding(seconds: 30))
        #expect(opened.id == String(t0.micros + 1))

        let held = await m.snapshot()
        #expect(held.state == "NotReady")
        #expect(held.version == v0 + 1)
        #expect(held.transaction == opened)
        #expect(held.allowedEvents == [])
        #expect(held.history == [])
        #expect(held.enteredAt == t0)

        clock.advance(by: 2)
        let committed = try await m.commit(transaction: opened.id)
        #expect(committed.state == "Ready")
        #expect(committed.previousState == "NotReady")
        #expect(committed.event == "prepare")
        #expect(committed.version == v0 + 2)

        let s = await m.snapshot()
        #expect(s.state == "Ready")
        #expect(s.transaction == nil)
        #expect(s.allowedEvents == ["start"])
        #expect(s.enteredAt == clock.now())
        #expect(
            s.history == [
                MachineTransition(
                    event: "prepare", from: "NotReady", to: "Ready", version: v0 + 2, at: clock.now(), cause: .event,
                    data: .string("side A"), transaction: opened.id)
            ])
        #expect(await m.transactionCounts == TransactionCounts(committed: 1))
        // Its expiry timer is gone.
        #expect(clock.pendingCount == 0)
        #expect(try await m.fire(event: "start").state == "Running")
    }

    @Test func abortKeepsTheStateAndRecordsTheAttempt() async throws {
        let m = player()
        let v0 = await m.snapshot().version
        let opened = try await m.open(event: "prepare", seconds: 30)
        clock.advance(by: 1)
        let aborted = try await m.abort(transaction: opened.id)
        #expect(aborted.status == .aborted)
        #expect(aborted.version == v0 + 2)
        let s = await m.snapshot()
        #expect(s.state == "NotReady")
        #expect(s.version == v0 + 2)
        #expect(s.transaction == nil)
        #expect(s.allowedEvents == ["prepare"])
        #expect(
            s.history == [
                MachineTransition(
                    event: "prepare", from: "NotReady", to: "NotReady", version: v0 + 2, at: clock.now(),
                    cause: .aborted, data: nil, transaction: opened.id, attempted: "Ready")
            ])
        #expect(await m.transactionCounts == TransactionCounts(aborted: 1))
        #expect(clock.pendingCount == 0)
        // The machine takes events again.
        #expect(try await m.fire(event: "prepare").version == v0 + 3)
    }

    @Test func aTransactionExpiresWhenItsTimeoutRunsOut() async throws {
        let m = player()
        let opened = try await m.open(event: "prepare", seconds: 5)
        clock.advance(by: 4.999)
        #expect(await m.snapshot().transaction?.id == opened.id)
        clock.advance(by: 0.001)
        let s = await m.snapshot()
        #expect(s.transaction == nil)
        #expect(s.state == "NotReady")
        #expect(s.version == opened.version + 1)
        #expect(s.history.last?.cause == .expired)
        #expect(s.history.last?.at == opened.expiresAt)
        #expect(s.history.last?.attempted == "Ready")
        #expect(await m.transactionCounts == TransactionCounts(expired: 1))
        await #expect(throws: MachineError.transactionEnded(.expired)) {
            try await m.commit(transaction: opened.id)
        }
    }

    @Test func anOpenTransactionRefusesEveryOtherEventAndTransaction() async throws {
        let m = player()
        let opened = try await m.open(event: "prepare", seconds: 30)
        await #expect(throws: MachineError.transactionOpen(opened)) { try await m.fire(event: "prepare") }
        // Not allowed from the state either: the open transaction is the reason given.
        await #expect(throws: MachineError.transactionOpen(opened)) { try await m.fire(event: "start") }
        await #expect(throws: MachineError.transactionOpen(opened)) {
            try await m.open(event: "prepare", seconds: 30)
        }
        // An unknown event is still 404, a stale If-Match still 412 (checked first).
        await #expect(throws: MachineError.unknownEvent(allowedEvents: [])) { try await m.fire(event: "fly") }
        await #expect(throws: MachineError.versionMismatch(current: opened.version)) {
            try await m.fire(event: "prepare", expectedVersion: opened.version - 1)
        }
        #expect(await m.snapshot().version == opened.version)
    }

    @Test func openIsCheckedAsAnEventIs() async throws {
        let m = player()
        let v0 = await m.snapshot().version
        await #expect(throws: MachineError.unknownEvent(allowedEvents: ["prepare"])) {
            try await m.open(event: "fly", seconds: 30)
        }
        await #expect(throws: MachineError.invalidTransition(state: "NotReady", allowedEvents: ["prepare"])) {
            try await m.open(event: "start", seconds: 30)
        }
        await #expect(throws: MachineError.versionMismatch(current: v0)) {
            try await m.open(event: "prepare", expectedVersion: v0 + 7, seconds: 30)
        }
        #expect(clock.pendingCount == 0)
        let opened = try await m.open(event: "prepare", expectedVersion: v0, seconds: 30)
        #expect(opened.version == v0 + 1)
    }

    @Test func endedAndUnknownTransactions() async throws {
        let m = player()
        await #expect(throws: MachineError.unknownTransaction) { try await m.commit(transaction: "42") }
        let first = try await m.open(event: "prepare", seconds: 30)
        try await m.commit(transaction: first.id)
        await #expect(throws: MachineError.transactionEnded(.committed)) { try await m.commit(transaction: first.id) }
        await #expect(throws: MachineError.transactionEnded(.committed)) { try await m.abort(transaction: first.id) }
        let second = try await m.open(event: "start", seconds: 30)
        #expect(second.id != first.id)
        await #expect(throws: MachineError.unknownTransaction) { try await m.abort(transaction: "42") }
        try await m.abort(transaction: second.id)
        await #expect(throws: MachineError.transactionEnded(.aborted)) { try await m.abort(transaction: second.id) }
        await #expect(throws: MachineError.transactionEnded(.aborted)) { try await m.commit(transaction: second.id) }
    }

    @Test func aStateTimeoutWaitsForTheTransactionAndFiresAtItsAbort() async throws {
        let m = lock()
        let claimed = try await m.fire(event: "claim")  // Held times out after 10 s
        let opened = try await m.open(event: "release", seconds: 30)
        clock.advance(by: 10)
        var s = await m.snapshot()
        #expect(s.state == "Held")
        #expect(s.transaction?.id == opened.id)
        clock.advance(by: 5)
        try await m.abort(transaction: opened.id)
        s = await m.snapshot()
        #expect(s.state == "Idle")
        #expect(s.history.map(\.event) == ["claim", "release", "expire"])
        #expect(s.history.map(\.cause) == [.event, .aborted, .timeout])
        #expect(s.history.last?.at == clock.now())
        #expect(s.version == claimed.version + 3)
        #expect(clock.pendingCount == 0)
    }

    @Test func aStateTimeoutDueDuringATransactionFiresWhenItExpires() async throws {
        let m = lock()
        try await m.fire(event: "claim")
        try await m.open(event: "release", seconds: 12)
        clock.advance(by: 12)
        let s = await m.snapshot()
        #expect(s.state == "Idle")
        #expect(s.history.map(\.cause) == [.event, .expired, .timeout])
    }

    @Test func aCommitLeavesTheStateAndDropsItsDueTimeout() async throws {
        let m = lock()
        try await m.fire(event: "claim")
        let opened = try await m.open(event: "renew", seconds: 30)
        clock.advance(by: 11)
        #expect(await m.snapshot().state == "Held")
        try await m.commit(transaction: opened.id)
        // The self-transition restarted the state's timer: 10 s from the commit.
        var s = await m.snapshot()
        #expect(s.history.map(\.event) == ["claim", "renew"])
        #expect(clock.pendingCount == 1)
        clock.advance(by: 9.999)
        #expect(await m.snapshot().state == "Held")
        clock.advance(by: 0.001)
        s = await m.snapshot()
        #expect(s.state == "Idle")
        #expect(s.history.map(\.event) == ["claim", "renew", "expire"])
    }

    @Test func openCommitAbortAndExpiryEachWakeWaiters() async throws {
        let m = player()
        func waitOnce(_ action: () async throws -> Void) async throws -> MachineSnapshot {
            let v = await m.snapshot().version
            let waiter = Task { try await m.waitForVersion(other: v, until: clock.now().adding(seconds: 300)) }
            await MachineFixtures.eventually { await m.waitingCount == 1 }
            try await action()
            return try await waiter.value
        }
        var opened: MachineTransaction?
        var s = try await waitOnce { opened = try await m.open(event: "prepare", seconds: 30) }
        #expect(s.transaction?.id == opened?.id)
        s = try await waitOnce { try await m.commit(transaction: opened!.id) }
        #expect(s.state == "Ready")
        #expect(s.transaction == nil)
        opened = try await m.open(event: "start", seconds: 30)
        s = try await waitOnce { try await m.abort(transaction: opened!.id) }
        #expect(s.history.last?.cause == .aborted)
        opened = try await m.open(event: "start", seconds: 30)
        s = try await waitOnce { clock.advance(by: 30) }
        #expect(s.history.last?.cause == .expired)
        #expect(s.state == "Ready")
    }

    @Test func deletingTheMachineEndsItsTransactionAndGivesBackItsBytes() async throws {
        let budget = StorageBudget()
        let m = player(budget: budget)
        let opened = try await m.open(event: "prepare", data: .string("payload"), seconds: 30)
        #expect(budget.usedBytes == StorageBudget.cost("prepare", "NotReady", "Ready", payload: .string("payload")))
        await m.close()
        #expect(budget.usedBytes == 0)
        #expect(clock.pendingCount == 0)
        await #expect(throws: MachineError.gone) { try await m.commit(transaction: opened.id) }
        await #expect(throws: MachineError.gone) { try await m.abort(transaction: opened.id) }
    }

    @Test func aTransactionsBytesAreChargedOnceWhicheverWayItEnds() async throws {
        let budget = StorageBudget()
        let m = player(budget: budget)
        let data = JSONValue.string("0123456789")
        let cost = StorageBudget.cost("prepare", "NotReady", "Ready", payload: data)
        let aborted = try await m.open(event: "prepare", data: data, seconds: 30)
        try await m.abort(transaction: aborted.id)
        #expect(budget.usedBytes == cost)
        let committed = try await m.open(event: "prepare", data: data, seconds: 30)
        try await m.commit(transaction: committed.id)
        #expect(budget.usedBytes == 2 * cost)
        // Old entries leave the history with the bytes they were charged.
        for _ in 0..<200 {
            let t = try await m.open(event: "start", seconds: 30)
            try await m.abort(transaction: t.id)
        }
        let history = await m.snapshot().history
        #expect(history.count == MachineEngine.historyLimit)
        #expect(budget.usedBytes == history.map(MachineEngine.storedBytes).reduce(0, +))
    }

    @Test func aFullBudgetRefusesTheOpenAndStoresNothing() async throws {
        let m = player(budget: StorageBudget(limit: 10))
        let v0 = await m.snapshot().version
        await #expect(throws: MachineError.self) { try await m.open(event: "prepare", seconds: 30) }
        let s = await m.snapshot()
        #expect(s.version == v0)
        #expect(s.transaction == nil)
        #expect(clock.pendingCount == 0)
    }

    @Test func eventsComeFromOneFunctionPerTransactionStep() async throws {
        let log = EventLog(capacity: 100, clock: clock)
        _ = log.observe { _ in }
        let m = player(events: log)
        let first = try await m.open(event: "prepare", seconds: 30)
        try await m.commit(transaction: first.id)
        let second = try await m.open(event: "start", seconds: 30)
        try await m.abort(transaction: second.id)
        try await m.open(event: "start", seconds: 1)
        clock.advance(by: 1)
        let events = log.buffered()
        #expect(
            events.map(\.type) == [
                "transaction-opened", "transition", "transaction-committed", "transaction-opened",
                "transaction-aborted", "transaction-opened", "transaction-aborted",
            ])
        let statuses = events.map { event -> String? in
            if case .transaction(let t) = event.subject { return t.status.rawValue }
            return nil
        }
        #expect(statuses == ["open", nil, "committed", "open", "aborted", "open", "expired"])
        if case .transaction(let opened) = events[0].subject { #expect(opened.id == first.id) } else { Issue.record() }
        if case .transition(let t) = events[1].subject { #expect(t.transaction == first.id) } else { Issue.record() }
        #expect(events.allSatisfy { $0.kind == "machine" && $0.name == "jukebox" })
    }
}
