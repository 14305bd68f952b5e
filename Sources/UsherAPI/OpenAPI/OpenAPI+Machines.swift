import UsherCore

// Machines (docs/api.md, Machines): the shapes of `MachineDefinition`, `MachineSnapshot`,
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
        let transitionFields: [(String, JSONValue)] = [
            ("event", Schema.name()),
            ("from", Schema.name()),
            ("to", Schema.name()),
            ("version", Schema.fence),
            ("at", Schema.timestamp),
            (
                "cause",
                Schema.enumeration(
                    ["event", "timeout", "aborted", "expired"],
                    "aborted, expired: a transaction that ended without a transition (from == to)")
            ),
            ("data", Schema.any("the client's data, when it sent some")),
            ("transaction", Schema.string("the transaction the entry ended")),
            ("attempted", Schema.name("aborted, expired: the state the transaction would have entered")),
        ]
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
                Schema.object(
                    [
                        ("name", Schema.name()),
                        (
                            "definition",
                            Schema.oneOf([Schema.name("the definition's name"), Schema.ref("Definition")])
                        ),
                        ("state", Schema.name()),
                        ("version", Schema.fence),
                        ("backend", Schema.enumeration(["redis"], "present for a machine kept in Redis")),
                    ], optional: ["backend"])
            ),
            ("Transition", Schema.object(transitionFields, optional: ["data", "transaction", "attempted"])),
            (
                "Transaction",
                Schema.object(
                    [
                        ("id", Schema.string("the machine's id for it")),
                        ("event", Schema.name()),
                        ("from", Schema.name("the state the machine stays in while it is open")),
                        ("to", Schema.name("the state a commit enters")),
                        ("opened_at", Schema.timestamp),
                        ("expires_at", Schema.timestamp),
                        ("status", Schema.enumeration(["open", "committed", "aborted", "expired"])),
                        ("version", Schema.fence),
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
                        (
                            "allowed_events",
                            Schema.array(Schema.name(), "in definition order; empty while a transaction is open")
                        ),
                        ("entered_at", Schema.timestamp),
                        ("history", Schema.array(Schema.ref("Transition"), "the last 50 entries, oldest first")),
                        ("transaction", Schema.nullable(Schema.ref("Transaction"))),
                        ("definition_detail", Schema.ref("Definition")),
                    ], optional: ["definition_detail"])
            ),
            (
                "TransitionResult",
                Schema.object(
                    transitionFields + [("fence", Schema.fence)], optional: ["data", "transaction", "attempted"],
                    "the history entry the event recorded, and its fence (= version)")
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
                        description:
                            "With If-None-Match naming the current version (its ETag), 304 without a body; with wait as well, the answer comes when the version moves (200) or the wait ends (304).",
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
                        headers: [Parameter.ifNoneMatch],
                        responses: [
                            Response.json(200, "the machine", machine, headers: etag),
                            Response.empty(304, "If-None-Match names the current version", headers: etag),
                        ] + Response.waitEnds),
                    deleteOperation(.machines, id: "deleteMachine"),
                ]),
            PathItem(
                "/v1/machines/{name}/events/{event}", [name, Parameter.path("event", "the event", example: "prepare")],
                [
                    Operation(
                        "POST", "fire", "Fire an event: one transition, as one transaction",
                        description:
                            "Checked in this order: unknown event (404), If-Match (412), not allowed now (409).",
                        headers: [ifMatch],
                        body: RequestBody(
                            schema: Schema.request([("data", Schema.any("kept in the history entry"))]),
                            required: false, example: .object([("data", .object([("by", .string("ops"))]))])),
                        responses: [
                            Response.json(200, "the transition", Schema.ref("TransitionResult"), headers: etag),
                            Response.problem(
                                404, "no such machine, or an event its definition does not know (`allowed_events`)",
                                codes: ["not_found"]),
                            eventConflicts,
                            Response.problem(
                                412, "If-Match differs from the version (`version` is the current one)",
                                codes: ["precondition_failed"]),
                        ])
                ]),
            PathItem(
                "/v1/machines/{name}/transactions", [name],
                [
                    Operation(
                        "POST", "openTransaction", "Hold a transition open until it is committed or aborted",
                        description:
                            "Checked as the event is. While it is open the machine stays in `from` and refuses every "
                            + "other event or transaction (409 transaction_open); it expires after timeout_seconds.",
                        headers: [ifMatch],
                        body: RequestBody(
                            schema: Schema.request(
                                [
                                    ("event", Schema.name("the event a commit applies")),
                                    (
                                        "timeout_seconds",
                                        Schema.seconds(
                                            Durations.minimumSeconds...UsherConfig().maxMachineTransactionSeconds,
                                            "default machine_transaction_seconds; at most max_machine_transaction_seconds"
                                        )
                                    ),
                                    ("data", Schema.any("kept in the history entry")),
                                ], required: ["event"]),
                            required: true,
                            example: .object([("event", .string("prepare")), ("timeout_seconds", .int(60))])),
                        responses: [
                            Response.json(201, "the open transaction", Schema.ref("Transaction"), headers: etag),
                            Response.problem(
                                404, "no such machine, or an event its definition does not know (`allowed_events`)",
                                codes: ["not_found"]),
                            eventConflicts,
                            Response.problem(
                                412, "If-Match differs from the version (`version` is the current one)",
                                codes: ["precondition_failed"]),
                            Response.problem(
                                507, "the history entry would pass max_stored_bytes", codes: ["storage_full"]),
                        ])
                ]),
            PathItem(
                "/v1/machines/{name}/transactions/{id}/commit", [name, transactionID],
                [
                    Operation(
                        "POST", "commitTransaction", "Commit: the transition happens as the event would",
                        responses: [
                            Response.json(200, "the transition", Schema.ref("TransitionResult"), headers: etag)
                        ] + transactionEnds)
                ]),
            PathItem(
                "/v1/machines/{name}/transactions/{id}/abort", [name, transactionID],
                [
                    Operation(
                        "POST", "abortTransaction", "Abort: the transaction ends, the state stays",
                        responses: [
                            Response.json(
                                200, "the transaction, status aborted", Schema.ref("Transaction"), headers: etag)
                        ] + transactionEnds)
                ]),
        ]
    }

    /// `If-Match` on an event or a transaction.
    private static let ifMatch: JSONValue = .object([
        ("name", .string("If-Match")), ("in", .string("header")), ("required", .bool(false)),
        ("description", .string("apply only at this version: quoted (\"7\") or bare (7); * or absent: any")),
        (
            "schema",
            .object([
                ("type", .string("string")),
                ("pattern", .string("^(\\*|(W/)?\"[-+]?[0-9]{1,18}\"|[-+]?[0-9]{1,18})$")),
            ])
        ),
    ])

    /// 409 on an event or on opening a transaction.
    private static let eventConflicts = Response.problem(
        409,
        "the event is not allowed in the current state (`state`, `allowed_events`), or a transaction is open "
            + "(`transaction`, `event`, `expires_at`)",
        codes: ["invalid_transition", "transaction_open"])

    /// A transaction's id in the path.
    private static let transactionID = Parameter.path("id", "the transaction's id", example: "1767225600000001")

    /// What a commit or an abort can meet besides its answer.
    private static let transactionEnds: [(String, JSONValue)] = [
        Response.problem(404, "no such machine or transaction", codes: ["not_found"]),
        Response.problem(
            409, "the transaction already ended (`current_status`: committed, aborted or expired)",
            codes: ["transaction_ended"]),
    ]
}
