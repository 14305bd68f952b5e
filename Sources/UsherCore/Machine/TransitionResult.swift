/// The answer to a fired event: the history entry the transition recorded.
package struct TransitionResult: Sendable, Equatable {
    /// The entry, as the machine's history shows it.
    package let transition: MachineTransition

    package init(_ transition: MachineTransition) {
        self.transition = transition
    }

    /// The state the machine is in now.
    package var state: String { transition.to }
    /// The state it left.
    package var previousState: String { transition.from }
    /// The event that was applied.
    package var event: String { transition.event }
    /// The machine's version after the transition (also its fence).
    package var version: Int64 { transition.version }
}
