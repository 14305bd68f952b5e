/// Identifies one timeout timer: the state entry that started it and which
/// timeout of the definition it is. A timer from an earlier entry is stale.
struct TimeoutToken: Sendable, Hashable {
    /// The engine's entry counter when the state was entered.
    let entry: UInt64
    /// Index into the definition's `timeouts`.
    let index: Int
}

/// A timer the current state entry needs.
struct PlannedTimeout: Sendable, Equatable {
    let token: TimeoutToken
    let deadline: Timestamp
}

/// The value-type heart of a machine: state, version and history, and the
/// rules that change them. No clock, no timers, no concurrency; `StateMachine`
/// owns one and does the scheduling, so this is tested synchronously.
///
/// The version starts at the creation time in microseconds since the Unix
/// epoch and grows by one per transition, so it is also the transition's
/// fence (docs/api.md, Conventions, "Fences") and keeps growing across a delete and re-create.
struct MachineEngine: Sendable {
    /// How many transitions the history keeps.
    static let historyLimit = 50

    let definition: MachineDefinition
    private(set) var state: String
    private(set) var version: Int64
    private(set) var enteredAt: Timestamp
    /// The last `historyLimit` transitions, oldest first.
    private(set) var history: [MachineTransition] = []
    /// This machine's share of the server's storage budget: its history.
    private(set) var storage: StorageAccount
    /// Counts state entries (self-transitions included); tags timers.
    private(set) var entry: UInt64 = 0
    /// The open transaction, if any: every other event waits for its end.
    private(set) var transaction: MachineTransaction?
    /// Transactions ended so far, by outcome.
    private(set) var transactionCounts = TransactionCounts()
    /// The next transaction id (see `makeTransactionID`).
    private var nextTransactionID: Int64
    /// State timeouts that fell due while a transaction was open: they fire
    /// when it ends without a transition.
    private var deferredTimeouts: [TimeoutToken] = []

    /// A machine in the definition's initial state.
    init(definition: MachineDefinition, createdAt: Timestamp, budget: StorageBudget = StorageBudget()) {
        storage = StorageAccount(budget)
        self.definition = definition
        state = definition.initial
        version = createdAt.micros
        enteredAt = createdAt
        nextTransactionID = createdAt.micros
    }

    /// The events allowed now, in definition order: the current state's, or
    /// none while a transaction is open.
    var allowedEvents: [String] { transaction == nil ? definition.allowedEvents(in: state) : [] }

    /// The timers the current state entry needs, one per timeout of the state.
    func plannedTimeouts() -> [PlannedTimeout] {
        definition.timeoutIndices(in: state).map { i in
            PlannedTimeout(
                token: TimeoutToken(entry: entry, index: i),
                deadline: enteredAt.adding(seconds: definition.timeouts[i].afterSeconds))
        }
    }

    /// Applies a client's event. Checks, in this order: the definition knows
    /// the event (else `unknownEvent`, 404), the expected version matches (else
    /// `versionMismatch`, 412, a precondition), no transaction is open (else
    /// `transactionOpen`, 409), the event is allowed from the current state
    /// (else `invalidTransition`, 409).
    @discardableResult
    mutating func fire(
        _ event: String, expectedVersion: Int64?, data: JSONValue?, at now: Timestamp
    ) throws(MachineError) -> MachineTransition {
        let to = try target(of: event, expectedVersion: expectedVersion)
        try reserve(event: event, to: to, data: data)
        return enter(to, event: event, cause: .event, data: data, transaction: nil, at: now)
    }

    /// Opens a transaction for `event`, checked as `fire` checks it; the
    /// history entry it will make is charged now. The version moves on by one.
    mutating func open(
        _ event: String, expectedVersion: Int64?, data: JSONValue?, seconds: Double, at now: Timestamp
    ) throws(MachineError) -> MachineTransaction {
        let to = try target(of: event, expectedVersion: expectedVersion)
        try reserve(event: event, to: to, data: data)
        version += 1
        let opened = MachineTransaction(
            id: makeTransactionID(), event: event, from: state, to: to, data: data, openedAt: now,
            expiresAt: now.adding(seconds: seconds), status: .open, version: version)
        transaction = opened
        return opened
    }

    /// Commits the open transaction `id`: its transition happens as a
    /// client's event would (`enter`), already charged at `open`.
    mutating func commit(_ id: String, at now: Timestamp) throws(MachineError) -> (
        MachineTransaction, MachineTransition
    ) {
        var ended = try openTransaction(id)
        transaction = nil
        transactionCounts.committed += 1
        let transition = enter(ended.to, event: ended.event, cause: .event, data: ended.data, transaction: id, at: now)
        ended.status = .committed
        ended.version = version
        return (ended, transition)
    }

