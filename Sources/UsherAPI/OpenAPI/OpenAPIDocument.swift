import HTTPServer
import UsherCore

/// The OpenAPI 3.1 document of every route, served at `GET /openapi.json`.
///
/// Built once from the pieces in this folder: one file per resource kind
/// (its schemas and paths, next to the wire types in `Wire/` that write them),
/// the builders (`OpenAPIBuilders.swift`), and here the document itself, the
/// problem schema and the operations routes. `OpenAPITests` keeps it true:
/// every route the router serves is here and nothing else is, and
/// `scripts/openapi-check` validates it and runs schemathesis against a live
/// server.
enum OpenAPIDocument {
    /// The document.
    static let json: JSONValue = build()

    /// The document as served (compact JSON), made once.
    static let bytes: [UInt8] = Wire.bytes(json)

    /// `GET /openapi.json`: 200 with the document (304 for its `ETag`).
    static let answer = FixedAnswer(contentType: "application/json; charset=utf-8", body: bytes)

    /// Every path, in the order of the document.
    static var paths: [PathItem] {
        operationsPaths + dashboardPaths + queuePaths + windowPaths + poolPaths + pipelinePaths + machinePaths
    }

    /// Every error code the API answers with (the `code` of a problem).
    static let problemCodes = [
        "bad_request", "unauthorized", "origin_not_allowed", "not_found", "method_not_allowed", "host_not_allowed",
        "already_exists", "not_granted", "not_leased", "pool_exhausted", "invalid_transition", "nothing_showing",
        "not_in_flight", "in_flight", "element_leased", "transaction_open", "transaction_ended",
        "gone", "precondition_failed", "payload_too_large", "uri_too_long", "header_fields_too_large",
        "queue_full", "pipeline_full", "too_many_resources", "too_many_elements", "too_many_subscribers",
        "not_implemented", "shutting_down", "internal_error", "storage_full",
    ]

    static func build() -> JSONValue {
        .object([
            ("openapi", .string("3.1.0")),
            (
                "info",
                .object([
                    ("title", .string("Usher")),
                    ("version", .string("1")),
                    ("summary", .string("Turns at limited resources: queues, windows, pools, pipelines and machines")),
                    (
                        "description",
                        .string(
                            """
                            Usher hands out turns at limited resources over HTTP and JSON. Conventions: \
                            request bodies are parsed as JSON whatever their Content-Type says; unknown fields and \
                            unknown query parameters are 400; `null` in an optional field means absent; durations \
                            are seconds in `*_seconds` fields; times are RFC 3339 UTC with milliseconds; \
                            names match `\(Schema.namePattern)`. `wait=S` long-polls for at most \
                            min(S, max_wait_seconds) without holding a server thread. Every grant carries a \
                            `fence` that only grows within its resource. Errors are RFC 9457 problem documents \
                            with a stable `code`. A path that exists without the request's method is 405 \
                            `method_not_allowed` with an `Allow` header; an unknown path is 404; HEAD is \
                            answered wherever GET is. With a token configured (`auth_token` or `USHER_TOKEN`), \
                            every `/v1` route needs `Authorization: Bearer <token>`; /healthz, /readyz, /metrics, \
                            /openapi.json and the dashboard (/, /dashboard.js, /dashboard.css) stay open. \
                            `Prefer: return=minimal` on a route that answers a visitor, window item, lease, \
                            pipeline item or transition answers the same status with no body and the object in \
                            headers: `Location`, `Usher-Status`, `Usher-Fence`, `Usher-Position`, `Usher-Element`, \
                            `Usher-State` (docs/api.md, Minimal answers).
                            """)
                    ),
                    ("license", .object([("name", .string("see the repository"))])),
                ])
            ),
            (
                "tags",
                .array(
                    ["operations", "queues", "windows", "pools", "pipelines", "machines"].map { tag in
                        .object([("name", .string(tag))])
                    })
            ),
            ("security", .array([.object([("bearerAuth", .array([]))])])),
            ("paths", .object(paths.map { ($0.template, $0.json) })),
            (
                "components",
                .object([
                    (
                        "securitySchemes",
                        .object([
                            (
                                "bearerAuth",
                                .object([
                                    ("type", .string("http")),
                                    ("scheme", .string("bearer")),
                                    (
                                        "description",
                                        .string(
                                            """
                                            Needed on /v1 routes only when the server has a token (`auth_token` in the \
                                            config or `USHER_TOKEN`), compared in constant time; otherwise 401 `unauthorized`.
                                            """)
                                    ),
                                ])
                            )
                        ])
                    ),
                    ("responses", .object(Response.components)),
                    (
                        "schemas",
                        .object(
                            commonSchemas + queueSchemas + windowSchemas + poolSchemas
                                + pipelineSchemas + machineSchemas)
                    ),
                ])
            ),
        ])
    }

