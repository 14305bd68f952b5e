import UsherCore

// Machines (SPEC §6): the shapes of `MachineDefinition`, `MachineSnapshot`,
// `MachineTransition`, `TransitionResult` and the routes of `MachineRoutes`.

extension OpenAPIDocument {
    static var machineSchemas: [(String, JSONValue)] {
        typealias D = MachineDefinition
        let states = Schema.array(Schema.name(), maxItems: D.maxStates)
        let transitionRequest = Schema.request(
            [
                ("event", Schema.name()),
                ("from", Schema.oneOf([Schema.name(), states], "a state or a list of states")),
                ("to", Schema.name()),
            ], required: ["event", "from", "to"])
        let timeoutRequest = Schema.request(
            [
                ("state", Schema.name()),
                (
                    "after_seconds",
                    .object([
                        ("type", .string("number")), ("minimum", Schema.number(Durations.minimumSeconds)),
                        ("maximum", Schema.number(D.maxAfterSeconds)),
                    ])
                ),
                ("event", Schema.name("allowed from that state")),
            ], required: ["state", "after_seconds", "event"])
        return [
            (
                "DefinitionRequest",
                Schema.request(
                    [
                        ("initial", Schema.name()),
                        (
                            "states",
                            Schema.array(
                                Schema.name(), maxItems: D.maxStates,
                                "the states; without it, those that initial and the transitions name")
                        ),
                        (
                            "transitions",
                            Schema.array(
                                transitionRequest, maxItems: D.maxTransitions, "no two share an (event, from) pair")
                        ),
                        (
                            "timeouts",
                            Schema.array(
                                timeoutRequest, maxItems: D.maxTimeouts,
                                "fire the event if the machine is still in the state after the delay")
                        ),
                    ], required: ["initial"], "an inline definition")
            ),
            (
                "MachineRequest",
                Schema.oneOf(
                    [
                        Schema.request(
                            [
                                (
                                    "definition",
                                    Schema.oneOf([
                                        Schema.name("a definition's name, e.g. player"),
                                        Schema.ref("DefinitionRequest"),
                                    ])
                                )
                            ], required: ["definition"]),
                        Schema.ref("DefinitionRequest"),
                    ], "{\"definition\": name}, {\"definition\": {…}} or a bare inline definition")
            ),
            (
                "Definition",
                Schema.object(
                    [
                        ("initial", Schema.name()),
                        ("states", Schema.array(Schema.name())),
                        (
                            "transitions",
                            Schema.array(
                                Schema.object([
                                    ("event", Schema.name()), ("from", Schema.array(Schema.name())),
                                    ("to", Schema.name()),
                                ]))
                        ),
                        (
                            "timeouts",
                            Schema.array(
                                Schema.object([
                                    ("state", Schema.name()), ("after_seconds", Schema.secondsOut),
                                    ("event", Schema.name()),
                                ]))
                        ),
                    ], "a normalized definition")
            ),
            (
                "MachineSummary",
                Schema.object([
                    ("name", Schema.name()),
                    ("definition", Schema.oneOf([Schema.name("the definition's name"), Schema.ref("Definition")])),
                    ("state", Schema.name()),
                    ("version", Schema.fence),
                ])
            ),
            (
                "Transition",
                Schema.object(
                    [
                        ("event", Schema.name()),
                        ("from", Schema.name()),
                        ("to", Schema.name()),
                        ("version", Schema.fence),
                        ("at", Schema.timestamp),
                        ("cause", Schema.enumeration(["event", "timeout"])),
                        ("data", Schema.any("the client's data, when it sent some")),
                    ], optional: ["data"])
            ),
            (
                "Machine",
                Schema.object(
                    [
                        ("name", Schema.name()),
                        ("definition", Schema.oneOf([Schema.name("the definition's name"), Schema.ref("Definition")])),
                        ("state", Schema.name()),
                        ("version", Schema.fence),
                        ("allowed_events", Schema.array(Schema.name(), "in definition order")),
                        ("entered_at", Schema.timestamp),
                        ("history", Schema.array(Schema.ref("Transition"), "the last 50 transitions, oldest first")),
                        ("definition_detail", Schema.ref("Definition")),
                    ], optional: ["definition_detail"])
            ),
            (
                "TransitionResult",
                Schema.object([
                    ("state", Schema.name()),
                    ("previous_state", Schema.name()),
                    ("event", Schema.name()),
                    ("version", Schema.fence),
                    ("fence", Schema.fence),
                ])
            ),
        ]
    }

    static var machinePaths: [PathItem] {
        let name = nameParameter(.machines, example: "player")
        let machine = Schema.ref("Machine")
        let etag = [Response.etag]
        return [
            PathItem("/v1/machines", [listOperation(.machines, id: "listMachines", summary: "MachineSummary")]),
            PathItem(
                "/v1/machines/{name}", [name],
                [
                    Operation(
                        "PUT", "createMachine", "Create a machine from a definition (a name or inline)",
                        description: "201 when created; the same definition again: 200; a different one: 409.",
                        body: RequestBody(
                            schema: Schema.ref("MachineRequest"), required: true,
                            example: .object([("definition", .string("player"))])),
                        responses: [
                            Response.json(201, "created", machine, headers: etag),
                            Response.json(200, "exists with the same definition", machine, headers: etag),
                        ] + Response.creationConflicts),
                    Operation(
                        "GET", "getMachine",
                        "The machine's state, version and history; with wait, when the version moves",
                        query: [
                            Parameter.wait("answer when the version differs from `version`"),
                            Parameter.query(
                                "version", .object([("type", .string("integer")), ("format", .string("int64"))]),
                                "the version the client has (default: the current one)"),
                            Parameter.query(
                                "include", Schema.enumeration(["definition"]),
                                "definition: add `definition_detail`, the normalized definition, even when it has a name"
                            ),
                        ],
                        responses: [Response.json(200, "the machine", machine, headers: etag)] + Response.waitEnds),
                    deleteOperation(.machines, id: "deleteMachine"),
                ]),
            PathItem(
                "/v1/machines/{name}/events/{event}", [name, Parameter.path("event", "the event", example: "prepare")],
                [
                    Operation(
                        "POST", "fire", "Fire an event: one transition, as one transaction",
                        description:
                            "Checked in this order: unknown event (404), If-Match (412), not allowed now (409).",
                        headers: [
                            .object([
                                ("name", .string("If-Match")), ("in", .string("header")), ("required", .bool(false)),
                                (
                                    "description",
                                    .string("apply only at this version: quoted (\"7\") or bare (7); * or absent: any")
                                ),
                                (
                                    "schema",
                                    .object([
                                        ("type", .string("string")),
                                        ("pattern", .string("^(\\*|(W/)?\"[-+]?[0-9]{1,18}\"|[-+]?[0-9]{1,18})$")),
                                    ])
                                ),
                            ])
                        ],
                        body: RequestBody(
                            schema: Schema.request([("data", Schema.any("kept in the history entry"))]),
                            required: false, example: .object([("data", .object([("by", .string("ops"))]))])),
                        responses: [
                            Response.json(200, "the transition", Schema.ref("TransitionResult"), headers: etag),
                            Response.problem(
                                404, "no such machine, or an event its definition does not know (`allowed_events`)",
                                codes: ["not_found"]),
                            Response.problem(
                                409, "the event is not allowed in the current state (`state`, `allowed_events`)",
                                codes: ["invalid_transition"]),
                            Response.problem(
                                412, "If-Match differs from the version (`version` is the current one)",
                                codes: ["precondition_failed"]),
                        ])
                ]),
        ]
    }
}
