import UsherCore

// How a pipeline's domain errors become HTTP problems.

extension APIError {
    /// A pipeline operation that failed.
    ///
    /// - Parameter subject: what a `.notFound` name refers to: `"item"`, or
    ///   `"filter"` on the filter routes.
    init(_ error: PipelineError, subject: String = "item") {
        switch error {
        case .notFound(let name):
            self = .notFound("\(subject) \(name) not found")
        case .notInFlight(let current):
            self = .conflict(
                "not_in_flight", "Not in flight",
                "the item is not in flight (it is \(current)); take it first, or a later delivery holds it",
                extra: [("current_status", .string(current))])
        case .inFlight:
            self = .conflict(
                "in_flight", "In flight",
                "the item is in flight: consume or release it instead")
        case .full(let retryAfter):
            self = .tooMany(
                "pipeline_full", "Pipeline is full",
                "the pipeline holds capacity items (ready, delayed and in flight)", retryAfter: retryAfter)
        case .invalid(let field, let message):
            self = .badRequest(field.isEmpty ? message : "\(field): \(message)", field: field.isEmpty ? nil : field)
        case .storageFull(let full):
            self = .storageFull(full)
        case .gone:
            self = .gone("the pipeline was deleted")
        case .shuttingDown:
            self = .shuttingDown()
        case .backendUnavailable(let why):
            self = .backendUnavailable(why)
        }
    }
}
