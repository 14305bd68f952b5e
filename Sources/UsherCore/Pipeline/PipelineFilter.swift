/// One filter of a pipeline (the seed's 切面处理): it runs on each item as the
/// item is handed out and may drop it or change the payload that is delivered.
///
/// ```json
/// {"priority": 10, "when": {"field": "/type", "equals": "heartbeat"}, "action": "drop"}
/// {"priority": 5,  "action": "set", "field": "/seen_by", "value": "usher"}
/// {"priority": 1,  "when": {"field": "/debug", "exists": true}, "action": "remove", "field": "/debug"}
/// ```
package struct PipelineFilter: Sendable, Hashable {
    /// `priority` (0): filters run in descending priority, ties by name.
    package var priority: Int
    /// `when`: the filter applies only when this holds; nil means always.
    package var when: Condition?
    /// `action` with its `field` and `value`.
    package var action: Action

    /// A test on one field of the payload.
    package struct Condition: Sendable, Hashable {
        /// `field`: a JSON Pointer into the payload.
        package var field: JSONPointer
        /// Exactly one of `equals`, `not_equals`, `in`, `exists`.
        package var test: Test

        /// The comparison a condition makes.
        package enum Test: Sendable, Hashable {
            /// The field exists and equals the value (`1` equals `1.0`).
            case equals(JSONValue)
            /// The field is missing or differs from the value.
            case notEquals(JSONValue)
            /// The field exists and equals one of the values.
            case isIn([JSONValue])
            /// The field exists (true) or is missing (false); a `null` member exists.
            case exists(Bool)
        }

        /// Whether the condition holds for `payload`.
        func holds(for payload: JSONValue) -> Bool {
            let v = field.value(in: payload)
            switch test {
            case .equals(let x): return v == x
            case .notEquals(let x): return v != x
            case .isIn(let xs): return v.map { xs.contains($0) } ?? false
            case .exists(let wanted): return (v != nil) == wanted
            }
        }
    }

    /// What a filter does when its condition holds.
    package enum Action: Sendable, Hashable {
        /// The item is never delivered: it leaves the pipeline, counted in `filtered_total`.
        case drop
        /// The delivered payload gets `value` at `field`; missing parent objects are created.
        case set(field: JSONPointer, value: JSONValue)
        /// The delivered payload loses `field` (nothing happens when it is missing).
        case remove(field: JSONPointer)
    }

    /// A filter; no `when` means always.
    package init(priority: Int = 0, when: Condition? = nil, action: Action) {
        self.priority = priority
        self.when = when
        self.action = action
    }

    /// Allowed ranges.
    package enum Limits {
        /// A filter's `priority`.
        package static let priority = -1_000_000...1_000_000
        /// Filters one pipeline may have.
        package static let count = 100
    }

    /// Runs the filter on a payload being handed out; nil means drop.
    package func apply(to payload: JSONValue) -> JSONValue? {
        if let when, !when.holds(for: payload) { return payload }
        switch action {
        case .drop:
            return nil
        case .set(let field, let value):
            var out = payload
            field.set(value, in: &out)
            return out
        case .remove(let field):
            var out = payload
            field.remove(from: &out)
            return out
        }
    }
}

extension PipelineFilter {
    /// Reads `priority, when, action, field, value`. The nested `when` is
    /// finished here; the caller calls `reader.finish()` on the filter itself.
    ///
    /// `null` counts as absent (docs/api.md, Conventions): compare with `null` through `in: [null]`.
    ///
    /// Pointers have at most `limits.maxPointerSegments` segments, and a `set`
    /// may not build a payload deeper than `limits.maxDepth`: the pointer's
    /// segments plus the value's depth, decided here once for every payload.
    package static func parse(_ reader: inout FieldReader, limits: JSONLimits = JSONLimits()) throws(FieldError)
        -> PipelineFilter
    {
        let priority = try reader.int("priority", in: Limits.priority) ?? 0
        var when: Condition?
        if var w = try reader.object("when") {
            when = try parseCondition(&w, limits: limits)
            try w.finish()
        }
        guard let actionName = try reader.string("action") else {
            throw FieldError(field: reader.fieldPath("action"), message: "is required: \"drop\", \"set\" or \"remove\"")
        }
        let fieldText = try reader.string("field")
        let value = reader.value("value")
        let action: Action
        switch actionName {
        case "drop":
            if fieldText != nil {
                throw FieldError(field: reader.fieldPath("field"), message: "is not allowed for \"drop\"")
            }
            if value != nil {
                throw FieldError(field: reader.fieldPath("value"), message: "is not allowed for \"drop\"")
            }
            action = .drop
        case "set":
            let field = try pointer(fieldText, required: true, key: "field", reader: reader, limits: limits)!
            guard let value else {
                throw FieldError(
                    field: reader.fieldPath("value"),
                    message: "is required for \"set\" (null counts as absent; use \"remove\" to delete a field)")
            }
            let built = field.tokens.count + value.depth
            guard built <= limits.maxDepth else {
                throw FieldError(
                    field: reader.fieldPath("value"),
                    message: "would nest the payload \(built) levels deep (\(field.tokens.count) for field, "
                        + "\(value.depth) for value); at most \(limits.maxDepth) (max_json_depth)")
            }
            action = .set(field: field, value: value)
        case "remove":
            let field = try pointer(fieldText, required: true, key: "field", reader: reader, limits: limits)!
            guard !field.tokens.isEmpty else {
                throw FieldError(
                    field: reader.fieldPath("field"), message: "must point inside the payload, not be \"\"")
            }
            if value != nil {
                throw FieldError(field: reader.fieldPath("value"), message: "is not allowed for \"remove\"")
            }
            action = .remove(field: field)
        default:
            throw FieldError(field: reader.fieldPath("action"), message: "must be \"drop\", \"set\" or \"remove\"")
        }
        return PipelineFilter(priority: priority, when: when, action: action)
    }

    private static func parseCondition(_ w: inout FieldReader, limits: JSONLimits) throws(FieldError) -> Condition {
        let field = try pointer(try w.string("field"), required: true, key: "field", reader: w, limits: limits)!
        var tests: [Condition.Test] = []
        if let v = w.value("equals") { tests.append(.equals(v)) }
        if let v = w.value("not_equals") { tests.append(.notEquals(v)) }
        if let vs = try w.array("in") { tests.append(.isIn(vs)) }
        if let b = try w.bool("exists") { tests.append(.exists(b)) }
        if tests.isEmpty, let key = ["equals", "not_equals"].first(where: { w.isNull($0) }) {
            throw FieldError(
                field: w.fieldPath(key), message: "null means absent; compare with null through \"in\": [null]")
        }
        guard tests.count == 1 else {
            throw FieldError(
                field: w.path,
                message: tests.isEmpty
                    ? "needs one of \"equals\", \"not_equals\", \"in\", \"exists\""
                    : "takes exactly one of \"equals\", \"not_equals\", \"in\", \"exists\"")
        }
        return Condition(field: field, test: tests[0])
    }

    private static func pointer(
        _ text: String?, required: Bool, key: String, reader: FieldReader, limits: JSONLimits
    ) throws(FieldError) -> JSONPointer? {
        guard let text else {
            if required {
                throw FieldError(
                    field: reader.fieldPath(key), message: "is required (a JSON Pointer such as \"/type\")")
            }
            return nil
        }
        do {
            return try JSONPointer(parsing: text, maxSegments: limits.maxPointerSegments)
        } catch {
            throw FieldError(field: reader.fieldPath(key), message: error.message)
        }
    }
}
