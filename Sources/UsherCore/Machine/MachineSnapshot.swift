/// A machine's state at one moment, as `GET /v1/machines/{name}` shows it.
package struct MachineSnapshot: Sendable, Equatable {
    /// The machine's name.
    package let name: String
    /// The configured definition's name, or nil for an inline definition.
    package let definitionName: String?
    /// The definition itself.
    package let definition: MachineDefinition
    /// The current state.
    package let state: String
    /// The current version (the `ETag`): +1 per transition, per transaction
    /// opened, and per transaction aborted or expired.
    package let version: Int64
    /// The events allowed now, in definition order (none while a transaction is open).
    package let allowedEvents: [String]
    /// When the machine entered `state`.
    package let enteredAt: Timestamp
    /// The last transitions (at most 50), oldest first.
    package let history: [MachineTransition]
    /// The open transaction, if any.
    package let transaction: MachineTransaction?

    /// A snapshot as given (the Redis store builds one from its reply).
    package init(
        name: String, definitionName: String?, definition: MachineDefinition, state: String, version: Int64,
        allowedEvents: [String], enteredAt: Timestamp, history: [MachineTransition], transaction: MachineTransaction?
    ) {
        self.name = name
        self.definitionName = definitionName
        self.definition = definition
        self.state = state
        self.version = version
        self.allowedEvents = allowedEvents
        self.enteredAt = enteredAt
        self.history = history
        self.transaction = transaction
    }
}