    // MARK: - Problems and the operations routes

    static var commonSchemas: [(String, JSONValue)] {
        [
            (
                "Problem",
                Schema.object(
                    [
                        (
                            "type",
                            .object([("type", .string("string")), ("pattern", .string("^urn:usher:error:[a-z_]+$"))])
                        ),
                        ("title", Schema.string()),
                        (
                            "status",
                            .object([("type", .string("integer")), ("minimum", .int(400)), ("maximum", .int(599))])
                        ),
                        ("detail", Schema.string()),
                        (
                            "code",
                            Schema.enumeration(problemCodes, "stable machine code; `type` is urn:usher:error:<code>")
                        ),
                        ("field", Schema.string("bad_request: the field or query parameter at fault")),
                        (
                            "current_status",
                            Schema.string(
                                "not_granted, not_leased, not_in_flight, transaction_ended: the status it has now")
                        ),
                        (
                            "retry_after_seconds",
                            Schema.integer(1...Int.max, "queue_full, pipeline_full: as in Retry-After")
                        ),
                        ("state", Schema.name("invalid_transition: the machine's state")),
                        (
                            "allowed_events",
                            Schema.array(Schema.name(), "invalid_transition, and not_found for an unknown event")
                        ),
                        ("version", Schema.integer(nil, "precondition_failed: the machine's current version")),
                        ("transaction", Schema.string("transaction_open: the open transaction's id")),
                        ("event", Schema.name("transaction_open: the open transaction's event")),
                        ("expires_at", Schema.timestamp),
                        ("next_expiry_at", Schema.nullable(Schema.timestamp)),
                        ("element", Schema.name("element_leased: the element")),
                        ("lease", Schema.name("element_leased: its lease")),
                        (
                            "used_bytes",
                            Schema.integer(0...Int.max, "storage_full: the bytes stored when the write was refused")
                        ),
                        ("limit_bytes", Schema.integer(0...Int.max, "storage_full: max_stored_bytes")),
                        ("requested_bytes", Schema.integer(0...Int.max, "storage_full: what the write needed")),
                    ],
                    optional: [
                        "field", "current_status", "retry_after_seconds", "state", "allowed_events", "version",
                        "transaction", "event", "expires_at",
                        "next_expiry_at", "element", "lease", "used_bytes", "limit_bytes", "requested_bytes",
                    ],
                    "RFC 9457 problem details (application/problem+json) with a stable `code`")
            )
        ]
    }

    static var operationsPaths: [PathItem] {
        [
            PathItem(
                "/healthz",
                [
                    Operation(
                        "GET", "health", "Liveness: 200 while the process runs",
                        responses: [
                            Response.json(200, "the process runs", Schema.object([("status", Schema.constant("ok"))]))
                        ],
                        open: true)
                ]),
            PathItem(
                "/readyz",
                [
                    Operation(
                        "GET", "ready", "Readiness: 200 while serving, 503 once shutdown began",
                        responses: [
                            Response.json(200, "serving", Schema.object([("status", Schema.constant("ready"))])),
                            Response.problem(503, "shutting down", codes: ["shutting_down"]),
                        ],
                        open: true)
                ]),
            PathItem(
                "/metrics",
                [
                    Operation(
                        "GET", "metrics", "Prometheus text format 0.0.4 (docs/metrics.md)",
                        responses: [
                            (
                                "200",
                                .object([
                                    (
                                        "description",
                                        .string(
                                            "every metric: HTTP counts and latency by route template, per-resource gauges, counters and wait histograms"
                                        )
                                    ),
                                    (
                                        "content",
                                        .object([
                                            (
                                                "text/plain",
                                                .object([("schema", .object([("type", .string("string"))]))])
                                            )
                                        ])
                                    ),
                                ])
                            )
                        ],
                        open: true)
                ]),
            PathItem(
                "/openapi.json",
                [
                    Operation(
                        "GET", "openapi", "This document",
                        responses: [
                            Response.json(
                                200, "the OpenAPI 3.1 document",
                                .object([
                                    ("type", .string("object")),
                                    ("required", .array([.string("openapi"), .string("paths")])),
                                ])),
                            Response.empty(304, "If-None-Match names the document's ETag"),
                        ],
                        open: true)
                ]),
            PathItem(
                "/v1",
                [
                    Operation(
                        "GET", "listKinds", "The resource kinds with how many resources each has",
                        responses: [
                            Response.json(
                                200, "the kinds, in a fixed order",
                                Schema.object([
                                    (
                                        "kinds",
                                        Schema.array(
                                            Schema.object([
                                                ("kind", Schema.enumeration(ResourceKind.allCases.map(\.rawValue))),
                                                ("path", Schema.string("e.g. /v1/queues")),
                                                ("count", Schema.count),
                                            ]))
                                    )
                                ]))
                        ])
                ]),
            PathItem(
                "/v1/events",
                [
                    Operation(
                        "GET", "events", "Server-Sent Events: every state change (docs/api.md, Event stream)",
                        description:
                            "A stream that does not end: `id`, `event` (the type) and `data` (JSON) per event.",
                        query: [
                            Parameter.query(
                                "kind", Schema.enumeration(["queues", "windows", "pools", "pipelines", "machines"]),
                                "only this kind's events, named as in URLs (the singular is accepted too)"),
                            Parameter.query("name", Schema.string(), "only the events of resources with this name"),
                        ],
                        headers: [
                            .object([
                                ("name", .string("Last-Event-ID")), ("in", .string("header")),
                                ("required", .bool(false)),
                                (
                                    "description",
                                    .string(
                                        "resume after this event id (replayed from the buffer; `event: reset` first when it is older)"
                                    )
                                ),
                                (
                                    "schema",
                                    .object([("type", .string("string")), ("pattern", .string("^[0-9]{1,19}$"))])
                                ),
                            ])
                        ],
                        responses: [
                            (
                                "200",
                                .object([
                                    ("description", .string("the event stream")),
                                    (
                                        "content",
                                        .object([
                                            (
                                                "text/event-stream",
                                                .object([("schema", .object([("type", .string("string"))]))])
                                            )
                                        ])
                                    ),
                                ])
                            ),
                            Response.problem(
                                400, "a bad kind, query parameter or Last-Event-ID", codes: ["bad_request"]),
                            Response.problem(
                                503, "shutting down, or max_event_subscribers streams are open (Retry-After: 1)",
                                codes: ["shutting_down", "too_many_subscribers"]),
                        ])
                ]),
        ]
    }

