import UsherCore

// Windows (docs/api.md, Windows): the shapes of `WindowConfig`, `WindowItem`,
// `WindowState`, `Dismissal` and the routes of `WindowRoutes`.

extension OpenAPIDocument {
    static var windowSchemas: [(String, JSONValue)] {
        typealias L = QueueConfig.Limits
        let dedup = Schema.enumeration(
            DedupMode.allCases.map(\.rawValue), "how a new item merges into a queued one with its key; default off")
        let item = Schema.ref("WindowItem")
        let itemOptional: Set<String> = ["position", "merged_into", "reason"]
        let itemFields: [(String, JSONValue)] = [
            ("id", Schema.name()),
            ("window", Schema.name()),
            ("key", Schema.nullable(Schema.string())),
            ("title", Schema.nullable(Schema.string())),
            ("message", Schema.nullable(Schema.string())),
            ("payload", Schema.any()),
            ("priority", Schema.integer()),
            ("status", Schema.enumeration(WindowItemStatus.allCases.map(\.rawValue))),
            ("position", Schema.integer(1...Int.max, "1-based place in showing order; only while queued")),
            ("created_at", Schema.timestamp),
            ("shown_at", Schema.nullable(Schema.timestamp)),
            ("expires_at", Schema.nullable(Schema.timestamp)),
            ("finished_at", Schema.nullable(Schema.timestamp)),
            ("fence", Schema.nullable(Schema.fence)),
            ("merged_into", Schema.name("merged: the item it merged into (the newer one when replaced)")),
            (
                "reason",
                Schema.enumeration(
                    ["replaced", "deleted"],
                    "replaced: merged into a newer duplicate (dedup_keep latest); deleted: dismissed because the window was deleted"
                )
            ),
        ]
        let configFields: [(String, JSONValue)] = [
            (
                "max_waiting",
                Schema.integer(L.maxWaiting, "more queued (and delayed) items: 429 queue_full; default 1000")
            ),
            (
                "display_seconds",
                Schema.seconds(L.seconds, "auto-dismiss after this long; 0 = until dismissed; default 0")
            ),
            ("dedup", dedup),
            ("dedup_keep", dedupKeepSchema),
        ]
        return [
            ("WindowConfigRequest", Schema.request(configFields, "a window's config; every field optional")),
            (
                "WindowCreateRequest",
                Schema.request(
                    configFields + [
                        (
                            "backend",
                            Schema.enumeration(
                                Backend.allCases.map(\.rawValue),
                                "where the window lives: this process's memory, or Redis (shared by every Usher on it; needs a redis block); default default_backend"
                            )
                        )
                    ], "a window's config and backend; every field optional")
            ),
            (
                "WindowConfig",
                Schema.object(
                    [
                        ("max_waiting", Schema.count), ("display_seconds", Schema.secondsOut), ("dedup", dedup),
                        ("dedup_keep", dedupKeepSchema),
                    ], "the config, every default filled in")
            ),
            (
                "WindowSummary",
                Schema.object(
                    [
                        ("name", Schema.name()),
                        ("showing", Schema.nullable(Schema.name("the id of the item shown"))),
                        ("queued", Schema.count),
                        ("backend", Schema.enumeration(["redis"], "present for a window kept in Redis")),
                    ], optional: ["backend"])
            ),
            (
                "ShowRequest",
                Schema.request([
                    (
                        "id",
                        Schema.name(
                            "client-supplied id: a retried show with a known id answers that item with 200; without one the server makes a 16-digit, time-ordered id"
                        )
                    ),
                    ("key", Schema.key("a new item merges into a queued one with the same key")),
                    ("title", Schema.string()),
                    ("message", Schema.string()),
                    ("payload", Schema.any("any JSON, returned as given")),
                    ("priority", Schema.integer(L.priority, "higher first, FIFO within a priority; default 0")),
                    (
                        "display_seconds",
                        Schema.seconds(L.seconds, "overrides the window's; 0 pins the item until dismissed")
                    ),
                    ("delay_seconds", Schema.seconds(L.seconds, "queue the item only after this many seconds")),
                ])
            ),
            (
                "WindowItem",
                Schema.object(itemFields, optional: itemOptional, "an item; position only while queued")
            ),
            (
                "WindowCounts",
                Schema.object(
                    [
                        "showing", "queued", "delayed", "received_total", "shown_total", "dismissed_total",
                        "expired_total",
                        "merged_total",
                    ].map { ($0, Schema.count) })
            ),
            (
                "WindowState",
                Schema.object([
                    ("name", Schema.name()),
                    ("config", Schema.ref("WindowConfig")),
                    ("showing", Schema.nullable(item)),
                    ("queued", Schema.array(item, "the first `limit` queued items in showing order")),
                    ("counts", Schema.ref("WindowCounts")),
                    ("next_cursor", Schema.nextCursor),
                ])
            ),
            (
                "Dismissal",
                Schema.object(
                    itemFields + [("showing", Schema.nullable(item))], optional: itemOptional,
                    "the item dismissed, with `showing`: the one shown now (the next one, in the same step), or null")
            ),
        ]
    }

