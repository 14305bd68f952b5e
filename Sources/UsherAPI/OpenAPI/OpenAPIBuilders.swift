import UsherCore

// Small builders for the OpenAPI document: JSON Schema pieces, parameters,
// responses, operations and paths, so that no shape is written out twice.
// Ranges come from the core's `Limits`, so the document follows them.

extension OpenAPIDocument {
    /// JSON Schema (2020-12, as OpenAPI 3.1 uses it) pieces.
    enum Schema {
        /// `{"$ref": "#/components/schemas/<name>"}`.
        static func ref(_ name: String) -> JSONValue {
            .object([("$ref", .string("#/components/schemas/\(name)"))])
        }

        /// A string, with an optional description.
        static func string(_ description: String? = nil) -> JSONValue {
            with(description, .object([("type", .string("string"))]))
        }

        /// Names of resources, visitors, items, leases, elements, filters, states and events.
        static let namePattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"

        /// A name (`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`).
        static func name(_ description: String? = nil) -> JSONValue {
            with(description, .object([("type", .string("string")), ("pattern", .string(namePattern))]))
        }

        /// Keys, actions and holders: 1–256 characters.
        static func key(_ description: String? = nil) -> JSONValue {
            with(description, .object([("type", .string("string")), ("minLength", .int(1)), ("maxLength", .int(256))]))
        }

        /// An RFC 3339 UTC time with milliseconds.
        static let timestamp: JSONValue = .object([
            ("type", .string("string")), ("format", .string("date-time")),
            ("description", .string("RFC 3339, UTC, milliseconds")),
        ])

        /// Any JSON value, `null` included.
        static func any(_ description: String = "any JSON value") -> JSONValue {
            .object([("description", .string(description))])
        }

        /// Any JSON value but `null` (where `null` would mean absent).
        static func nonNull(_ description: String) -> JSONValue {
            .object([("description", .string(description)), ("not", .object([("type", .string("null"))]))])
        }

        static let bool: JSONValue = .object([("type", .string("boolean"))])

        /// An integer, within `range` when given.
        static func integer(_ range: ClosedRange<Int>? = nil, _ description: String? = nil) -> JSONValue {
            var m: [(String, JSONValue)] = [("type", .string("integer"))]
            if let range { m += [("minimum", .int(range.lowerBound)), ("maximum", .int(range.upperBound))] }
            return with(description, .object(m))
        }

        /// A count or total: an integer >= 0.
        static let count: JSONValue = .object([("type", .string("integer")), ("minimum", .int(0))])

        /// A fencing token (or a machine's version): an integer that only grows.
        static let fence: JSONValue = .object([
            ("type", .string("integer")),
            (
                "description",
                .string("fencing token: only grows within its resource; starts at its creation time in microseconds")
            ),
        ])

        /// Seconds as a JSON number (fractions allowed) within `range`, and
        /// not between 0 and `Durations.minimumSeconds` (0 itself is allowed).
        static func seconds(_ range: ClosedRange<Double>, _ description: String? = nil) -> JSONValue {
            with(
                description,
                .object([
                    ("type", .string("number")), ("minimum", number(range.lowerBound)),
                    ("maximum", number(range.upperBound)),
                    (
                        "not",
                        .object([("exclusiveMinimum", .int(0)), ("exclusiveMaximum", number(Durations.minimumSeconds))])
                    ),
                ]))
        }

        /// Seconds in a response: a number >= 0.
        static let secondsOut: JSONValue = .object([("type", .string("number")), ("minimum", .int(0))])

        /// An array of `items`.
        static func array(_ items: JSONValue, maxItems: Int? = nil, _ description: String? = nil) -> JSONValue {
            var m: [(String, JSONValue)] = [("type", .string("array")), ("items", items)]
            if let maxItems { m.append(("maxItems", .int(maxItems))) }
            return with(description, .object(m))
        }

        /// One of the given strings.
        static func enumeration(_ values: [String], _ description: String? = nil) -> JSONValue {
            with(description, .object([("type", .string("string")), ("enum", .array(values.map(JSONValue.string)))]))
        }

        /// Exactly this string.
        static func constant(_ value: String) -> JSONValue {
            .object([("type", .string("string")), ("const", .string(value))])
        }

        /// `schema` or `null`.
        /// `next_cursor`: where the next page starts; null on the last page.
        static var nextCursor: JSONValue {
            with(
                "pass as cursor for the next page (the page ended at limit or at max_response_bytes); null on the last page",
                nullable(.object([("type", .string("string"))])))
        }

