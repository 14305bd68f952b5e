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
/// fence (SPEC §1) and keeps growing across a delete and re-create.
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

    /// A machine in the definition's initial state.
    init(definition: MachineDefinition, createdAt: Timestamp, budget: StorageBudget = StorageBudget()) {
        storage = StorageAccount(budget)
        self.definition = definition
        state = definition.initial
        version = createdAt.micros
        enteredAt = createdAt
    }

    /// The events allowed from the current state, in definition order.
    var allowedEvents: [String] { definition.allowedEvents(in: state) }

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
    /// `versionMismatch`, 412, a precondition), the event is allowed from the
    /// current state (else `invalidTransition`, 409).
    @discardableResult
    mutating func fire(
        _ event: String, expectedVersion: Int64?, data: JSONValue?, at now: Timestamp
    ) throws(MachineError) -> MachineTransition {
        guard definition.knows(event: event) else { throw .unknownEvent(allowedEvents: allowedEvents) }
        if let expectedVersion, expectedVersion != version { throw .versionMismatch(current: version) }
        guard let to = definition.target(of: event, from: state) else {
            throw .invalidTransition(state: state, allowedEvents: allowedEvents)
        }
        do throws(StorageFull) {
            try storage.reserve(Self.storedBytes(event: event, from: state, to: to, data: data))
        } catch { throw .storageFull(error) }
        return enter(to, event: event, cause: .event, data: data, at: now)
    }

    /// Applies a timeout's event, or does nothing (nil) when the timer is stale
    /// (the state was left or re-entered since it started) or its event is not
    /// allowed from the current state.
    mutating func fire(timeout token: TimeoutToken, at now: Timestamp) -> MachineTransition? {
        guard token.entry == entry, definition.timeouts.indices.contains(token.index) else { return nil }
        let timeout = definition.timeouts[token.index]
        guard timeout.state == state, let to = definition.target(of: timeout.event, from: state) else { return nil }
        // A timeout is the machine's own step: charged, never refused.
        storage.charge(Self.storedBytes(event: timeout.event, from: state, to: to, data: nil))
        return enter(to, event: timeout.event, cause: .timeout, data: nil, at: now)
    }

    /// What one history entry is charged: its names and data.
    static func storedBytes(event: String, from: String, to: String, data: JSONValue?) -> Int {
        StorageBudget.cost(event, from, to, payload: data)
    }

    /// Gives back every byte this machine holds: it was deleted.
    mutating func releaseStorage() { storage.releaseAll() }

    /// The machine as `GET` shows it.
    func snapshot(name: String, definitionName: String?) -> MachineSnapshot {
        MachineSnapshot(
            name: name, definitionName: definitionName, definition: definition, state: state,
            version: version, allowedEvents: allowedEvents, enteredAt: enteredAt, history: history)
    }

    private mutating func enter(
        _ to: String, event: String, cause: MachineTransition.Cause, data: JSONValue?, at now: Timestamp
    ) -> MachineTransition {
        version += 1
        entry &+= 1
        let transition = MachineTransition(
            event: event, from: state, to: to, version: version, at: now, cause: cause, data: data)
        state = to
        enteredAt = now
        history.append(transition)
        if history.count > Self.historyLimit {
            for old in history.prefix(history.count - Self.historyLimit) {
                storage.release(Self.storedBytes(event: old.event, from: old.from, to: old.to, data: old.data))
            }
            history.removeFirst(history.count - Self.historyLimit)
        }
        return transition
    }
}