    /// `/`, `/dashboard.js`, `/dashboard.css`: the dashboard's three files.
    static var dashboardPaths: [PathItem] {
        func file(_ template: String, _ id: String, _ summary: String, _ type: String) -> PathItem {
            PathItem(
                template,
                [
                    Operation(
                        "GET", id, summary,
                        description:
                            "Compiled into the binary; sent with a Content-Security-Policy (docs/dashboard.md).",
                        responses: [
                            (
                                "200",
                                .object([
                                    ("description", .string(summary)),
                                    (
                                        "headers",
                                        .object([
                                            (
                                                "Content-Security-Policy",
                                                .object([
                                                    ("required", .bool(true)),
                                                    ("schema", .object([("type", .string("string"))])),
                                                ])
                                            ),
                                            (
                                                "X-Content-Type-Options",
                                                .object([
                                                    ("required", .bool(true)), ("schema", Schema.constant("nosniff")),
                                                ])
                                            ),
                                        ])
                                    ),
                                    (
                                        "content",
                                        .object([(type, .object([("schema", .object([("type", .string("string"))]))]))])
                                    ),
                                ])
                            ),
                            Response.empty(304, "If-None-Match names the file's ETag"),
                        ],
                        open: true)
                ])
        }
        return [
            file(
                "/", "dashboard", "The live dashboard: every resource, grouped by kind (docs/dashboard.md)", "text/html"
            ),
            file("/dashboard.js", "dashboardScript", "The dashboard's script", "text/javascript"),
            file("/dashboard.css", "dashboardStyle", "The dashboard's style sheet", "text/css"),
        ]
    }

    // MARK: - Shared by every kind

    /// `GET /v1/{kind}`: `{"<kind>": [summary…]}` sorted by name.
    static func listOperation(_ kind: ResourceKind, id: String, summary: String) -> Operation {
        Operation(
            "GET", id, "Every \(kind.noun) with a summary, sorted by name, a page at a time",
            query: [Parameter.limit(0...1_000_000, default: 100, kind.rawValue), Parameter.cursor],
            headers: [Parameter.ifNoneMatch],
            responses: Response.read(
                "the \(kind.rawValue)",
                Schema.object([
                    (kind.rawValue, Schema.array(Schema.ref(summary))),
                    ("next_cursor", Schema.nextCursor),
                ])))
    }

    /// `DELETE /v1/{kind}/{name}`: 204; requests waiting on it get 410.
    static func deleteOperation(_ kind: ResourceKind, id: String) -> Operation {
        Operation(
            "DELETE", id, "Delete the \(kind.noun); requests waiting on it get 410 gone",
            responses: [Response.empty(204, "deleted")])
    }

    /// The `{name}` of a resource of `kind`.
    static func nameParameter(_ kind: ResourceKind, example: String) -> JSONValue {
        Parameter.path("name", "the \(kind.noun)'s name", example: example)
    }
}
