/// What a `PATCH` changed: each field whose value differs, by its wire name,
/// with the new value (the `updated` event's data).
package struct ConfigChanges: Sendable, Equatable {
    private(set) var fields: [(field: String, value: JSONValue)] = []

    package static func == (a: ConfigChanges, b: ConfigChanges) -> Bool {
        a.fields.elementsEqual(b.fields) { $0.field == $1.field && $0.value == $1.value }
    }

    /// Notes `field` when `after` differs from `before`.
    mutating func compare<T: Equatable>(_ field: String, _ before: T, _ after: T, _ value: (T) -> JSONValue) {
        if before != after { fields.append((field, value(after))) }
    }

    /// Seconds as the config shows them: whole ones as an integer.
    static func seconds(_ s: Double) -> JSONValue {
        s.rounded() == s && abs(s) < 9e15 ? .int(Int(s)) : .double(s)
    }
}

extension EventLog {
    /// `updated` for a resource whose `PATCH` changed something; nothing otherwise.
    package func emitUpdated(kind: String, name: String, _ changes: ConfigChanges) {
        guard isRecording, !changes.fields.isEmpty else { return }
        emit(ResourceEvent.Draft(kind: kind, name: name, type: "updated", subject: .changes(changes.fields)))
    }
}
