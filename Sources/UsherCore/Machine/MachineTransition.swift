/// One transition in a machine's history.
public struct MachineTransition: Sendable, Equatable {
    /// What made the transition happen.
    public enum Cause: String, Sendable {
        /// A client fired the event.
        case event
        /// A state's timeout fired the event.
        case timeout
    }

    /// The event that was applied.
    public let event: String
    /// The state the machine left.
    public let from: String
    /// The state the machine entered (may equal `from`).
    public let to: String
    /// The machine's version after the transition: the transition's fence.
    public let version: Int64
    /// When it happened.
    public let at: Timestamp
    /// A client's event or a timeout.
    public let cause: Cause
    /// The `data` the client sent with the event, if any (never for a timeout).
    public let data: JSONValue?

    /// `{"event", "from", "to", "version", "at", "cause", "data"?}`; `data` is left out when absent.
    public func json() -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("event", .string(event)),
            ("from", .string(from)),
            ("to", .string(to)),
            ("version", .int(Int(version))),
            ("at", .string(at.rfc3339)),
            ("cause", .string(cause.rawValue)),
        ]
        if let data { members.append(("data", data)) }
        return .object(members)
    }
}
