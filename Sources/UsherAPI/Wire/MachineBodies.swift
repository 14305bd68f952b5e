import UsherCore

/// `GET /v1/machines/{m}` and the answers that show a machine: name,
/// definition (its name when it came from the config, else the normalized
/// inline definition), state, version, `allowed_events`, `entered_at`,
/// history, `transaction` (the open one, or null); with
/// `?include=definition` also `definition_detail`.
struct MachineBody: Encodable {
    let snapshot: MachineSnapshot
    let withDefinition: Bool

    enum CodingKeys: String, CodingKey {
        case name, definition, state, version, history, transaction
        case allowedEvents = "allowed_events"
        case enteredAt = "entered_at"
        case definitionDetail = "definition_detail"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(snapshot.name, forKey: .name)
        if let name = snapshot.definitionName {
            try container.encode(name, forKey: .definition)
        } else {
            try container.encode(MachineDefinitionBody(definition: snapshot.definition), forKey: .definition)
        }
        try container.encode(snapshot.state, forKey: .state)
        try container.encode(snapshot.version, forKey: .version)
        try container.encode(snapshot.allowedEvents, forKey: .allowedEvents)
        try container.encodeTime(snapshot.enteredAt, forKey: .enteredAt)
        var history = container.nestedUnkeyedContainer(forKey: .history)
        for transition in snapshot.history { try history.encode(MachineTransitionBody(transition: transition)) }
        try container.encode(snapshot.transaction.map(TransactionBody.init), forKey: .transaction)
        if withDefinition {
            try container.encode(MachineDefinitionBody(definition: snapshot.definition), forKey: .definitionDetail)
        }
    }
}

/// A normalized definition: initial, states, transitions (`from` always a
/// list), timeouts.
struct MachineDefinitionBody: Encodable {
    let definition: MachineDefinition

    enum CodingKeys: String, CodingKey { case initial, states, transitions, timeouts }
    enum TransitionKeys: String, CodingKey { case event, from, to }
    enum TimeoutKeys: String, CodingKey {
        case state, event
        case afterSeconds = "after_seconds"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(definition.initial, forKey: .initial)
        try container.encode(definition.states, forKey: .states)
        var transitions = container.nestedUnkeyedContainer(forKey: .transitions)
        for t in definition.transitions {
            var nested = transitions.nestedContainer(keyedBy: TransitionKeys.self)
            try nested.encode(t.event, forKey: .event)
            try nested.encode(t.from, forKey: .from)
            try nested.encode(t.to, forKey: .to)
        }
        var timeouts = container.nestedUnkeyedContainer(forKey: .timeouts)
        for t in definition.timeouts {
            var nested = timeouts.nestedContainer(keyedBy: TimeoutKeys.self)
            try nested.encode(t.state, forKey: .state)
            try nested.encodeSeconds(t.afterSeconds, forKey: .afterSeconds)
            try nested.encode(t.event, forKey: .event)
        }
    }
}

/// One entry of a machine's history: event, from, to, version, at, cause,
/// and `data` only when the event carried some; `transaction` when it ended
/// one, `attempted` when that ended without a transition.
struct MachineTransitionBody: Encodable {
    let transition: MachineTransition

    /// `fence` only in the answer to an event (`TransitionResultBody`).
    enum CodingKeys: String, CodingKey { case event, from, to, version, at, cause, data, transaction, attempted, fence }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try Self.write(transition, to: &container)
    }

    /// The members, into an object being written.
    static func write(_ transition: MachineTransition, to container: inout KeyedEncodingContainer<CodingKeys>) throws {
        try container.encode(transition.event, forKey: .event)
        try container.encode(transition.from, forKey: .from)
        try container.encode(transition.to, forKey: .to)
        try container.encode(transition.version, forKey: .version)
        try container.encodeTime(transition.at, forKey: .at)
        try container.encode(transition.cause.rawValue, forKey: .cause)
        try container.encodeIfPresent(transition.data, forKey: .data)
        try container.encodeIfPresent(transition.transaction, forKey: .transaction)
        try container.encodeIfPresent(transition.attempted, forKey: .attempted)
    }
}

/// A transaction: id, event, from, to, `opened_at`, `expires_at`, status,
/// version (the machine's, after it opened or ended), and `data` when it
/// carries some.
struct TransactionBody: Encodable {
    let transaction: MachineTransaction

    enum CodingKeys: String, CodingKey {
        case id, event, from, to, status, version, data
        case openedAt = "opened_at"
        case expiresAt = "expires_at"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(transaction.id, forKey: .id)
        try container.encode(transaction.event, forKey: .event)
        try container.encode(transaction.from, forKey: .from)
        try container.encode(transaction.to, forKey: .to)
        try container.encodeTime(transaction.openedAt, forKey: .openedAt)
        try container.encodeTime(transaction.expiresAt, forKey: .expiresAt)
        try container.encode(transaction.status.rawValue, forKey: .status)
        try container.encode(transaction.version, forKey: .version)
        try container.encodeIfPresent(transaction.data, forKey: .data)
    }
}

/// The answer to an event: the history entry it recorded (event, from, to,
/// version, at, cause, data, transaction), and `fence` (equal to `version`:
/// a transition is a grant).
struct TransitionResultBody: Encodable {
    let result: TransitionResult

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: MachineTransitionBody.CodingKeys.self)
        try MachineTransitionBody.write(result.transition, to: &container)
        try container.encode(result.version, forKey: .fence)
    }
}
