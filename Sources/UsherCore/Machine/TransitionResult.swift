/// The answer to a fired event.
public struct TransitionResult: Sendable, Equatable {
    /// The state the machine is in now.
    public let state: String
    /// The state it left.
    public let previousState: String
    /// The event that was applied.
    public let event: String
    /// The machine's version after the transition (also its fence).
    public let version: Int64

    /// Built from the history entry the transition recorded.
    init(_ transition: MachineTransition) {
        state = transition.to
        previousState = transition.from
        event = transition.event
        version = transition.version
    }
}
