import UsherCore

// Pools (docs/api.md, Pools): the shapes of `PoolConfig`, `Lease`, `PoolElement`,
// `PoolState`, `ElementRemoval` and the routes of `PoolRoutes`.

extension OpenAPIDocument {
    static var poolSchemas: [(String, JSONValue)] {
        typealias L = PoolConfig.Limits
        let elementSpec = Schema.oneOf([
            Schema.name("an element id"),
            Schema.request(
                [("id", Schema.name()), ("data", Schema.any("anything the holder needs"))], required: ["id"]),
        ])
        let growRequest = Schema.request(
            [
                ("max_size", Schema.integer(L.elements, "growth stops at this many elements")),
                (
                    "prefix",
                    .object([
                        ("type", .string("string")), ("pattern", .string("^([A-Za-z0-9][A-Za-z0-9._:-]{0,99})?$")),
                        ("description", .string("grown ids are the prefix and a counter; default \"el-\"")),
                    ])
                ),
            ], required: ["max_size"], "when nothing is free, create prefix1, prefix2, … up to max_size elements")
        let maxSize = Schema.integer(nil, "the most elements the pool can have: size, or what grow lets it reach")
        let leaseFields: [(String, JSONValue)] = [
            ("holder", Schema.nullable(Schema.string())),
            ("status", Schema.enumeration(LeaseStatus.allCases.map(\.rawValue))),
            ("created_at", Schema.timestamp),
            ("granted_at", Schema.nullable(Schema.timestamp)),
            ("expires_at", Schema.nullable(Schema.timestamp)),
            ("finished_at", Schema.nullable(Schema.timestamp)),
            ("fence", Schema.nullable(Schema.fence)),
            (
                "reason",
                Schema.enumeration(
                    ["undelivered", "unclaimed", "abandoned", "deleted"],
                    "undelivered: recycled because the answer that leased it never reached its client; unclaimed: recycled because nobody claimed it within claim_seconds; abandoned: a fetch whose client was not heard of for idle_seconds, revoked while waiting; deleted: revoked because the pool was deleted"
                )
            ),
        ]
        let idleField = (
            "idle_seconds",
            Schema.seconds(
                L.seconds,
                "a waiting fetch whose client was not heard of (a wait parked on it, a call naming it) for this long is revoked, reason abandoned; 0 = never; default 30"
            )
        )
        let claimField = (
            "claim_seconds",
            Schema.seconds(
                L.seconds,
                "a lease granted while no client waited on it, that no call names within this long, is recycled, reason unclaimed; 0 = never; default 10"
            )
        )
        let elementRef = Schema.object([("id", Schema.name()), ("data", Schema.any())])
        let configFields: [(String, JSONValue)] = [
            (
                "elements",
                Schema.array(elementSpec, maxItems: L.elements.upperBound, "the elements (ids unique); default []")
            ),
            ("lease_seconds", Schema.seconds(L.seconds, "a lease not recycled by then expires; 0 = never; default 60")),
            ("max_waiting", Schema.integer(L.maxWaiting, "more waiting fetchers: 429 queue_full; default 1000")),
            ("grow", growRequest),
            idleField, claimField,
        ]
        return [
            (
                "PoolCreateRequest",
                Schema.request(
                    configFields + [
                        (
                            "size",
                            Schema.integer(
                                L.elements,
                                "instead of elements: make this many, el-1, el-2, … (grow's prefix when given); not with elements"
                            )
                        ),
                        (
                            "backend",
                            Schema.enumeration(
                                Backend.allCases.map(\.rawValue),
                                "where the pool lives: this process's memory, or Redis (shared by every Usher on it; needs a redis block); default default_backend"
                            )
                        ),
                    ], "a pool's config and backend; every field optional")
            ),
            (
                "PoolPatchRequest",
                Schema.request(
                    [
                        (
                            "lease_seconds",
                            Schema.seconds(L.seconds, "applies to leases granted or extended from now on")
                        ),
                        ("max_waiting", Schema.integer(L.maxWaiting)),
                        ("grow", growRequest),
                        idleField, claimField,
                    ], "mutable fields; elements change through their own routes")
            ),
            (
                "PoolConfig",
                Schema.object(
                    [
                        ("elements", Schema.array(Schema.oneOf([Schema.name(), elementRef]))),
                        ("lease_seconds", Schema.secondsOut),
                        ("max_waiting", Schema.count),
                        (
                            "grow",
                            Schema.nullable(Schema.object([("max_size", Schema.count), ("prefix", Schema.string())]))
                        ),
                        ("idle_seconds", Schema.secondsOut), ("claim_seconds", Schema.secondsOut),
                    ], "the config, every default filled in")
            ),
            (
                "PoolSummary",
                Schema.object(
                    [
                        ("name", Schema.name()), ("size", Schema.count), ("max_size", maxSize),
                        ("available", Schema.count), ("leased", Schema.count), ("waiting", Schema.count),
                        ("backend", Schema.enumeration(["redis"], "present for a pool kept in Redis")),
                    ], optional: ["backend"])
            ),
            (
                "Lease",
                Schema.object(
                    [("id", Schema.name()), ("element", Schema.nullable(elementRef))] + leaseFields,
                    optional: ["reason"], "a lease; element is null while the fetch waits")
            ),
            (
                "ElementLease",
                Schema.object(
                    [("id", Schema.name())] + leaseFields, optional: ["reason"],
                    "the lease an element is under")
            ),
            (
                "PoolElement",
                Schema.object(
                    [
                        ("id", Schema.name()),
                        ("data", Schema.any()),
                        ("status", Schema.enumeration(["free", "leased"])),
                        ("lease", Schema.nullable(Schema.ref("ElementLease"))),
                    ] + elementHistory)
            ),
            (
                "PoolCounts",
                Schema.object(
                    [
                        "available", "leased", "waiting", "fetched_total", "recycled_total", "expired_total",
                        "revoked_total", "grown_total",
                        "abandoned_total", "unclaimed_total",
                    ].map {
                        ($0, Schema.count)
                    })
            ),
            (
                "PoolState",
                Schema.object([
                    ("name", Schema.name()),
                    ("config", Schema.ref("PoolConfig")),
                    ("size", Schema.count),
                    ("max_size", maxSize),
                    ("next_expiry_at", Schema.nullable(Schema.timestamp)),
                    ("elements", Schema.array(Schema.ref("PoolElement"), "the first `limit` elements in stable order")),
                    (
                        "waiting_leases",
                        Schema.array(
                            Schema.ref("Lease"),
                            "first page only: the first `limit` waiting fetches, first in line first (status waiting)")
                    ),
                    ("counts", Schema.ref("PoolCounts")),
                    ("next_cursor", Schema.nextCursor),
                ])
            ),
            (
                "ElementRemoval",
                Schema.object(
                    [
                        ("id", Schema.name()),
                        ("data", Schema.any()),
                        ("status", Schema.enumeration(["removed"])),
                        ("lease", Schema.nullable(Schema.ref("ElementLease"))),
                    ] + elementHistory, "the element removed, with the lease a forced removal revoked (or null)")
            ),
        ]
    }

