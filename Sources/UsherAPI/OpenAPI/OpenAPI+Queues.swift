import UsherCore

// Queues (docs/api.md, Queues): the shapes of `QueueConfig`, `VisitorView`, `QueueState`
// and the routes of `QueueRoutes`.

extension OpenAPIDocument {
    /// `dedup_keep`, the same on queues and windows.
    static let dedupKeepSchema = Schema.enumeration(
        DedupKeep.allCases.map(\.rawValue),
        "which of two duplicates stays: first (the one waiting; the newcomer is merged into it) or latest (the newcomer, in the waiting one's place; that one is merged, reason replaced); default first"
    )

    static var queueSchemas: [(String, JSONValue)] {
        typealias L = QueueConfig.Limits
        let dedup = Schema.enumeration(
            DedupMode.allCases.map(\.rawValue),
            "key: against every waiting visitor with the same key; adjacent: only the latest arrival; off: neither; default off (key when opposites are given)"
        )
        let pair = Schema.array(Schema.key(), "two different actions that cancel each other")
        let configFields: [(String, JSONValue)] = [
            (
                "capacity",
                Schema.integer(
                    L.capacity, "slots; 0 closes the queue (nobody is granted, visitors still wait); default 1")
            ),
            (
                "max_waiting",
                Schema.integer(L.maxWaiting, "more waiting (and delayed) visitors: 429 queue_full; default 10000")
            ),
            (
                "hold_seconds",
                Schema.seconds(L.seconds, "a holder not completed by then expires; 0 = no limit; default 30")
            ),
            ("dedup", dedup),
            ("dedup_keep", dedupKeepSchema),
            (
                "opposites",
                Schema.array(pairSchema(pair), "pairs of actions that cancel, e.g. [[\"like\",\"unlike\"]]; default []")
            ),
            ("history", Schema.integer(L.history, "finished visitors kept visible; default 1000")),
            (
                "dedup_seconds",
                Schema.seconds(
                    L.seconds,
                    "a finished visitor beyond history is still kept, and its id answers a repeated POST, until this long after it finished; default 0"
                )
            ),
            (
                "idle_seconds",
                Schema.seconds(
                    L.seconds,
                    "a waiting visitor whose client was not heard of (a call naming it, a wait parked on it) for this long is cancelled, reason abandoned; 0 = never; default 30"
                )
            ),
            (
                "claim_seconds",
                Schema.seconds(
                    L.seconds,
                    "a visitor granted while no client waited on it, that no call names within this long, is released, reason unclaimed; 0 = never; default 10"
                )
            ),
        ]
        return [
            (
                "QueueConfigRequest",
                Schema.request(configFields, "a queue's config; every field optional (defaults filled in)")
            ),
            (
                "QueueCreateRequest",
                Schema.request(
                    configFields + [
                        (
                            "backend",
                            Schema.enumeration(
                                Backend.allCases.map(\.rawValue),
                                "where the queue lives: this process's memory, or Redis (shared by every Usher on it; needs a redis block); default default_backend"
                            )
                        )
                    ], "a queue's config and backend; every field optional (defaults filled in)")
            ),
            (
                "QueueConfig",
                Schema.object(
                    [
                        ("capacity", Schema.count), ("max_waiting", Schema.count), ("hold_seconds", Schema.secondsOut),
                        ("dedup", dedup), ("dedup_keep", dedupKeepSchema),
                        ("opposites", Schema.array(pairSchema(Schema.array(Schema.string())))),
                        ("history", Schema.count), ("dedup_seconds", Schema.secondsOut),
                        ("idle_seconds", Schema.secondsOut),
                        ("claim_seconds", Schema.secondsOut),
                    ], "the config, every default filled in")
            ),
            (
                "QueueSummary",
                Schema.object(
                    [
                        ("name", Schema.name()), ("capacity", Schema.count), ("holding", Schema.count),
                        ("waiting", Schema.count), ("delayed", Schema.count),
                        ("backend", Schema.enumeration(["redis"], "present for a queue kept in Redis")),
                    ], optional: ["backend"])
            ),
            (
                "VisitorRequest",
                Schema.request([
                    (
                        "id",
                        Schema.name(
                            "client-supplied id: a retried POST with a known id answers that visitor with 200; without one the server makes a 16-digit, time-ordered id"
                        )
                    ),
                    ("key", Schema.key("dedup key; keyless visitors are never merged or cancelled")),
                    ("action", Schema.key("compared for duplicates and opposites")),
                    ("payload", Schema.any("any JSON, echoed back")),
                    ("priority", Schema.integer(L.priority, "higher first, FIFO within a priority; default 0")),
                    (
                        "hold_seconds",
                        Schema.seconds(
                            L.seconds,
                            "a shorter hold than the queue's, never longer; 0 only when the queue has no limit")
                    ),
                    ("delay_seconds", Schema.seconds(L.seconds, "join the waiting line only after this many seconds")),
                ])
            ),
            (
                "Visitor",
                Schema.object(
                    [
                        ("id", Schema.name()),
                        ("queue", Schema.name()),
                        ("key", Schema.nullable(Schema.string())),
                        ("action", Schema.nullable(Schema.string())),
                        ("payload", Schema.any()),
                        ("priority", Schema.integer()),
                        ("status", Schema.enumeration(VisitorStatus.allCases.map(\.rawValue))),
                        ("position", Schema.integer(1...Int.max, "1-based place in grant order; only while waiting")),
                        ("estimated_wait_seconds", Schema.nullable(Schema.secondsOut)),
                        (
                            "estimated_wait_reason",
                            Schema.enumeration(
                                WaitUnknown.allCases.map(\.rawValue),
                                "only while waiting without an estimate: closed (capacity 0) or no_hold_limit (a slot frees when a holder without an expiry finishes, and no finished hold, or none as long as the current one, says when)"
                            )
                        ),
                        ("created_at", Schema.timestamp),
                        ("granted_at", Schema.nullable(Schema.timestamp)),
                        ("expires_at", Schema.nullable(Schema.timestamp)),
                        ("finished_at", Schema.nullable(Schema.timestamp)),
                        ("fence", Schema.nullable(Schema.fence)),
                        (
                            "merged_into",
                            Schema.name("merged: the visitor it merged into (the newer one when replaced)")
                        ),
                        ("cancelled_with", Schema.name("cancelled by an opposite: the other visitor")),
                        (
                            "reason",
                            Schema.enumeration(
                                [
                                    "opposite", "client", "disconnected", "timeout", "abandoned", "undelivered",
                                    "unclaimed", "replaced", "deleted",
                                ],
                                "why it finished so: cancelled (opposite, client, disconnected, timeout, abandoned), released (client, undelivered, unclaimed, deleted: the queue was) or merged into a newer duplicate (replaced)"
                            )
                        ),
                    ],
                    optional: [
                        "position", "estimated_wait_seconds", "estimated_wait_reason", "merged_into", "cancelled_with",
                        "reason",
                    ],
                    "a visitor; position and estimated_wait_seconds only while waiting")
            ),
            (
                "QueueCounts",
                Schema.object(
                    [
                        "waiting", "holding", "delayed", "enqueued_total", "granted_total", "completed_total",
                        "released_total", "expired_total", "cancelled_total", "merged_total", "timed_out_total",
                        "abandoned_total", "unclaimed_total",
                    ].map { ($0, Schema.count) },
                    "timed_out_total and abandoned_total: of cancelled_total, try-acquires whose wait ended and visitors whose client went quiet; unclaimed_total: of released_total, grants nobody claimed"
                )
            ),
            (
                "QueueState",
                Schema.object([
                    ("name", Schema.name()),
                    ("config", Schema.ref("QueueConfig")),
                    ("holding", Schema.array(Schema.ref("Visitor"), "holders in grant order")),
                    (
                        "waiting",
                        Schema.array(Schema.ref("Visitor"), "the first `limit` waiting visitors in grant order")
                    ),
                    (
                        "delayed",
                        Schema.array(
                            Schema.ref("Visitor"),
                            "first page only: the first `limit` delayed visitors, the next to enter the line first")
                    ),
                    ("counts", Schema.ref("QueueCounts")),
                    ("next_cursor", Schema.nextCursor),
                ])
            ),
        ]
    }

