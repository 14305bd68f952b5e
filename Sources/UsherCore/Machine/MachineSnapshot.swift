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

}
