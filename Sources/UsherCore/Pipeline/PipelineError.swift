/// Why a pipeline refused a request. The core decides; the API layer maps each
/// case to a status and a problem code.
package enum PipelineError: Error, Sendable, Equatable {
    /// No such item (404 `not_found`); carries the id asked for, or the filter name.
    case notFound(String)
    /// Consume or release of an item that is not in flight (409 `not_in_flight`);
    /// `current` is its status (`ready`, `delayed`, `dead`, or `in_flight` when
    /// the caller's fence belongs to an earlier delivery).
    case notInFlight(current: String)
    /// Cancel of an item that is in flight (409 `in_flight`): consume or release it.
    case inFlight
    /// No room now (429 `pipeline_full`, with `Retry-After`).
    case full(retryAfterSeconds: Int)
    /// A request field is invalid (400 `bad_request`).
    case invalid(field: String, message: String)
    /// The pipeline was deleted (410 `gone`).
    case gone
    /// Storing it would pass `max_stored_bytes` (507 `storage_full`).
    case storageFull(StorageFull)
    /// The service is shutting down (503 `shutting_down`).
    case shuttingDown
    /// A Redis-backed pipeline's Redis did not answer (503 `backend_unavailable`).
    case backendUnavailable(String)

    /// Wraps a field error from parsing a request.
    package init(_ error: FieldError) {
        self = .invalid(field: error.field, message: error.message)
    }
}
