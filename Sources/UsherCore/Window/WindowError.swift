/// What a window operation can fail with; the API layer maps each case to a
/// status and problem code.
package enum WindowError: Error, Sendable, Equatable, CustomStringConvertible {
    /// 404: no such item.
    case notFound(String)
    /// 409 `nothing_showing`: a dismiss without `id` while nothing is shown.
    case nothingShowing
    /// 429 `queue_full`, with a `Retry-After` in whole seconds.
    case full(retryAfterSeconds: Int)
    /// 400 `bad_request` naming the field.
    case invalid(field: String, message: String)
    /// 507 `storage_full`: storing it would pass `max_stored_bytes`.
    case storageFull(StorageFull)
    /// 410: the window was deleted.
    case gone
    /// 503: the server is shutting down.
    case shuttingDown
    /// 503 `backend_unavailable`: the store that holds the window (Redis) did not answer; why.
    case backendUnavailable(String)

    /// The same error in a window's words (`item` for `visitor`, `display_seconds` for `hold_seconds`).
    package init(_ error: QueueError, item id: String?) {
        switch error {
        case .notFound(let what): self = .notFound(id.map { "item \"\($0)\"" } ?? what)
        case .notGranted: self = .nothingShowing
        case .full(let retry): self = .full(retryAfterSeconds: retry)
        case .invalid(let field, let message):
            self = .invalid(field: field == "hold_seconds" ? "display_seconds" : field, message: message)
        case .storageFull(let full): self = .storageFull(full)
        case .gone: self = .gone
        case .shuttingDown: self = .shuttingDown
        case .backendUnavailable(let why): self = .backendUnavailable(why)
        }
    }

    /// A one-line explanation for logs and problem details.
    package var description: String {
        switch self {
        case .notFound(let what): "\(what) not found"
        case .nothingShowing: "nothing is showing"
        case .full(let retry): "too many items are queued; retry in \(retry) s"
        case .invalid(let field, let message): "\(field): \(message)"
        case .storageFull(let full): full.description
        case .gone: "the window was deleted"
        case .shuttingDown: "the server is shutting down"
        case .backendUnavailable(let why): "the backend is unavailable: \(why)"
        }
    }
}