        static func nullable(_ schema: JSONValue) -> JSONValue {
            guard case .object(var m) = schema else { return schema }
            if let i = m.firstIndex(where: { $0.0 == "type" }), case .string(let type) = m[i].1,
                !m.contains(where: { $0.0 == "enum" || $0.0 == "const" })
            {
                if type == "null" { return schema }
                m[i].1 = .array([.string(type), .string("null")])
                return .object(m)
            }
            return .object([("anyOf", .array([schema, .object([("type", .string("null"))])]))])
        }

        /// Exactly one of `schemas`.
        static func oneOf(_ schemas: [JSONValue], _ description: String? = nil) -> JSONValue {
            with(description, .object([("oneOf", .array(schemas))]))
        }

        /// A response object: every property is always present unless listed in
        /// `optional`, and there are no others.
        static func object(
            _ properties: [(String, JSONValue)], optional: Set<String> = [], _ description: String? = nil
        )
            -> JSONValue
        {
            closedObject(properties, required: properties.map(\.0).filter { !optional.contains($0) }, description)
        }

        /// A request body object: only `required` must be present; every other
        /// property may also be `null` (null means absent); unknown properties
        /// are rejected with 400, as the server does.
        static func request(
            _ properties: [(String, JSONValue)], required: Set<String> = [], _ description: String? = nil
        )
            -> JSONValue
        {
            let props = properties.map { (key, schema) in (key, required.contains(key) ? schema : nullable(schema)) }
            return closedObject(props, required: properties.map(\.0).filter { required.contains($0) }, description)
        }

        /// An object keyed by names, each value a `value`.
        static func map(_ value: JSONValue, maxProperties: Int? = nil, _ description: String? = nil) -> JSONValue {
            var m: [(String, JSONValue)] = [
                ("type", .string("object")),
                ("propertyNames", .object([("pattern", .string(namePattern))])),
                ("additionalProperties", value),
            ]
            if let maxProperties { m.append(("maxProperties", .int(maxProperties))) }
            return with(description, .object(m))
        }

        private static func closedObject(
            _ properties: [(String, JSONValue)], required: [String], _ description: String?
        )
            -> JSONValue
        {
            var m: [(String, JSONValue)] = [("type", .string("object"))]
            if let description { m.append(("description", .string(description))) }
            m.append(("properties", .object(properties)))
            if !required.isEmpty { m.append(("required", .array(required.map(JSONValue.string)))) }
            m.append(("additionalProperties", .bool(false)))
            return .object(m)
        }

        /// `schema` with a description added (when there is one).
        static func with(_ description: String?, _ schema: JSONValue) -> JSONValue {
            guard let description, case .object(let m) = schema else { return schema }
            return .object(m + [("description", .string(description))])
        }

        /// A whole number as an integer (`30`, not `30.0`).
        static func number(_ d: Double) -> JSONValue {
            d.rounded() == d && abs(d) < 9e15 ? .int(Int(d)) : .double(d)
        }
    }

    /// Query, header and path parameters.
    enum Parameter {
        /// A query parameter.
        static func query(_ name: String, _ schema: JSONValue, _ description: String) -> JSONValue {
            .object([
                ("name", .string(name)), ("in", .string("query")), ("required", .bool(false)),
                ("description", .string(description)), ("schema", schema),
            ])
        }

        /// `wait=S`: the long-poll, capped at `max_wait_seconds`.
        static func wait(_ what: String) -> JSONValue {
            query(
                "wait", .object([("type", .string("number")), ("minimum", .int(0))]),
                "long-poll: \(what); at most S seconds, capped at the server's max_wait_seconds (default 30); 0 = answer at once"
            )
        }

        /// `If-None-Match` on a read: the tags the client holds.
        static let ifNoneMatch: JSONValue = .object([
            ("name", .string("If-None-Match")), ("in", .string("header")), ("required", .bool(false)),
            (
                "description",
                .string("the ETags the client holds (\"7\", W/\"7\", a list, or *): 304 when one is current")
            ),
            ("schema", .object([("type", .string("string"))])),
        ])

        /// `wait=S` on a resource's state: the next change.
        static let waitForChange = wait(
            "answer when the state's ETag differs from the one If-None-Match names (without one, from the state's when the request came)"
        )

