/// Where a visitor stands. `delayed` → `waiting` → `granted` → `completed` |
/// `released` | `expired`; `delayed`/`waiting` → `cancelled` | `merged`.
package enum VisitorStatus: String, Sendable, Equatable, CaseIterable {
    /// Asked with `delay_seconds`; enters the waiting line when the delay ends.
    case delayed
    /// In the waiting line.
    case waiting
    /// Holding a slot.
    case granted
    /// Finished: the holder completed.
    case completed
    /// Finished: the holder left (`DELETE`).
    case released
    /// Finished: the hold ran out.
    case expired
    /// Finished: left the line (`DELETE`) or cancelled by an opposite.
    case cancelled
    /// Finished: merged into a waiting duplicate.
    case merged

    /// True for the five final statuses.
    package var isFinished: Bool {
        switch self {
        case .delayed, .waiting, .granted: false
        case .completed, .released, .expired, .cancelled, .merged: true
        }
    }

    /// True while the visitor has neither a slot nor a final status.
    package var isWaiting: Bool { self == .delayed || self == .waiting }
}

/// What a queue operation can fail with; the API layer maps each case to a
/// status and problem code (`notGranted` → 409 `not_granted`, `full` → 429, …).
package enum QueueError: Error, Sendable, Equatable, CustomStringConvertible {
    /// 404: the named thing does not exist (e.g. `visitor "v7"`).
    case notFound(String)
    /// 409 `not_granted`: the visitor does not hold a slot; `current` is its status.
    case notGranted(current: VisitorStatus)
    /// 429 `queue_full`, with a `Retry-After` in whole seconds (at least 1).
    case full(retryAfterSeconds: Int)
    /// 400 `bad_request` naming the field.
    case invalid(field: String, message: String)
    /// 507 `storage_full`: the record would pass `max_stored_bytes`.
    case storageFull(StorageFull)
    /// 410: the queue was deleted.
    case gone
    /// 503: the server is shutting down (answer to parked long-polls).
    case shuttingDown
    /// 503 `backend_unavailable`: the store that holds the queue (Redis) did not answer; why.
    case backendUnavailable(String)

    /// A one-line explanation for logs and problem details.
    package var description: String {
        switch self {
        case .notFound(let what): "\(what) not found"
        case .notGranted(let current): "the visitor does not hold a slot (it is \(current.rawValue))"
        case .full(let retry): "too many visitors are waiting; retry in \(retry) s"
        case .invalid(let field, let message): "\(field): \(message)"
        case .storageFull(let full): full.description
        case .gone: "the queue was deleted"
        case .shuttingDown: "the server is shutting down"
        case .backendUnavailable(let why): "the backend is unavailable: \(why)"
        }
    }
}
