import UsherCore

// Pipelines (docs/api.md, Pipelines; docs/pipelines.md): the shapes of `PipelineConfig`,
// `PipelineFilter`, `PipelineSourceConfig`, `PipelineItem`,
// `PipelineDelivery`, `PipelineSnapshot` and the routes of `PipelineRoutes`.

extension OpenAPIDocument {
    static var pipelineSchemas: [(String, JSONValue)] {
        typealias L = PipelineConfig.Limits
        let absent: JSONValue = .object([("type", .string("null"))])
        let pointer: JSONValue = .object([
            ("type", .string("string")), ("pattern", .string("^(/([^~/]|~[01])*)*$")),
            (
                "description",
                .string(
                    "a JSON Pointer (RFC 6901) into the payload; \"\" is the whole payload; "
                        + "at most max_pointer_segments (default 32) segments")
            ),
        ])

        // A filter: `when` takes exactly one test; each action its own fields.
        let tests: [(String, JSONValue)] = [
            ("equals", Schema.nonNull("the field exists and equals this (null: use in [null])")),
            ("not_equals", Schema.nonNull("the field is missing or differs")),
            ("in", Schema.array(Schema.any(), "the field exists and equals one of these")),
            (
                "exists",
                .object([
                    ("type", .string("boolean")),
                    ("description", .string("the field exists (true) or is missing (false)")),
                ])
            ),
        ]
        let when = Schema.oneOf(
            tests.map { test in
                Schema.request(
                    [("field", pointer)] + tests.map { ($0.0, $0.0 == test.0 ? test.1 : absent) },
                    required: ["field", test.0])
            }, "the filter applies only when this holds; none: always")
        let filterCommon: [(String, JSONValue)] = [
            (
                "priority",
                Schema.integer(
                    PipelineFilter.Limits.priority, "filters run in descending priority, ties by name; default 0")
            ),
            ("when", when),
        ]
        let filterRequest = Schema.oneOf(
            [
                Schema.request(
                    filterCommon + [("action", Schema.constant("drop")), ("field", absent), ("value", absent)],
                    required: ["action"], "the item is never delivered (counts in filtered_total)"),
                Schema.request(
                    filterCommon + [
                        ("action", Schema.constant("set")), ("field", pointer),
                        ("value", Schema.nonNull("the value to set (null counts as absent: use remove)")),
                    ], required: ["action", "field", "value"], "the delivered payload gets value at field"),
                Schema.request(
                    filterCommon + [
                        ("action", Schema.constant("remove")),
                        (
                            "field",
                            .object([("type", .string("string")), ("pattern", .string("^(/([^~/]|~[01])*)+$"))])
                        ),
                        ("value", absent),
                    ], required: ["action", "field"], "the delivered payload loses field"),
            ], "a filter: runs on each item as it is handed out")

        let filterFields: [(String, JSONValue)] = [
            ("priority", Schema.integer()),
            ("when", Schema.object([("field", Schema.string())] + tests, optional: Set(tests.map(\.0)))),
            ("action", Schema.enumeration(["drop", "set", "remove"])),
            ("field", Schema.string()),
            ("value", Schema.any()),
        ]
        let location = PipelineSourceConfig.Limits.locationBytes
        let lowWater = Schema.integer(
            PipelineSourceConfig.Limits.lowWater, "pull while fewer items than this are ready; default 1")
        let sourceRequest = Schema.oneOf(
            [
                Schema.request(
                    [
                        ("kind", Schema.constant("file")),
                        (
                            "path",
                            .object([
                                ("type", .string("string")), ("minLength", .int(1)), ("maxLength", .int(location)),
                                ("description", .string("NDJSON file relative to data_dir; may not leave it")),
                            ])
                        ),
                        ("url", absent), ("low_water", lowWater),
                    ], required: ["kind", "path"]),
                Schema.request(
                    [
                        ("kind", Schema.constant("http")),
                        (
                            "url",
                            .object([
                                ("type", .string("string")), ("maxLength", .int(location)),
                                ("pattern", .string("^[Hh][Tt][Tt][Pp]://")),
                                ("description", .string("http:// URL; loopback only unless allow_remote_sources")),
                            ])
                        ),
                        ("path", absent), ("low_water", lowWater),
                    ], required: ["kind", "url"]),
            ], "where the pipeline pulls items by itself when it runs low")
        let sourceFields: [(String, JSONValue)] = [
            ("kind", Schema.enumeration(["file", "http"])),
            ("path", Schema.string()),
            ("url", Schema.string()),
            ("low_water", Schema.count),
        ]
        let mutable: [(String, JSONValue)] = [
            ("capacity", Schema.integer(L.capacity, "ready, delayed and in-flight items together; default 1000")),
            (
                "max_in_flight",
                Schema.integer(L.maxInFlight, "items handed out and not yet consumed or released; default 1")
            ),
            (
                "ack_seconds",
                Schema.seconds(L.seconds, "an item not consumed by then is handed out again; 0 = never; default 30")
            ),
            (
                "max_deliveries",
                Schema.integer(L.maxDeliveries, "hand-outs before an item that comes back goes dead; default 5")
            ),
            (
                "history",
                Schema.integer(
                    L.history,
                    "finished (consumed or cancelled) items remembered without payload, and the most pushed ids "
                        + "remembered for dedup_seconds; default 1000")
            ),
            (
                "dedup_seconds",
                Schema.seconds(
                    L.seconds,
                    "a push with the id of a finished item pushed less than this long ago answers that item; "
                        + "0 = ids are free once finished; default 300")
            ),
        ]
        let nullableTime = Schema.nullable(Schema.timestamp)
        return [
            ("FilterRequest", filterRequest),
            ("Filter", Schema.object(filterFields, optional: ["when", "field", "value"])),
            (
                "FilterEntry",
                Schema.object([("name", Schema.name())] + filterFields, optional: ["when", "field", "value"])
            ),
            (
                "PipelineConfigRequest",
                Schema.request(
                    mutable + [
                        (
                            "filters",
                            Schema.map(
                                Schema.ref("FilterRequest"), maxProperties: PipelineFilter.Limits.count,
                                "the filters it starts with, by name")
                        ),
                        ("source", sourceRequest),
                        (
                            "backend",
                            Schema.enumeration(
                                Backend.allCases.map(\.rawValue),
                                "where the pipeline lives: this process's memory, or Redis (shared by every Usher on it; needs a redis block; no source); default default_backend"
                            )
                        ),
                    ], "a pipeline's config and backend; every field optional")
            ),
            (
                "PipelinePatchRequest",
                Schema.request(
                    mutable + [
                        (
                            "paused",
                            .object([
                                ("type", .string("boolean")),
                                (
                                    "description",
                                    .string("true: takes hand out nothing (they wait, or 204); false: resume")
                                ),
                            ])
                        )
                    ], "mutable fields and paused; filters and source change elsewhere")
            ),
            (
                "PipelineConfig",
                Schema.object(
                    [
                        ("capacity", Schema.count), ("max_in_flight", Schema.count), ("ack_seconds", Schema.secondsOut),
                        ("max_deliveries", Schema.count), ("history", Schema.count),
                        ("dedup_seconds", Schema.secondsOut),
                        ("filters", Schema.map(Schema.ref("Filter"))),
                        ("source", Schema.object(sourceFields, optional: ["path", "url"])),
                    ], optional: ["source"], "the config, every default filled in (filters as created)")
            ),
            (
                "PipelineSummary",
                Schema.object(
                    [
                        ("name", Schema.name()), ("capacity", Schema.count), ("ready", Schema.count),
                        ("in_flight", Schema.count), ("delayed", Schema.count), ("dead", Schema.count),
                        ("backend", Schema.enumeration(["redis"], "present for a pipeline kept in Redis")),
                    ], optional: ["backend"])
            ),
            (
                "PushRequest",
                Schema.request(
                    [
                        (
                            "id",
                            .object([
                                ("type", .string("string")), ("pattern", .string(Schema.namePattern)),
                                ("not", .object([("const", .string(PipelineRoutes.reservedID))])),
                                (
                                    "description",
                                    .string(
                                        "client-supplied id (not \"batch\"): a push with an id the pipeline holds, "
                                            + "or finished within dedup_seconds of its push, answers that item with 200; "
                                            + "without one the server makes a 16-digit, time-ordered id"
                                    )
                                ),
                            ])
                        ),
                        ("payload", Schema.any("any JSON, null included (required)")),
                        ("priority", Schema.integer(L.priority, "higher first; default 0")),
                        ("delay_seconds", Schema.seconds(L.seconds, "ready only after this many seconds")),
                    ], required: ["payload"])
            ),
            (
                "PipelineItem",
                Schema.object([
                    ("id", Schema.name()),
                    ("payload", Schema.any("as pushed (filters never change it)")),
                    ("priority", Schema.integer()),
                    ("status", Schema.enumeration(["ready", "delayed", "in_flight", "dead", "consumed", "cancelled"])),
                    ("deliveries", Schema.count),
                    ("created_at", Schema.timestamp),
                    ("available_at", Schema.timestamp),
                    ("taken_at", nullableTime),
                    ("ack_deadline", nullableTime),
                    ("fence", Schema.nullable(Schema.fence)),
                    ("dead_at", nullableTime),
                ])
            ),
            (
                "Delivery",
                Schema.object([
                    ("id", Schema.name()),
                    ("payload", Schema.any("after the filters ran")),
                    ("deliveries", Schema.integer(1...Int.max, "hand-outs so far, this one included")),
                    ("taken_at", Schema.timestamp),
                    ("ack_deadline", nullableTime),
                    ("fence", Schema.fence),
                ])
            ),
            (
                "PipelineCounts",
                Schema.object(
                    [
                        "ready", "in_flight", "delayed", "dead", "waiting_consumers", "waiting_producers",
                        "pushed_total", "delivered_total", "consumed_total", "filtered_total", "redelivered_total",
                        "dead_total", "dead_dropped_total", "cancelled_total", "extended_total", "deduplicated_total",
                    ].map { ($0, Schema.count) })
            ),
            (
                "SourceStatus",
                Schema.object(
                    sourceFields + [
                        ("pulled_total", Schema.count),
                        ("errors_total", Schema.count),
                        ("last_error", Schema.nullable(Schema.string())),
                        ("exhausted", Schema.bool),
                        ("next_retry_at", nullableTime),
                    ], optional: ["path", "url"])
            ),
            (
                "PipelineState",
                Schema.object([
                    ("name", Schema.name()),
                    ("capacity", Schema.count),
                    ("paused", Schema.bool),
                    ("fence", Schema.fence),
                    ("filters", Schema.array(Schema.ref("FilterEntry"), "in the order they run")),
                    (
                        "items",
                        Schema.array(Schema.ref("PipelineItem"), "the first `limit` ready items in hand-out order")
                    ),
                    ("next_cursor", Schema.nextCursor),
                    ("counts", Schema.ref("PipelineCounts")),
                    ("source", Schema.nullable(Schema.ref("SourceStatus"))),
                    ("config", Schema.ref("PipelineConfig")),
                ])
            ),
        ]
    }