        /// `on_disconnect=withdraw|keep`: what a client that hangs up keeps.
        static func onDisconnect(_ what: String) -> JSONValue {
            query(
                "on_disconnect", Schema.enumeration(["withdraw", "keep"]),
                """
                withdraw (default): when the client hangs up while the request waits, \(what); an answer that \
                could not be handed to the client is undone (reason undelivered), unless a retry with the same id \
                named it first. keep: a hang-up only ends the wait
                """)
        }

        /// `on_timeout=keep|cancel`: what a wait that ends before a grant leaves.
        static let onTimeout = query(
            "on_timeout", Schema.enumeration(["keep", "cancel"]),
            """
            keep (default): a visitor still waiting or delayed when the wait ends stays in line. cancel (a \
            try-acquire): it is cancelled, reason timeout, and the answer (200) shows it so; without wait (or \
            wait=0) it tries once: granted at once or cancelled at once
            """)

        /// `limit=N`: how many entries a state lists.
        static func limit(_ range: ClosedRange<Int>, default value: Int, _ what: String) -> JSONValue {
            query(
                "limit",
                .object([
                    ("type", .string("integer")), ("minimum", .int(range.lowerBound)),
                    ("maximum", .int(range.upperBound)),
                    ("default", .int(value)),
                ]), "how many \(what) to list")
        }

        /// `cursor=C`: where a list resumes (a `next_cursor` from the page before).
        static let cursor = query(
            "cursor", .object([("type", .string("string"))]),
            "resume after the previous page: its next_cursor")

        /// A path parameter: a name, with an example.
        static func path(_ name: String, _ description: String, example: String, not excluded: String? = nil)
            -> JSONValue
        {
            var schema = Schema.name()
            if let excluded, case .object(let m) = schema {
                schema = .object(m + [("not", .object([("const", .string(excluded))]))])
            }
            return .object([
                ("name", .string(name)), ("in", .string("path")), ("required", .bool(true)),
                ("description", .string(description)), ("schema", schema), ("example", .string(example)),
            ])
        }
    }

    /// Responses.
    enum Response {
        /// A JSON response.
        static func json(
            _ status: Int, _ description: String, _ schema: JSONValue,
            headers: [(String, JSONValue)] = []
        ) -> (String, JSONValue) {
            var m: [(String, JSONValue)] = [("description", .string(description))]
            if !headers.isEmpty { m.append(("headers", .object(headers))) }
            m.append(("content", .object([("application/json", .object([("schema", schema)]))])))
            return (String(status), .object(m))
        }

        /// A response without a body.
        static func empty(_ status: Int, _ description: String, headers: [(String, JSONValue)] = [])
            -> (String, JSONValue)
        {
            var fields: [(String, JSONValue)] = [("description", .string(description))]
            if !headers.isEmpty { fields.append(("headers", .object(headers))) }
            return (String(status), .object(fields))
        }

        /// A problem document (`application/problem+json`) whose `code` is one of `codes`.
        static func problem(
            _ status: Int, _ description: String, codes: [String],
            headers: [(String, JSONValue)] = []
        ) -> (String, JSONValue) {
            let schema: JSONValue = .object([
                (
                    "allOf",
                    .array([
                        Schema.ref("Problem"),
                        .object([
                            (
                                "properties",
                                .object([
                                    ("status", .object([("const", .int(status))])),
                                    ("code", .object([("enum", .array(codes.map(JSONValue.string)))])),
                                ])
                            )
                        ]),
                    ])
                )
            ])
            var m: [(String, JSONValue)] = [("description", .string(description))]
            if !headers.isEmpty { m.append(("headers", .object(headers))) }
            m.append(("content", .object([("application/problem+json", .object([("schema", schema)]))])))
            return (String(status), .object(m))
        }

        /// A response header.
        static func header(_ name: String, _ schema: JSONValue, _ description: String, required: Bool = false)
            -> (String, JSONValue)
        {
            (name, .object([("description", .string(description)), ("required", .bool(required)), ("schema", schema)]))
        }

        /// `ETag: "<version>"`.
        static let etag = header(
            "ETag", .object([("type", .string("string")), ("pattern", .string("^\"-?[0-9]+\"$"))]),
            "the machine's version as a quoted strong tag, e.g. \"7\"", required: true)

        /// `ETag` of a state or object read: its hash; weak while it shows estimates.
        static let tag = header(
            "ETag", .object([("type", .string("string")), ("pattern", .string("^(W/)?\"[0-9a-f]+\"$"))]),
            "the representation's tag (docs/api.md, Conditional GETs); weak (W/) while it shows wait estimates",
            required: true)

