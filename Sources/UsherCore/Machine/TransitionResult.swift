/// The answer to a fired event.
package struct TransitionResult: Sendable, Equatable {
    /// The state the machine is in now.
    package let state: String
    /// The state it left.
    package let previousState: String
    /// The event that was applied.
    package let event: String
    /// The machine's version after the transition (also its fence).
    package let version: Int64

    /// Built from the history entry the transition recorded.
    package init(_ transition: MachineTransition) {
        state = transition.to
        previousState = transition.from
        event = transition.event
        version = transition.version
    }
}
