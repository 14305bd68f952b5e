import Testing

@testable import UsherCore

/// Window config and show requests as JSON.
@Suite struct WindowConfigTests {
    func parse(_ text: String) throws -> WindowConfig {
        var r = try FieldReader(try JSONValue.parse(text))
        let c = try WindowConfig.parse(&r)
        try r.finish()
        return c
    }

    @Test func defaultsAndJSON() throws {
        let c = try parse("{}")
        #expect(c == WindowConfig(maxWaiting: 1000, displaySeconds: 0, dedup: .off))
        #expect(
            try parse(#"{"display_seconds": 2.5, "dedup": "off"}"#) == WindowConfig(displaySeconds: 2.5, dedup: .off))
    }

    @Test func badFieldsAreNamed() throws {
        #expect(throws: FieldError(field: "display_second", message: "unknown field")) {
            try parse(#"{"display_second": 1}"#)
        }
        #expect(throws: FieldError(field: "dedup", message: "must be \"key\", \"adjacent\" or \"off\"")) {
            try parse(#"{"dedup": "maybe"}"#)
        }
        #expect(throws: FieldError(field: "display_seconds", message: "must be 0 or between 0.01 and 31536000")) {
            try parse(#"{"display_seconds": -1}"#)
        }
    }

    @Test func showRequests() throws {
        var r = try FieldReader(
            try JSONValue.parse(
                #"{"id": "a", "key": "k", "title": "T", "message": "M", "payload": [1], "priority": 2, "display_seconds": 0}"#
            ))
        let s = try ShowRequest.parse(&r)
        try r.finish()
        #expect(
            s
                == ShowRequest(
                    id: "a", key: "k", title: "T", message: "M", payload: .array([.int(1)]), priority: 2,
                    displaySeconds: 0))
        var bad = try FieldReader(try JSONValue.parse(#"{"titel": "x"}"#))
        _ = try ShowRequest.parse(&bad)
        #expect(throws: FieldError(field: "titel", message: "unknown field")) { try bad.finish() }
    }
}