    /// A pair: an array of exactly two different `item`s.
    private static func pairSchema(_ array: JSONValue) -> JSONValue {
        guard case .object(let m) = array else { return array }
        return .object(m + [("minItems", .int(2)), ("maxItems", .int(2)), ("uniqueItems", .bool(true))])
    }

    static var queuePaths: [PathItem] {
        let name = nameParameter(.queues, example: "printer")
        let visitor = Parameter.path("id", "the visitor's id", example: "job-1")
        let state = Schema.ref("QueueState")
        let visitorJSON = Schema.ref("Visitor")
        let configBody = RequestBody(
            schema: Schema.ref("QueueCreateRequest"), required: false,
            example: .object([("capacity", .int(1)), ("hold_seconds", .int(60))]))
        let notGranted = Response.problem(
            409, "the visitor holds no slot (e.g. it expired); `current_status` tells its status",
            codes: ["not_granted"])
        return [
            PathItem("/v1/queues", [listOperation(.queues, id: "listQueues", summary: "QueueSummary")]),
            PathItem(
                "/v1/queues/{name}", [name],
                [
                    Operation(
                        "PUT", "createQueue", "Create a queue",
                        description:
                            "201 when created; the same config again (after defaults): 200; a different one: 409.",
                        body: configBody,
                        responses: [
                            Response.json(201, "created", state, headers: [Response.tag]),
                            Response.json(200, "exists with the same config", state, headers: [Response.tag]),
                        ]
                            + Response.creationConflicts),
                    Operation(
                        "GET", "getQueue", "The queue's config, holders, the head of its line and counts",
                        query: [
                            Parameter.limit(0...10_000, default: 100, "waiting visitors (and holders)"),
                            Parameter.cursor, Parameter.waitForChange,
                        ],
                        headers: [Parameter.ifNoneMatch],
                        responses: Response.read("the state", state) + Response.waitEnds),
                    Operation(
                        "PATCH", "patchQueue", "Change config fields; effective at once",
                        description:
                            "Raising capacity grants waiting visitors at once; lowering it takes no slot away.",
                        body: RequestBody(
                            schema: Schema.ref("QueueConfigRequest"), required: false,
                            example: .object([("capacity", .int(2))])),
                        responses: [Response.json(200, "the state after the change", state, headers: [Response.tag])]),
                    deleteOperation(.queues, id: "deleteQueue"),
                ]),
            PathItem(
                "/v1/queues/{name}/visitors", [name],
                [
                    Operation(
                        "POST", "enqueue", "Ask for a slot",
                        description: """
                            201 with the visitor (granted, waiting or delayed); 200 when it merged, was cancelled by an \
                            opposite, or its id exists. With wait, the answer comes when it stops waiting or S passes; \
                            with on_timeout=cancel a visitor still waiting then is cancelled (reason timeout, 200).
                            """,
                        query: [
                            Parameter.wait("answer when the visitor stops waiting"),
                            Parameter.onDisconnect("the visitor is cancelled (reason disconnected)"),
                            Parameter.onTimeout,
                        ],
                        body: RequestBody(
                            schema: Schema.ref("VisitorRequest"), required: false,
                            example: .object([("id", .string("job-1")), ("key", .string("report"))])),
                        responses: [
                            Response.json(201, "a new visitor: granted, waiting or delayed", visitorJSON),
                            Response.json(
                                200,
                                "merged, cancelled by an opposite or by on_timeout=cancel, or the visitor of a known id",
                                visitorJSON),
                            Response.problem(
                                429, "more than max_waiting visitors wait", codes: ["queue_full"],
                                headers: [Response.retryAfter]),
                        ] + Response.waitEnds)
                ]),
            PathItem(
                "/v1/queues/{name}/visitors/{id}", [name, visitor],
                [
                    Operation(
                        "GET", "getVisitor", "A visitor; with wait, when its status changes",
                        query: [Parameter.wait("answer when the visitor's status changes")],
                        headers: [Parameter.ifNoneMatch],
                        responses: Response.read("the visitor", visitorJSON) + Response.waitEnds),
                    Operation(
                        "DELETE", "leaveQueue", "Leave: a waiting or delayed visitor is cancelled, a holder released",
                        responses: [Response.json(200, "the visitor (a finished one as it is)", visitorJSON)]),
                ]),
            PathItem(
                "/v1/queues/{name}/visitors/{id}/complete", [name, visitor],
                [
                    Operation(
                        "POST", "completeVisitor", "Finish a granted visitor",
                        body: RequestBody(schema: Schema.request([]), required: false, example: nil),
                        responses: [Response.json(200, "completed", visitorJSON), notGranted])
                ]),
            PathItem(
                "/v1/queues/{name}/visitors/{id}/extend", [name, visitor],
                [
                    Operation(
                        "POST", "extendVisitor",
                        "Extend a hold: expires_at = the later of now + hold_seconds and the current expiry (never shorter)",
                        body: RequestBody(
                            schema: Schema.request([
                                (
                                    "hold_seconds",
                                    Schema.seconds(
                                        QueueConfig.Limits.seconds,
                                        "default: the visitor's own hold; never longer than the queue's")
                                )
                            ]), required: false, example: .object([("hold_seconds", .int(30))])),
                        responses: [Response.json(200, "the visitor with its new expires_at", visitorJSON), notGranted])
                ]),
        ]
    }
}