    static var windowPaths: [PathItem] {
        let name = nameParameter(.windows, example: "alerts")
        let state = Schema.ref("WindowState")
        let configBody = RequestBody(
            schema: Schema.ref("WindowConfigRequest"), required: false,
            example: .object([("display_seconds", .int(0))]))
        return [
            PathItem("/v1/windows", [listOperation(.windows, id: "listWindows", summary: "WindowSummary")]),
            PathItem(
                "/v1/windows/{name}", [name],
                [
                    Operation(
                        "PUT", "createWindow", "Create a window",
                        description:
                            "201 when created; the same config again (after defaults): 200; a different one: 409.",
                        body: RequestBody(
                            schema: Schema.ref("WindowCreateRequest"), required: false,
                            example: .object([("display_seconds", .int(0))])),
                        responses: [
                            Response.json(201, "created", state, headers: [Response.tag]),
                            Response.json(200, "exists with the same config", state, headers: [Response.tag]),
                        ]
                            + Response.creationConflicts),
                    Operation(
                        "GET", "getWindow", "The item shown, the queue behind it and counts",
                        query: [
                            Parameter.limit(0...10_000, default: 100, "queued items"), Parameter.cursor,
                            Parameter.waitForChange,
                        ],
                        headers: [Parameter.ifNoneMatch],
                        responses: Response.read("the state", state) + Response.waitEnds),
                    Operation(
                        "PATCH", "patchWindow", "Change config fields; effective at once",
                        body: configBody,
                        responses: [Response.json(200, "the state after the change", state, headers: [Response.tag])]),
                    deleteOperation(.windows, id: "deleteWindow"),
                ]),
            PathItem(
                "/v1/windows/{name}/show", [name],
                [
                    Operation(
                        "POST", "show", "Show an item, or queue it behind the one shown",
                        body: RequestBody(
                            schema: Schema.ref("ShowRequest"), required: false,
                            example: .object([("id", .string("alert-1")), ("title", .string("Disk full"))])),
                        responses: [
                            Response.json(201, "a new item: showing, queued or delayed", Schema.ref("WindowItem")),
                            Response.json(
                                200, "merged into a queued item with its key, or the item of a known id",
                                Schema.ref("WindowItem")),
                            Response.problem(
                                429, "more than max_waiting items are queued", codes: ["queue_full"],
                                headers: [Response.retryAfter]),
                        ])
                ]),
            PathItem(
                "/v1/windows/{name}/dismiss", [name],
                [
                    Operation(
                        "POST", "dismiss",
                        "Dismiss the item shown (or the given one); the next is shown in the same step",
                        body: RequestBody(
                            schema: Schema.request([
                                ("id", Schema.name("the item to dismiss, queued or showing; default: the one shown"))
                            ]), required: false, example: .object([("id", .string("alert-1"))])),
                        responses: [
                            Response.json(
                                200, "the item dismissed, with the one shown now", Schema.ref("Dismissal")),
                            Response.problem(409, "nothing is showing and no id was given", codes: ["nothing_showing"]),
                        ])
                ]),
            PathItem(
                "/v1/windows/{name}/showing", [name],
                [
                    Operation(
                        "GET", "showing", "The item shown; with wait, as soon as it is not `after`",
                        description: "Without `after`, a wait lasts while nothing is showing.",
                        query: [
                            Parameter.query("after", Schema.name(), "the id of the item the client shows now"),
                            Parameter.wait("answer when the item shown is not `after`"),
                        ],
                        headers: [Parameter.ifNoneMatch],
                        responses: Response.read("the item shown now", Schema.ref("WindowItem")) + [
                            Response.empty(204, "nothing is shown")
                        ] + Response.waitEnds)
                ]),
            PathItem(
                "/v1/windows/{name}/items/{id}", [name, Parameter.path("id", "the item's id", example: "alert-1")],
                [
                    Operation(
                        "GET", "getWindowItem", "An item; with wait, when its status changes",
                        description:
                            "Finished items stay visible for the last 1000; an unknown or forgotten id is 404.",
                        query: [Parameter.wait("answer when the item's status changes")],
                        headers: [Parameter.ifNoneMatch],
                        responses: Response.read("the item", Schema.ref("WindowItem")) + Response.waitEnds)
                ]),
        ]
    }
}
