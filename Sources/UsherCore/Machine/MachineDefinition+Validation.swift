/// Checks a definition piece by piece, in input order, and builds its lookup
/// tables on the way. Every error names the field as it appears in JSON.
struct DefinitionValidator {
    /// Prefix of every field name (`definitions.player`), may be empty.
    let path: String
    /// True when the input listed its states; then every state named elsewhere must be one of them.
    let declared: Bool

    private(set) var states: [String] = []
    private var stateSet: Set<String> = []
    private(set) var events: [String] = []
    private var eventSet: Set<String> = []
    /// event → from → to.
    private(set) var targets: [String: [String: String]] = [:]
    /// event → from → index of the transition that defined the pair.
    private var pairOwner: [String: [String: Int]] = [:]
    private var pairCount = 0
    private(set) var eventsByState: [String: [String]] = [:]
    private(set) var timeoutsByState: [String: [Int]] = [:]

    init(path: String, declared: Bool) {
        self.path = path
        self.declared = declared
    }

    func check(count: Int, max: Int, field: String) throws(FieldError) {
        if count > max { throw fail(field, "must have at most \(max) entries") }
    }

    /// The `states` list: at least one, valid names, no repeats.
    mutating func declare(states list: [String]) throws(FieldError) {
        if list.isEmpty { throw fail("states", "must list at least one state") }
        try check(count: list.count, max: MachineDefinition.maxStates, field: "states")
        for (i, s) in list.enumerated() {
            try checkName(s, "states[\(i)]")
            if !stateSet.insert(s).inserted { throw fail("states[\(i)]", "lists state '\(s)' twice") }
            states.append(s)
        }
    }

    mutating func setInitial(_ s: String) throws(FieldError) {
        try checkName(s, "initial")
        try use(state: s, field: "initial")
    }

    mutating func add(_ t: MachineDefinition.Transition, index i: Int, singleFrom: Bool) throws(FieldError) {
        let base = "transitions[\(i)]"
        func fromField(_ j: Int) -> String { singleFrom ? "\(base).from" : "\(base).from[\(j)]" }

        try checkName(t.event, "\(base).event")
        if t.from.isEmpty { throw fail("\(base).from", "must name at least one state") }
        try check(count: t.from.count, max: MachineDefinition.maxStates, field: "\(base).from")
        for (j, from) in t.from.enumerated() {
            try checkName(from, fromField(j))
            try use(state: from, field: fromField(j))
        }
        try checkName(t.to, "\(base).to")
        try use(state: t.to, field: "\(base).to")

        for (j, from) in t.from.enumerated() {
            if let owner = pairOwner[t.event]?[from] {
                throw fail(
                    fromField(j),
                    owner == i
                        ? "lists state '\(from)' twice"
                        : "duplicates transitions[\(owner)]: event '\(t.event)' from state '\(from)' is already defined"
                )
            }
            pairCount += 1
            if pairCount > MachineDefinition.maxPairs {
                throw fail(fromField(j), "makes more than \(MachineDefinition.maxPairs) (event, from) pairs in all")
            }
            pairOwner[t.event, default: [:]][from] = i
            targets[t.event, default: [:]][from] = t.to
            eventsByState[from, default: []].append(t.event)
        }
        if eventSet.insert(t.event).inserted { events.append(t.event) }
    }

    /// A timeout: known state, a delay in range, a known event that is allowed
    /// from that state (otherwise the timer could never do anything).
    mutating func add(_ t: MachineDefinition.Timeout, index k: Int) throws(FieldError) {
        let base = "timeouts[\(k)]"
        try checkName(t.state, "\(base).state")
        guard stateSet.contains(t.state) else { throw fail("\(base).state", "names unknown state '\(t.state)'") }
        guard Durations.isAllowed(t.afterSeconds, zero: false), t.afterSeconds <= MachineDefinition.maxAfterSeconds
        else {
            throw fail("\(base).after_seconds", Durations.range(zero: false))
        }
        try checkName(t.event, "\(base).event")
        guard let froms = targets[t.event] else { throw fail("\(base).event", "names unknown event '\(t.event)'") }
        guard froms[t.state] != nil else {
            throw fail(
                "\(base).event",
                "event '\(t.event)' is not allowed from state '\(t.state)', so the timeout could never fire")
        }
        timeoutsByState[t.state, default: []].append(k)
    }

    /// A state named by `initial` or a transition: it must be declared, or it is added.
    private mutating func use(state s: String, field: String) throws(FieldError) {
        if stateSet.contains(s) { return }
        if declared { throw fail(field, "names state '\(s)', which is not in states") }
        if states.count >= MachineDefinition.maxStates {
            throw fail(field, "names more than \(MachineDefinition.maxStates) states")
        }
        stateSet.insert(s)
        states.append(s)
    }

    private func checkName(_ name: String, _ field: String) throws(FieldError) {
        if !Names.isValid(name) { throw fail(field, "must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$") }
    }

    private func fail(_ field: String, _ message: String) -> FieldError {
        FieldError(field: path.isEmpty ? field : "\(path).\(field)", message: message)
    }
}