    /// Ends the open transaction `id` without a transition (`.aborted` or
    /// `.expired`): the history records the attempt, the version moves on by
    /// one, and the state timeouts that fell due meanwhile are handed back
    /// (to fire now, in order).
    mutating func end(_ id: String, as outcome: MachineTransaction.Status, at now: Timestamp) throws(MachineError)
        -> (MachineTransaction, deferred: [TimeoutToken])
    {
        precondition(outcome == .aborted || outcome == .expired, "a transaction ends aborted or expired")
        var ended = try openTransaction(id)
        transaction = nil
        version += 1
        if outcome == .aborted { transactionCounts.aborted += 1 } else { transactionCounts.expired += 1 }
        record(
            MachineTransition(
                event: ended.event, from: state, to: state, version: version, at: now,
                cause: outcome == .aborted ? .aborted : .expired, data: ended.data, transaction: id,
                attempted: ended.to))
        ended.status = outcome
        ended.version = version
        let deferred = deferredTimeouts
        deferredTimeouts = []
        return (ended, deferred)
    }

    /// The open transaction `id`; else `transactionEnded` when the history
    /// still shows how it ended, else `unknownTransaction`.
    private func openTransaction(_ id: String) throws(MachineError) -> MachineTransaction {
        if let transaction, transaction.id == id { return transaction }
        if let outcome = history.last(where: { $0.transaction == id })?.transactionOutcome {
            throw .transactionEnded(outcome)
        }
        throw .unknownTransaction
    }

    /// The one place transaction ids are made: a per-machine counter that
    /// starts at the creation time in microseconds.
    private mutating func makeTransactionID() -> String {
        nextTransactionID += 1
        return String(nextTransactionID)
    }

    /// The state `event` leads to now, after the checks `fire` documents.
    private func target(of event: String, expectedVersion: Int64?) throws(MachineError) -> String {
        guard definition.knows(event: event) else { throw .unknownEvent(allowedEvents: allowedEvents) }
        if let expectedVersion, expectedVersion != version { throw .versionMismatch(current: version) }
        if let transaction { throw .transactionOpen(transaction) }
        guard let to = definition.target(of: event, from: state) else {
            throw .invalidTransition(state: state, allowedEvents: allowedEvents)
        }
        return to
    }

    /// Charges the history entry an event from the current state will make.
    private mutating func reserve(event: String, to: String, data: JSONValue?) throws(MachineError) {
        do throws(StorageFull) {
            try storage.reserve(StorageBudget.cost(event, state, to, payload: data))
        } catch { throw .storageFull(error) }
    }

    /// Applies a timeout's event, or does nothing (nil) when the timer is stale
    /// (the state was left or re-entered since it started) or its event is not
    /// allowed from the current state.
    mutating func fire(timeout token: TimeoutToken, at now: Timestamp) -> MachineTransition? {
        guard token.entry == entry, definition.timeouts.indices.contains(token.index) else { return nil }
        let timeout = definition.timeouts[token.index]
        guard timeout.state == state, let to = definition.target(of: timeout.event, from: state) else { return nil }
        // An open transaction holds the state: the timeout waits for its end.
        if transaction != nil {
            deferredTimeouts.append(token)
            return nil
        }
        // A timeout is the machine's own step: charged, never refused.
        storage.charge(StorageBudget.cost(timeout.event, state, to, payload: nil))
        return enter(to, event: timeout.event, cause: .timeout, data: nil, transaction: nil, at: now)
    }

    /// What one history entry is charged: its names and data (an attempt's
    /// target counts as its `to`, as when it was charged at `open`).
    static func storedBytes(_ entry: MachineTransition) -> Int {
        StorageBudget.cost(entry.event, entry.from, entry.attempted ?? entry.to, payload: entry.data)
    }

    /// Gives back every byte this machine holds: it was deleted.
    mutating func releaseStorage() { storage.releaseAll() }

    /// The machine as `GET` shows it.
    func snapshot(name: String, definitionName: String?) -> MachineSnapshot {
        MachineSnapshot(
            name: name, definitionName: definitionName, definition: definition, state: state,
            version: version, allowedEvents: allowedEvents, enteredAt: enteredAt, history: history,
            transaction: transaction)
    }

    private mutating func enter(
        _ to: String, event: String, cause: MachineTransition.Cause, data: JSONValue?, transaction: String?,
        at now: Timestamp
    ) -> MachineTransition {
        version += 1
        entry &+= 1
        deferredTimeouts = []
        let transition = MachineTransition(
            event: event, from: state, to: to, version: version, at: now, cause: cause, data: data,
            transaction: transaction)
        state = to
        enteredAt = now
        record(transition)
        return transition
    }

    /// Appends a history entry, dropping (and giving back the bytes of) the oldest beyond `historyLimit`.
    private mutating func record(_ entry: MachineTransition) {
        history.append(entry)
        if history.count > Self.historyLimit {
            for old in history.prefix(history.count - Self.historyLimit) {
                storage.release(Self.storedBytes(old))
            }
            history.removeFirst(history.count - Self.historyLimit)
        }
    }
}