    static var pipelinePaths: [PathItem] {
        let name = nameParameter(.pipelines, example: "gifts")
        let item = Parameter.path("id", "the item's id", example: "toy-1", not: PipelineRoutes.reservedID)
        let filter = Parameter.path("filter", "the filter's name", example: "no-heartbeats")
        let state = Schema.ref("PipelineState")
        let itemJSON = Schema.ref("PipelineItem")
        let limit = Parameter.limit(PipelineRoutes.listLimit, default: 100, "items")
        let full = Response.problem(
            429, "the pipeline holds capacity items", codes: ["pipeline_full"],
            headers: [Response.retryAfter])
        let notInFlight = Response.problem(
            409,
            "the item is not in flight (ready, delayed, dead, or consumed or cancelled and remembered), "
                + "or `fence` is an earlier delivery's; `current_status`",
            codes: ["not_in_flight"])
        let fence = Schema.integer(0...Int.max, "only the delivery that carried this fence may do it")
        let seconds = PipelineConfig.Limits.seconds
        let batchRoute = Response.methodNotAllowed("the id `batch`: …/items/batch is the batch route (POST only)")
        return [
            PathItem("/v1/pipelines", [listOperation(.pipelines, id: "listPipelines", summary: "PipelineSummary")]),
            PathItem(
                "/v1/pipelines/{name}", [name],
                [
                    Operation(
                        "PUT", "createPipeline", "Create a pipeline",
                        description:
                            "201 when created; the same config again (after defaults): 200; a different one: 409.",
                        body: RequestBody(
                            schema: Schema.ref("PipelineConfigRequest"), required: false,
                            example: .object([("capacity", .int(100)), ("max_in_flight", .int(2))])),
                        responses: [
                            Response.json(201, "created", state, headers: [Response.tag]),
                            Response.json(200, "exists with the same config", state, headers: [Response.tag]),
                        ]
                            + Response.creationConflicts),
                    Operation(
                        "GET", "getPipeline", "The pipeline's counts, filters, first ready items and source",
                        query: [limit, Parameter.cursor, Parameter.waitForChange], headers: [Parameter.ifNoneMatch],
                        responses: Response.read("the state", state) + Response.waitEnds),
                    Operation(
                        "PATCH", "patchPipeline",
                        "Change capacity, max_in_flight, ack_seconds, max_deliveries, history or dedup_seconds, "
                            + "or pause and resume hand-outs; effective at once",
                        body: RequestBody(
                            schema: Schema.ref("PipelinePatchRequest"), required: false,
                            example: .object([("capacity", .int(200))])),
                        responses: [Response.json(200, "the state after the change", state, headers: [Response.tag])]),
                    deleteOperation(.pipelines, id: "deletePipeline"),
                ]),
            PathItem(
                "/v1/pipelines/{name}/items", [name],
                [
                    Operation(
                        "POST", "push", "Push an item",
                        description:
                            "Full: 429 pipeline_full, or with wait the producer is held until there is room (back-pressure).",
                        query: [Parameter.wait("hold the producer until there is room")],
                        body: RequestBody(
                            schema: Schema.ref("PushRequest"), required: true,
                            example: .object([
                                ("id", .string("toy-1")), ("payload", .object([("gift", .string("kite"))])),
                            ])),
                        responses: [
                            Response.json(201, "pushed: the item", itemJSON),
                            Response.json(
                                200,
                                "an item with this id is in the pipeline already, or finished within dedup_seconds: "
                                    + "that item; nothing enqueued",
                                itemJSON),
                            full,
                        ] + Response.waitEnds)
                ]),
            PathItem(
                "/v1/pipelines/{name}/items/batch", [name],
                [
                    Operation(
                        "POST", "pushBatch", "Push several items, all or nothing",
                        description:
                            "429 pipeline_full when they do not all fit now; 400 when there are more than capacity.",
                        body: RequestBody(
                            schema: Schema.request(
                                [("items", Schema.array(Schema.ref("PushRequest")))],
                                required: ["items"]),
                            required: true,
                            example: .object([
                                (
                                    "items",
                                    .array([
                                        .object([("payload", .int(1))]),
                                        .object([("payload", .int(2))]),
                                    ])
                                )
                            ])),
                        responses: [
                            Response.json(201, "pushed", Schema.object([("ids", Schema.array(Schema.name()))])),
                            Response.json(
                                200, "every item was there already",
                                Schema.object([("ids", Schema.array(Schema.name()))])),
                            full,
                        ])
                ]),
            PathItem(
                "/v1/pipelines/{name}/take", [name],
                [
                    Operation(
                        "POST", "take", "Take up to max items; 204 when none came within wait",
                        query: [
                            Parameter.wait("wait for an item"),
                            Parameter.onDisconnect("the consumer is dropped and takes nothing"),
                            Parameter.query(
                                "max",
                                .object([
                                    ("type", .string("integer")), ("minimum", .int(PipelineRoutes.maxTake.lowerBound)),
                                    ("maximum", .int(PipelineRoutes.maxTake.upperBound)), ("default", .int(1)),
                                ]), "most items to take (at most max_in_flight - in_flight are handed out)"),
                        ],
                        body: RequestBody(
                            schema: Schema.request([
                                (
                                    "ack_seconds",
                                    Schema.seconds(seconds, "a shorter ack limit for these deliveries, never longer")
                                )
                            ]), required: false, example: .object([("ack_seconds", .int(10))])),
                        responses: [
                            Response.json(
                                200, "the deliveries", Schema.object([("items", Schema.array(Schema.ref("Delivery")))])),
                            Response.empty(204, "nothing came within wait (at once without it)"),
                        ] + Response.waitEnds)
                ]),
            PathItem(
                "/v1/pipelines/{name}/items/{id}", [name, item],
                [
                    Operation(
                        "GET", "getItem",
                        "An item: ready, delayed, in flight, dead, or finished and remembered; with wait, when it moves",
                        description:
                            "A consumed or cancelled item is answered (payload null) while among the last `history` finished. With wait, the answer comes when the item's status or delivery (fence) changes, or when the wait ends; a finished item answers at once.",
                        query: [Parameter.wait("answer when the item's status or delivery changes")],
                        headers: [Parameter.ifNoneMatch],
                        responses: Response.read("the item", itemJSON) + [batchRoute] + Response.waitEnds),
                    Operation(
                        "DELETE", "cancelItem", "Cancel a ready, delayed or dead item",
                        responses: [
                            Response.json(
                                200, "the item, status cancelled (a remembered finished item as it is)", itemJSON),
                            batchRoute,
                            Response.problem(409, "the item is in flight: consume or release it", codes: ["in_flight"]),
                        ]),
                ]),
            PathItem(
                "/v1/pipelines/{name}/items/{id}/consume", [name, item],
                [
                    Operation(
                        "POST", "consume", "Acknowledge an item in flight: it leaves the pipeline",
                        body: RequestBody(
                            schema: Schema.request([("fence", fence)]), required: false,
                            example: .object([("fence", .int(1_767_225_600_000_001))])),
                        responses: [Response.json(200, "the item, status consumed", itemJSON), notInFlight])
                ]),
            PathItem(
                "/v1/pipelines/{name}/items/{id}/release", [name, item],
                [
                    Operation(
                        "POST", "release", "Give an item in flight back (to the front), now or after delay_seconds",
                        body: RequestBody(
                            schema: Schema.request([
                                ("delay_seconds", Schema.seconds(seconds, "back only after this many seconds")),
                                ("fence", fence),
                            ]), required: false, example: .object([("delay_seconds", .int(5))])),
                        responses: [Response.json(200, "the item: ready, delayed, or dead", itemJSON), notInFlight])
                ]),
            PathItem(
                "/v1/pipelines/{name}/items/{id}/extend", [name, item],
                [
                    Operation(
                        "POST", "extend",
                        "Keep an item in flight longer: ack_deadline becomes the later of itself and now + ack_seconds",
                        description:
                            "An extend never shortens a delivery; ack_seconds defaults to, and is capped at, the "
                            + "pipeline's ack_seconds.",
                        body: RequestBody(
                            schema: Schema.request([
                                (
                                    "ack_seconds",
                                    Schema.seconds(
                                        seconds, "from now; default and most: the pipeline's ack_seconds")
                                ),
                                ("fence", fence),
                            ]), required: false, example: .object([("ack_seconds", .int(30))])),
                        responses: [Response.json(200, "the item with its new ack_deadline", itemJSON), notInFlight])
                ]),
            PathItem(
                "/v1/pipelines/{name}/dead", [name],
                [
                    Operation(
                        "GET", "deadItems", "The dead list, oldest first",
                        query: [limit, Parameter.cursor],
                        headers: [Parameter.ifNoneMatch],
                        responses: Response.read(
                            "how many, and the oldest `limit`",
                            Schema.object([
                                ("dead", Schema.count), ("items", Schema.array(itemJSON)),
                                ("next_cursor", Schema.nextCursor),
                            ])))
                ]),
            PathItem(
                "/v1/pipelines/{name}/dead/redrive", [name],
                [
                    Operation(
                        "POST", "redrive", "Move dead items back (oldest first, while there is room), deliveries reset",
                        body: RequestBody(schema: Schema.request([]), required: false, example: nil),
                        responses: [
                            Response.json(
                                200, "how many moved, how many are left",
                                Schema.object([
                                    ("moved", Schema.count), ("dead", Schema.count),
                                ]))
                        ])
                ]),
            PathItem(
                "/v1/pipelines/{name}/filters/{filter}", [name, filter],
                [
                    Operation(
                        "GET", "getFilter", "A filter", headers: [Parameter.ifNoneMatch],
                        responses: Response.read("the filter", Schema.ref("FilterEntry"))),
                    Operation(
                        "PUT", "putFilter", "Add or replace a filter",
                        body: RequestBody(
                            schema: Schema.ref("FilterRequest"), required: true,
                            example: .object([
                                ("priority", .int(10)),
                                ("when", .object([("field", .string("/type")), ("equals", .string("heartbeat"))])),
                                ("action", .string("drop")),
                            ])),
                        responses: [
                            Response.json(201, "added", Schema.ref("FilterEntry")),
                            Response.json(200, "replaced", Schema.ref("FilterEntry")),
                        ]),
                    Operation(
                        "DELETE", "deleteFilter", "Remove a filter",
                        responses: [Response.empty(204, "removed")]),
                ]),
        ]
    }
}
