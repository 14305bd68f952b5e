import UsherCore

// How the core's domain errors become HTTP problems: the one mapping table.

extension APIError {
    /// A field that failed validation.
    init(_ error: FieldError) {
        self = .badRequest(error.description, field: error.field.isEmpty ? nil : error.field)
    }

    /// A body that is not JSON, or nests deeper than `max_json_depth`.
    init(_ error: JSONSyntaxError) {
        self = .badRequest(error.message, field: error.field)
    }

    /// A queue operation that failed.
    init(_ error: QueueError) {
        switch error {
        case .notFound(let what):
            self = .notFound("\(what) not found")
        case .notGranted(let current):
            self = .conflict(
                "not_granted", "Not granted",
                "the visitor does not hold a slot (it is \(current.rawValue))",
                extra: [("current_status", .string(current.rawValue))])
        case .full(let retryAfter):
            self = .tooMany("queue_full", "Queue is full", "the waiting line is at max_waiting", retryAfter: retryAfter)
        case .invalid(let field, let message):
            self = .badRequest(field.isEmpty ? message : "\(field): \(message)", field: field.isEmpty ? nil : field)
        case .storageFull(let full):
            self = .storageFull(full)
        case .gone:
            self = .gone("the queue was deleted")
        case .shuttingDown:
            self = .shuttingDown()
        case .backendUnavailable(let why):
            self = .backendUnavailable(why)
        }
    }
}

extension APIError {
    /// A machine operation that failed.
    init(_ error: MachineError) {
        switch error {
        case .unknownEvent(let allowed):
            self = .notFound("the machine's definition has no such event")
            extra = [("allowed_events", .array(allowed.map(JSONValue.string)))]
        case .invalidTransition(let state, let allowed):
            self = .conflict(
                "invalid_transition", "Invalid transition",
                "the event is not allowed in state \(state)",
                extra: [("state", .string(state)), ("allowed_events", .array(allowed.map(JSONValue.string)))])
        case .transactionOpen(let open):
            self = .conflict(
                "transaction_open", "Transaction open",
                "transaction \(open.id) (event \(open.event)) is open until \(open.expiresAt.rfc3339): commit or abort it first",
                extra: [
                    ("transaction", .string(open.id)), ("event", .string(open.event)),
                    ("expires_at", .string(open.expiresAt.rfc3339)),
                ])
        case .transactionEnded(let outcome):
            self = .conflict(
                "transaction_ended", "Transaction ended", "the transaction has already ended (\(outcome.rawValue))",
                extra: [("current_status", .string(outcome.rawValue))])
        case .unknownTransaction:
            self = .notFound("no such transaction")
        case .versionMismatch(let current):
            self = .preconditionFailed(
                "If-Match does not match the machine's version \(current)",
                extra: [("version", .int(Int(current)))])
        case .storageFull(let full):
            self = .storageFull(full)
        case .gone:
            self = .gone("the machine was deleted")
        case .shuttingDown:
            self = .shuttingDown()
        case .backendUnavailable(let why):
            self = .backendUnavailable(why)
        case .invalid(let field, let message):
            self = .badRequest(field.isEmpty ? message : "\(field): \(message)", field: field.isEmpty ? nil : field)
        }
    }
}
