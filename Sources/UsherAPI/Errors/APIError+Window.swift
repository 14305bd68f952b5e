import UsherCore

extension APIError {
    /// A window operation that failed.
    init(_ error: WindowError) {
        switch error {
        case .notFound(let what):
            self = .notFound("\(what) not found")
        case .nothingShowing:
            self = .conflict(
                "nothing_showing", "Nothing showing", "the window shows nothing; pass an id to dismiss a queued item")
        case .full(let retryAfter):
            self = .tooMany(
                "queue_full", "Queue is full", "the window's queue is at max_waiting", retryAfter: retryAfter)
        case .invalid(let field, let message):
            self = .badRequest(field.isEmpty ? message : "\(field): \(message)", field: field.isEmpty ? nil : field)
        case .storageFull(let full):
            self = .storageFull(full)
        case .gone:
            self = .gone("the window was deleted")
        case .shuttingDown:
            self = .shuttingDown()
        case .backendUnavailable(let why):
            self = .backendUnavailable(why)
        }
    }
}
