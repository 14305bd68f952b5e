extension MachineDefinition {
    /// Reads a definition from JSON:
    /// `{"initial", "states"?, "transitions"?, "timeouts"?}`, where each
    /// transition is `{"event", "from": state or [states], "to"}` and each
    /// timeout `{"state", "after_seconds", "event"}`. Missing lists read as
    /// empty. Unknown fields are rejected; every error names its field with
    /// `path` in front (`definitions.player.transitions[1].from`).
    package static func parse(_ value: JSONValue, path: String) throws(FieldError) -> MachineDefinition {
        var r = try FieldReader(value, path: path)
        let initial = try r.name("initial")
        let statesJSON = try r.array("states")
        let transitionsJSON = try r.array("transitions") ?? []
        let timeoutsJSON = try r.array("timeouts") ?? []
        try r.finish()
        guard let initial else { throw FieldError(field: r.fieldPath("initial"), message: "is required") }

        // Counts first, so an oversized list is refused before it is read.
        var states: [String]? = nil
        if let statesJSON {
            try checkCount(statesJSON, max: maxStates, field: r.fieldPath("states"))
            states = try statesJSON.enumerated().map { (i, v) throws(FieldError) in
                try name(v, field: "\(r.fieldPath("states"))[\(i)]")
            }
        }
        try checkCount(transitionsJSON, max: maxTransitions, field: r.fieldPath("transitions"))
        try checkCount(timeoutsJSON, max: maxTimeouts, field: r.fieldPath("timeouts"))

        var transitions: [Transition] = []
        var singleFrom: Set<Int> = []
        for (i, element) in transitionsJSON.enumerated() {
            var t = try FieldReader(element, path: "\(r.fieldPath("transitions"))[\(i)]")
            let event = try t.name("event")
            let fromValue = t.value("from")
            let to = try t.name("to")
            try t.finish()
            guard let event else { throw FieldError(field: t.fieldPath("event"), message: "is required") }
            let from: [String]
            switch fromValue {
            case nil:
                throw FieldError(field: t.fieldPath("from"), message: "is required")
            case .string?:
                from = [try name(fromValue!, field: t.fieldPath("from"))]
                singleFrom.insert(i)
            case .array(let list)?:
                try checkCount(list, max: maxStates, field: t.fieldPath("from"))
                from = try list.enumerated().map { (j, v) throws(FieldError) in
                    try name(v, field: "\(t.fieldPath("from"))[\(j)]")
                }
            default:
                throw FieldError(field: t.fieldPath("from"), message: "must be a state name or a list of state names")
            }
            guard let to else { throw FieldError(field: t.fieldPath("to"), message: "is required") }
            transitions.append(Transition(event: event, from: from, to: to))
        }

        var timeouts: [Timeout] = []
        for (k, element) in timeoutsJSON.enumerated() {
            var t = try FieldReader(element, path: "\(r.fieldPath("timeouts"))[\(k)]")
            let state = try t.name("state")
            // The range is checked with the rest of the definition, with one message.
            let after = try t.number(
                "after_seconds", in: -Double.greatestFiniteMagnitude...Double.greatestFiniteMagnitude)
            let event = try t.name("event")
            try t.finish()
            guard let state else { throw FieldError(field: t.fieldPath("state"), message: "is required") }
            guard let after else { throw FieldError(field: t.fieldPath("after_seconds"), message: "is required") }
            guard let event else { throw FieldError(field: t.fieldPath("event"), message: "is required") }
            timeouts.append(Timeout(state: state, afterSeconds: after, event: event))
        }

        return try MachineDefinition(
            validating: initial, states: states, transitions: transitions, timeouts: timeouts,
            path: path, singleFrom: singleFrom)
    }

    private static func checkCount(_ list: [JSONValue], max: Int, field: String) throws(FieldError) {
        if list.count > max { throw FieldError(field: field, message: "must have at most \(max) entries") }
    }

    /// A list element that must be a valid name.
    private static func name(_ value: JSONValue, field: String) throws(FieldError) -> String {
        guard case .string(let s) = value else { throw FieldError(field: field, message: "must be a string") }
        guard Names.isValid(s) else {
            throw FieldError(field: field, message: "must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
        }
        return s
    }
}
