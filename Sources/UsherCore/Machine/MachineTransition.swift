/// One transition in a machine's history.
package struct MachineTransition: Sendable, Equatable {
    /// What made the transition happen.
    package enum Cause: String, Sendable {
        /// A client fired the event.
        case event
        /// A state's timeout fired the event.
        case timeout
    }

    /// The event that was applied.
    package let event: String
    /// The state the machine left.
    package let from: String
    /// The state the machine entered (may equal `from`).
    package let to: String
    /// The machine's version after the transition: the transition's fence.
    package let version: Int64
    /// When it happened.
    package let at: Timestamp
    /// A client's event or a timeout.
    package let cause: Cause
    /// The `data` the client sent with the event, if any (never for a timeout).
    package let data: JSONValue?
}
