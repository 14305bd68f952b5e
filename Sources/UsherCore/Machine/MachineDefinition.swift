/// What a machine can do: its states, the events that move it between them,
/// and the timeouts that fire events by themselves. Always valid: every way of
/// making one checks it.
///
/// Normalized form (what `MachineDefinitionBody` shows and `==` compares):
/// - `states` is always present: as declared, or, when the input leaves it
///   out, the states that `initial` and the transitions name, in order of first
///   mention (`initial`, then each transition's `from` states, then its `to`);
/// - `from` is always a list, even when the input gave a single state.
package struct MachineDefinition: Sendable, Equatable {
    /// `event` moves the machine from any state in `from` to `to`.
    package struct Transition: Sendable, Equatable {
        /// The event's name.
        package var event: String
        /// The states the event is allowed from (at least one).
        package var from: [String]
        /// The state the event leads to.
        package var to: String

        /// A transition allowed from several states.
        package init(event: String, from: [String], to: String) {
            self.event = event
            self.from = from
            self.to = to
        }

        /// A transition allowed from one state.
        package init(event: String, from: String, to: String) {
            self.init(event: event, from: [from], to: to)
        }
    }

    /// Fires `event` when the machine has stayed in `state` for `afterSeconds`.
    package struct Timeout: Sendable, Equatable {
        /// The state whose entry starts the timer.
        package var state: String
        /// The delay, in seconds (at least `Durations.minimumSeconds`, at most `maxAfterSeconds`).
        package var afterSeconds: Double
        /// The event to fire; it must be allowed from `state`.
        package var event: String

        /// Creates a timeout entry.
        package init(state: String, afterSeconds: Double, event: String) {
            self.state = state
            self.afterSeconds = afterSeconds
            self.event = event
        }
    }

    /// Most states a definition may have.
    package static let maxStates = 1000
    /// Most entries in `transitions`.
    package static let maxTransitions = 1000
    /// Most entries in `timeouts`.
    package static let maxTimeouts = 1000
    /// Most (event, from) pairs over all transitions.
    static let maxPairs = 10_000
    /// Longest timeout: one year.
    package static let maxAfterSeconds: Double = 31_536_000

    /// The state a new machine starts in.
    package let initial: String
    /// Every state, in normalized order (see the type's documentation).
    package let states: [String]
    /// The transitions, in definition order, each `from` a list.
    package let transitions: [Transition]
    /// The timeouts, in definition order.
    package let timeouts: [Timeout]
    /// Every event, in order of first mention in `transitions`.
    package let events: [String]

    /// event → from → to.
    private let targets: [String: [String: String]]
    /// state → events allowed from it, in definition order.
    private let eventsByState: [String: [String]]
    /// state → indices into `timeouts`.
    private let timeoutsByState: [String: [Int]]

    /// Validates and builds a definition. Without `states`, the states are
    /// those that `initial` and the transitions name. Errors name the field as
    /// it would appear in JSON (`transitions[1].from[0]`).
    package init(
        initial: String, states: [String]? = nil, transitions: [Transition], timeouts: [Timeout] = []
    ) throws(FieldError) {
        try self.init(
            validating: initial, states: states, transitions: transitions, timeouts: timeouts,
            path: "", singleFrom: [])
    }

    /// The built-in `player` definition (seed 004):
    /// NotReady → prepare → Ready → start → Running → teardown → NotReady, no timeouts.
    package static let player: MachineDefinition = {
        do throws(FieldError) {
            return try MachineDefinition(
                initial: "NotReady",
                transitions: [
                    Transition(event: "prepare", from: "NotReady", to: "Ready"),
                    Transition(event: "start", from: "Ready", to: "Running"),
                    Transition(event: "teardown", from: "Running", to: "NotReady"),
                ])
        } catch {
            preconditionFailure("the built-in player definition is invalid: \(error.description)")
        }
    }()

    /// The events allowed from `state`, in definition order (the order of the
    /// transitions that allow them); empty for an unknown state.
    package func allowedEvents(in state: String) -> [String] {
        eventsByState[state] ?? []
    }

    /// True when some transition uses `event`.
    func knows(event: String) -> Bool {
        targets[event] != nil
    }

    /// The state `event` leads to from `state`, or nil when it is not allowed there.
    func target(of event: String, from state: String) -> String? {
        targets[event]?[state]
    }

    /// Indices into `timeouts` of the timers that entering `state` starts.
    func timeoutIndices(in state: String) -> [Int] {
        timeoutsByState[state] ?? []
    }

    package static func == (lhs: MachineDefinition, rhs: MachineDefinition) -> Bool {
        lhs.initial == rhs.initial && lhs.states == rhs.states
            && lhs.transitions == rhs.transitions && lhs.timeouts == rhs.timeouts
    }

    /// Whole seconds as an integer (`5`, not `5.0`), fractions as they are.
    private static func number(_ d: Double) -> JSONValue {
        d.rounded() == d && abs(d) < 1e15 ? .int(Int(d)) : .double(d)
    }

    /// The one place a definition is checked and its lookup tables built.
    /// `path` prefixes every field name; `singleFrom` lists the transitions
    /// whose `from` was written as a single string (named `from`, not `from[0]`).
    init(
        validating initial: String, states declared: [String]?, transitions: [Transition],
        timeouts: [Timeout], path: String, singleFrom: Set<Int>
    ) throws(FieldError) {
        var v = DefinitionValidator(path: path, declared: declared != nil)
        try v.check(count: transitions.count, max: Self.maxTransitions, field: "transitions")
        try v.check(count: timeouts.count, max: Self.maxTimeouts, field: "timeouts")
        if let declared {
            try v.declare(states: declared)
        }
        try v.setInitial(initial)
        for (i, t) in transitions.enumerated() {
            try v.add(t, index: i, singleFrom: singleFrom.contains(i))
        }
        for (k, t) in timeouts.enumerated() {
            try v.add(t, index: k)
        }
        self.initial = initial
        self.states = v.states
        self.transitions = transitions
        self.timeouts = timeouts
        self.events = v.events
        self.targets = v.targets
        self.eventsByState = v.eventsByState
        self.timeoutsByState = v.timeoutsByState
    }
}
