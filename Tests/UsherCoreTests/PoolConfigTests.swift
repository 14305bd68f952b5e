import Testing

@testable import UsherCore

/// Pool configs, patches and fetch requests as JSON.
@Suite struct PoolConfigTests {
    func parse(_ text: String) throws -> PoolConfig {
        var r = try FieldReader(try JSONValue.parse(text))
        let c = try PoolConfig.parse(&r)
        try r.finish()
        return c
    }

    func patch(_ text: String) throws -> PoolPatch {
        var r = try FieldReader(try JSONValue.parse(text))
        let p = try PoolPatch.parse(&r)
        try r.finish()
        return p
    }

    @Test func defaultsAndBothElementForms() throws {
        #expect(try parse("{}") == PoolConfig(elements: [], leaseSeconds: 60, maxWaiting: 1000, grow: nil))
        let c = try parse(#"{"elements": ["a", {"id": "b", "data": {"k": 1}}, {"id": "c"}], "grow": {"max_size": 9}}"#)
        #expect(
            c.elements == [
                PoolElementSpec(id: "a"), PoolElementSpec(id: "b", data: .object([("k", .int(1))])),
                PoolElementSpec(id: "c"),
            ])
        #expect(c.grow == PoolGrow(maxSize: 9, prefix: "el-"))
    }

    @Test func badConfigsNameTheField() throws {
        let cases: [(String, FieldError)] = [
            (#"{"elements": ["a", "a"]}"#, FieldError(field: "elements[1]", message: "duplicate id 'a'")),
            (
                #"{"elements": ["bad name"]}"#,
                FieldError(
                    field: "elements[0]",
                    message: "'bad name' is not a valid name (^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$)")
            ),
            (
                #"{"elements": [7]}"#,
                FieldError(field: "elements[0]", message: "must be an id or an object {\"id\", \"data\"}")
            ),
            (#"{"elements": [{"data": 1}]}"#, FieldError(field: "elements[0].id", message: "required")),
            (#"{"elements": [{"id": "a", "dta": 1}]}"#, FieldError(field: "elements[0].dta", message: "unknown field")),
            (#"{"grow": {}}"#, FieldError(field: "grow.max_size", message: "required")),
            (
                #"{"grow": {"max_size": 2, "prefix": "-x"}}"#,
                FieldError(
                    field: "grow.prefix",
                    message: "must be at most 100 characters that, followed by a number, make a valid name")
            ),
            (#"{"lease_secs": 5}"#, FieldError(field: "lease_secs", message: "unknown field")),
            (
                #"{"lease_seconds": -5}"#,
                FieldError(field: "lease_seconds", message: "must be 0 or between 0.01 and 31536000")
            ),
        ]
        for (text, error) in cases {
            #expect(throws: error, "\(text)") { try parse(text) }
        }
    }

    @Test func patchesLeaveElementsToTheirOwnRoutes() throws {
        #expect(
            try patch(#"{"lease_seconds": 5, "grow": {"max_size": 3, "prefix": "x"}}"#)
                == PoolPatch(leaseSeconds: 5, grow: PoolGrow(maxSize: 3, prefix: "x")))
        #expect(
            throws: FieldError(
                field: "elements",
                message: "elements change with PUT or DELETE /v1/pools/{name}/elements/{id}, not PATCH")
        ) {
            try patch(#"{"elements": ["a"]}"#)
        }
    }

    @Test func fetchRequests() throws {
        var r = try FieldReader(try JSONValue.parse(#"{"id": "job-1", "holder": "runner 7", "lease_seconds": 30}"#))
        #expect(try FetchRequest.parse(&r) == FetchRequest(id: "job-1", holder: "runner 7", leaseSeconds: 30))
        var bad = try FieldReader(try JSONValue.parse(#"{"holder": ""}"#))
        #expect(throws: FieldError(field: "holder", message: "must be 1 to 256 characters")) {
            try FetchRequest.parse(&bad)
        }
    }
}
