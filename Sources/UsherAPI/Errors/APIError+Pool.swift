import UsherCore

extension APIError {
    /// A pool operation that failed.
    init(_ error: PoolError) {
        switch error {
        case .notFound(let what):
            self = .notFound("\(what) not found")
        case .exhausted(let next):
            self = .conflict(
                "pool_exhausted", "Pool exhausted", error.description,
                extra: [("next_expiry_at", next.map { .string($0.rfc3339) } ?? .null)])
        case .notLeased(let detail, let status):
            self = .conflict(
                "not_leased", "Not leased", detail,
                extra: status.map { [("current_status", JSONValue.string($0.rawValue))] } ?? [])
        case .elementLeased(let element, let lease):
            self = .conflict(
                "element_leased", "Element leased", error.description,
                extra: [("element", .string(element)), ("lease", .string(lease))])
        case .full(let retryAfter):
            self = .tooMany(
                "queue_full", "Queue is full", "the pool's waiting line is at max_waiting", retryAfter: retryAfter)
        case .tooManyElements:
            self = .tooMany("too_many_elements", "Too many elements", error.description, retryAfter: nil)
        case .invalid(let field, let message):
            self = .badRequest(field.isEmpty ? message : "\(field): \(message)", field: field.isEmpty ? nil : field)
        case .storageFull(let full):
            self = .storageFull(full)
        case .gone:
            self = .gone("the pool was deleted")
        case .shuttingDown:
            self = .shuttingDown()
        case .backendUnavailable(let why):
            self = .backendUnavailable(why)
        }
    }
}