    /// `lease_transitions` and `last_holder` of an element (Kubernetes Lease's
    /// `leaseTransitions` and `holderIdentity`).
    private static var elementHistory: [(String, JSONValue)] {
        [
            (
                "lease_transitions",
                Schema.integer(
                    0...Int.max,
                    "times the element changed holder: leases after its first whose holder differs from the previous "
                        + "lease's (a lease without a holder always counts)")
            ),
            (
                "last_holder",
                Schema.nullable(
                    Schema.string(
                        "the holder of its most recent lease, current or ended; null before the first lease or when "
                            + "that lease named none"))
            ),
        ]
    }

    static var poolPaths: [PathItem] {
        typealias L = PoolConfig.Limits
        let name = nameParameter(.pools, example: "licences")
        let state = Schema.ref("PoolState")
        let lease = Schema.ref("Lease")
        let notLeased = Response.problem(
            409, "the lease ended (or the element is not leased); `current_status` when known",
            codes: ["not_leased"])
        return [
            PathItem("/v1/pools", [listOperation(.pools, id: "listPools", summary: "PoolSummary")]),
            PathItem(
                "/v1/pools/{name}", [name],
                [
                    Operation(
                        "PUT", "createPool", "Create a pool",
                        description:
                            "201 when created; the same config again (after defaults): 200; a different one: 409.",
                        body: RequestBody(
                            schema: Schema.ref("PoolCreateRequest"), required: false,
                            example: .object([("elements", .array([.string("seat-1"), .string("seat-2")]))])),
                        responses: [
                            Response.json(201, "created", state, headers: [Response.tag]),
                            Response.json(200, "exists with the same config", state, headers: [Response.tag]),
                        ]
                            + Response.creationConflicts),
                    Operation(
                        "GET", "getPool", "The pool's elements, leases and counts",
                        query: [
                            Parameter.limit(L.elements, default: 100, "elements"), Parameter.cursor,
                            Parameter.waitForChange,
                        ],
                        headers: [Parameter.ifNoneMatch],
                        responses: Response.read("the state", state) + Response.waitEnds),
                    Operation(
                        "PATCH", "patchPool",
                        "Change lease_seconds, max_waiting, grow, idle_seconds or claim_seconds; effective at once",
                        body: RequestBody(
                            schema: Schema.ref("PoolPatchRequest"), required: false,
                            example: .object([("lease_seconds", .int(120))])),
                        responses: [Response.json(200, "the state after the change", state, headers: [Response.tag])]),
                    deleteOperation(.pools, id: "deletePool"),
                ]),
            PathItem(
                "/v1/pools/{name}/fetch", [name],
                [
                    Operation(
                        "POST", "fetch", "Lease a free element",
                        description: """
                            Nothing free: with wait, fetchers wait in FIFO order; without, or when S passes, 409 \
                            pool_exhausted. Expired leases are recycled before a fetch is refused.
                            """,
                        query: [
                            Parameter.wait("wait for a free element"),
                            Parameter.onDisconnect("the fetch leaves the line"),
                        ],
                        body: RequestBody(
                            schema: Schema.request([
                                (
                                    "id",
                                    Schema.name(
                                        "the lease's id: a retried fetch with it answers the same lease; without one the server makes a 16-digit, time-ordered id"
                                    )
                                ),
                                ("holder", Schema.key("who holds the lease")),
                                (
                                    "lease_seconds",
                                    Schema.seconds(L.seconds, "a shorter lease than the pool's, never longer")
                                ),
                            ]), required: false,
                            example: .object([("id", .string("lease-1")), ("holder", .string("ci-runner"))])),
                        responses: [
                            Response.json(201, "a new lease, active or (with wait) waiting", lease),
                            Response.json(200, "the lease a retried id names", lease),
                            Response.problem(
                                409, "no element is free (`next_expiry_at` when known)", codes: ["pool_exhausted"]),
                            Response.problem(
                                429, "more than max_waiting fetchers wait", codes: ["queue_full"],
                                headers: [Response.retryAfter]),
                        ] + Response.waitEnds)
                ]),
            PathItem(
                "/v1/pools/{name}/recycle", [name],
                [
                    Operation(
                        "POST", "recycle", "Give an element back, by lease or by element",
                        body: RequestBody(
                            schema: Schema.oneOf(
                                [
                                    Schema.request(
                                        [("lease", Schema.name()), ("element", .object([("type", .string("null"))]))],
                                        required: ["lease"]),
                                    Schema.request(
                                        [("element", Schema.name()), ("lease", .object([("type", .string("null"))]))],
                                        required: ["element"]),
                                ], "exactly one of lease and element"), required: true,
                            example: .object([("lease", .string("lease-1"))])),
                        responses: [Response.json(200, "the lease, recycled", lease), notLeased])
                ]),
            PathItem(
                "/v1/pools/{name}/leases/{id}", [name, Parameter.path("id", "the lease's id", example: "lease-1")],
                [
                    Operation(
                        "GET", "getLease", "A lease; with wait, when its status changes",
                        description: """
                            Finished leases stay visible for the last 1000; an unknown or forgotten id, or a waiting \
                            fetch that gave up, is 404.
                            """,
                        query: [Parameter.wait("answer when the lease's status changes")],
                        headers: [Parameter.ifNoneMatch],
                        responses: Response.read("the lease", lease) + Response.waitEnds)
                ]),
            PathItem(
                "/v1/pools/{name}/leases/{id}/extend",
                [name, Parameter.path("id", "the lease's id", example: "lease-1")],
                [
                    Operation(
                        "POST", "extendLease",
                        "Extend a lease: expires_at = the later of now + lease_seconds and the current expiry (never shorter)",
                        body: RequestBody(
                            schema: Schema.request([
                                (
                                    "lease_seconds",
                                    Schema.seconds(L.seconds, "default: the lease's own; never longer than the pool's")
                                )
                            ]), required: false, example: .object([("lease_seconds", .int(60))])),
                        responses: [Response.json(200, "the lease", lease), notLeased])
                ]),
            PathItem(
                "/v1/pools/{name}/elements/{id}", [name, Parameter.path("id", "the element's id", example: "seat-3")],
                [
                    Operation(
                        "PUT", "putElement", "Add an element, or replace an existing one's data",
                        body: RequestBody(
                            schema: Schema.request([("data", Schema.any("anything the holder needs"))]),
                            required: false, example: .object([("data", .object([("seat", .int(3))]))])),
                        responses: [
                            Response.json(201, "added", Schema.ref("PoolElement")),
                            Response.json(200, "its data replaced", Schema.ref("PoolElement")),
                            Response.problem(
                                429, "the pool has the most elements a pool may have", codes: ["too_many_elements"]),
                        ]),
                    Operation(
                        "DELETE", "removeElement", "Remove an element",
                        query: [
                            Parameter.query("force", Schema.bool, "remove a leased element too, revoking its lease")
                        ],
                        responses: [
                            Response.json(
                                200, "the element removed, and the lease it revoked", Schema.ref("ElementRemoval")),
                            Response.problem(409, "the element is leased (use force=true)", codes: ["element_leased"]),
                        ]),
                ]),
        ]
    }
}