        /// 304 to a read whose `If-None-Match` names the current tag.
        static let notModified = empty(304, "If-None-Match names the current ETag", headers: [tag])

        /// A read's 200, with its `ETag`, and its 304.
        static func read(_ description: String, _ schema: JSONValue) -> [(String, JSONValue)] {
            [json(200, description, schema, headers: [tag]), notModified]
        }

        /// `Retry-After: <seconds>` on 429 answers where waiting can help.
        static let retryAfter = header(
            "Retry-After", .object([("type", .string("integer")), ("minimum", .int(1))]),
            "seconds after which a retry may succeed", required: true)

        /// 409 `already_exists` and 429 `too_many_resources`: what `PUT` of a resource can meet.
        static let creationConflicts: [(String, JSONValue)] = [
            problem(
                409, "a different config exists under this name (change it with PATCH, or delete it first)",
                codes: ["already_exists"]),
            problem(429, "max_resources resources exist already", codes: ["too_many_resources"]),
        ]

        /// 410 `gone` and 503 `shutting_down`: what a long-poll can meet.
        static let waitEnds: [(String, JSONValue)] = [shared("410", "Gone"), shared("503", "ShuttingDown")]

        /// 405 `method_not_allowed` for an item id that names a route of its own.
        static func methodNotAllowed(_ description: String) -> (String, JSONValue) {
            problem(
                405, description, codes: ["method_not_allowed"],
                headers: [
                    header(
                        "Allow", .object([("type", .string("string"))]), "the methods the path allows", required: true)
                ])
        }

        /// A reference to one of `components`, answered as `status`.
        static func shared(_ status: String, _ name: String) -> (String, JSONValue) {
            (status, .object([("$ref", .string("#/components/responses/\(name)"))]))
        }

        /// The responses many operations share, by name (`components/responses`).
        static let components: [(String, JSONValue)] = [
            (
                "BadRequest",
                problem(
                    400,
                    "malformed JSON, a wrong type, an unknown field or query parameter, a bad name, a number out of range (`field` names it); or a malformed request (a path that is not canonical, a NUL or control character, ambiguous framing), answered before routing with the connection closed",
                    codes: ["bad_request"]
                ).1
            ),
            (
                "Unauthorized",
                problem(
                    401, "a token is configured and the request's Authorization: Bearer is missing or wrong",
                    codes: ["unauthorized"],
                    headers: [
                        header(
                            "WWW-Authenticate", .object([("const", .string("Bearer"))]), "the scheme", required: true)
                    ]
                ).1
            ),
            (
                "OriginNotAllowed",
                problem(
                    403, "the request's Origin is neither the server's own nor in allowed_origins",
                    codes: ["origin_not_allowed"]
                ).1
            ),
            (
                "HostNotAllowed",
                problem(
                    421, "the Host is not one this server answers to (allowed_hosts)", codes: ["host_not_allowed"]
                ).1
            ),
            (
                "URITooLong",
                problem(
                    414, "more query parameters than max_query_parameters; the connection is closed",
                    codes: ["uri_too_long"]
                ).1
            ),
            (
                "HeaderFieldsTooLarge",
                problem(
                    431,
                    "more header lines than max_request_headers, or a head too large for connection_memory_bytes; the connection is closed",
                    codes: ["header_fields_too_large"]
                ).1
            ),
            (
                "NotImplemented",
                problem(
                    501, "a Transfer-Encoding other than chunked; the connection is closed", codes: ["not_implemented"]
                ).1
            ),
            (
                "NotFound",
                problem(404, "no such resource (or visitor, item, lease, element, filter)", codes: ["not_found"]).1
            ),
            (
                "PayloadTooLarge",
                problem(
                    413, "the body is larger than max_body_bytes (default 65536); the connection is closed",
                    codes: ["payload_too_large"]
                ).1
            ),
            (
                "StorageFull",
                problem(
                    507, "storing this would pass max_stored_bytes; `used_bytes`, `limit_bytes`, `requested_bytes`",
                    codes: ["storage_full"]
                ).1
            ),
            ("Gone", problem(410, "the resource was deleted while the request waited", codes: ["gone"]).1),
            (
                "ShuttingDown",
                problem(
                    503, "the server is shutting down (the answer to every parked long-poll then)",
                    codes: ["shutting_down"],
                    headers: [header("Connection", .object([("const", .string("close"))]), "the connection is closed")]
                ).1
            ),
        ]
    }

