/// A machine's state at one moment, as `GET /v1/machines/{name}` shows it.
public struct MachineSnapshot: Sendable, Equatable {
    /// The machine's name.
    public let name: String
    /// The configured definition's name, or nil for an inline definition.
    public let definitionName: String?
    /// The definition itself.
    public let definition: MachineDefinition
    /// The current state.
    public let state: String
    /// The current version (the `ETag`).
    public let version: Int64
    /// The events allowed from `state`, in definition order.
    public let allowedEvents: [String]
    /// When the machine entered `state`.
    public let enteredAt: Timestamp
    /// The last transitions (at most 50), oldest first.
    public let history: [MachineTransition]

    /// `{"name", "definition", "state", "version", "allowed_events", "entered_at", "history"}`.
    /// `definition` is the definition's name when it came from the config,
    /// otherwise the normalized inline definition object.
    public func json() -> JSONValue {
        .object([
            ("name", .string(name)),
            ("definition", definitionName.map(JSONValue.string) ?? definition.json()),
            ("state", .string(state)),
            ("version", .int(Int(version))),
            ("allowed_events", .array(allowedEvents.map(JSONValue.string))),
            ("entered_at", .string(enteredAt.rfc3339)),
            ("history", .array(history.map { $0.json() })),
        ])
    }
}