    /// A request body.
    struct RequestBody {
        /// The body's schema.
        var schema: JSONValue
        /// False when an empty body is allowed (every field optional).
        var required: Bool
        /// An example body.
        var example: JSONValue?
    }

    /// One operation: a method on a path.
    struct Operation {
        var method: String
        var id: String
        var summary: String
        var description: String?
        var query: [JSONValue] = []
        var headers: [JSONValue] = []
        var body: RequestBody?
        var responses: [(String, JSONValue)]
        /// True for routes outside `/v1` (no bearer token, ever).
        var open = false

        init(
            _ method: String, _ id: String, _ summary: String, description: String? = nil,
            query: [JSONValue] = [], headers: [JSONValue] = [], body: RequestBody? = nil,
            responses: [(String, JSONValue)], open: Bool = false
        ) {
            self.method = method
            self.id = id
            self.summary = summary
            self.description = description
            self.query = query
            self.headers = headers
            self.body = body
            self.responses = responses
            self.open = open
        }

        /// The operation object. Adds what every operation under `template`
        /// can answer: 400 (a malformed request), 403, 414, 421 and 431 (the HTTP edge),
        /// 401 under `/v1`, 404 for a path with parameters, 413 and 501 with
        /// a body; responses sorted by status.
        func json(template: String, tag: String) -> JSONValue {
            var responses = self.responses
            func addMissing(_ response: (String, JSONValue)) {
                if !responses.contains(where: { $0.0 == response.0 }) { responses.append(response) }
            }
            addMissing(Response.shared("400", "BadRequest"))
            addMissing(Response.shared("403", "OriginNotAllowed"))
            addMissing(Response.shared("414", "URITooLong"))
            addMissing(Response.shared("421", "HostNotAllowed"))
            addMissing(Response.shared("431", "HeaderFieldsTooLarge"))
            if template.hasPrefix("/v1") { addMissing(Response.shared("401", "Unauthorized")) }
            if template.contains("{") { addMissing(Response.shared("404", "NotFound")) }
            if body != nil {
                addMissing(Response.shared("413", "PayloadTooLarge"))
                addMissing(Response.shared("501", "NotImplemented"))
                if template.hasPrefix("/v1") { addMissing(Response.shared("507", "StorageFull")) }
            }
            responses.sort { $0.0 < $1.0 }

            var m: [(String, JSONValue)] = [
                ("operationId", .string(id)),
                ("summary", .string(summary)),
            ]
            if let description { m.append(("description", .string(description))) }
            m.append(("tags", .array([.string(tag)])))
            if !(query + headers).isEmpty { m.append(("parameters", .array(query + headers))) }
            if let body {
                var media: [(String, JSONValue)] = [("schema", body.schema)]
                if let example = body.example { media.append(("example", example)) }
                m.append(
                    (
                        "requestBody",
                        .object([
                            ("required", .bool(body.required)),
                            (
                                "description",
                                .string(
                                    body.required
                                        ? "JSON (parsed as JSON whatever the Content-Type says)"
                                        : "JSON (parsed as JSON whatever the Content-Type says); may be empty: every field is optional"
                                )
                            ),
                            ("content", .object([("application/json", .object(media))])),
                        ])
                    ))
            }
            m.append(("responses", .object(responses)))
            if open { m.append(("security", .array([]))) }
            return .object(m)
        }
    }

    /// A path template with its parameters and operations.
    struct PathItem {
        /// The router's template, e.g. `/v1/queues/{name}/visitors/{id}`.
        var template: String
        /// Every `{parameter}` of the template, as parameter objects.
        var parameters: [JSONValue]
        var operations: [Operation]

        init(_ template: String, _ parameters: [JSONValue], _ operations: [Operation]) {
            self.template = template
            self.parameters = parameters
            self.operations = operations
        }

        /// A path without parameters.
        init(_ template: String, _ operations: [Operation]) {
            self.init(template, [], operations)
        }

        /// The tag: the kind (`queues`, …) under `/v1`, else `operations`.
        var tag: String {
            let segments = template.split(separator: "/")
            return segments.count >= 2 && segments[0] == "v1" ? String(segments[1]) : "operations"
        }

        /// The path item object.
        var json: JSONValue {
            var m: [(String, JSONValue)] = []
            if !parameters.isEmpty { m.append(("parameters", .array(parameters))) }
            for op in operations { m.append((op.method.lowercased(), op.json(template: template, tag: tag))) }
            return .object(m)
        }
    }
}
