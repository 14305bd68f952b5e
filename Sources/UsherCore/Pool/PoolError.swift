/// What a pool operation can fail with; the API layer maps each case to a
/// status and problem code.
package enum PoolError: Error, Sendable, Equatable, CustomStringConvertible {
    /// 404: no such lease or element.
    case notFound(String)
    /// 409 `pool_exhausted`: nothing free (and no wait, or the wait ended);
    /// when the first active lease expires, if one does.
    case exhausted(nextExpiryAt: Timestamp?)
    /// 409 `not_leased`: the element is free, or the lease ended (`status`).
    case notLeased(String, status: LeaseStatus?)
    /// 409 `element_leased`: removing a leased element needs `force=true`.
    case elementLeased(element: String, lease: String)
    /// 429 `queue_full`: more fetchers would wait than `max_waiting`.
    case full(retryAfterSeconds: Int)
    /// 429 `too_many_elements`: the pool is at its size limit.
    case tooManyElements(limit: Int)
    /// 400 `bad_request` naming the field.
    case invalid(field: String, message: String)
    /// 507 `storage_full`: storing it would pass `max_stored_bytes`.
    case storageFull(StorageFull)
    /// 410: the pool was deleted.
    case gone
    /// 503: the server is shutting down.
    case shuttingDown
    /// 503 `backend_unavailable`: the store that holds the pool (Redis) did not answer; why.
    case backendUnavailable(String)

    /// The same error in a pool's words; `lease` names the lease the engine was asked about.
    init(_ error: QueueError, lease id: String?) {
        switch error {
        case .notFound(let what): self = .notFound(id.map { "lease \"\($0)\"" } ?? what)
        case .notGranted(let current):
            let status = LeaseStatus(current)
            self = .notLeased("lease \"\(id ?? "?")\" is not active (it is \(status.rawValue))", status: status)
        case .full(let retry): self = .full(retryAfterSeconds: retry)
        case .invalid(let field, let message):
            self = .invalid(field: field == "hold_seconds" ? "lease_seconds" : field, message: message)
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
        case .exhausted(let next):
            "no element is free" + (next.map { "; the first lease expires at \($0.rfc3339)" } ?? "")
        case .notLeased(let detail, _): detail
        case .elementLeased(let element, let lease):
            "element \"\(element)\" is leased (lease \"\(lease)\"); remove it with force=true to end the lease"
        case .full(let retry): "too many fetchers are waiting; retry in \(retry) s"
        case .tooManyElements(let limit): "a pool holds at most \(limit) elements"
        case .invalid(let field, let message): "\(field): \(message)"
        case .storageFull(let full): full.description
        case .gone: "the pool was deleted"
        case .shuttingDown: "the server is shutting down"
        case .backendUnavailable(let why): "the backend is unavailable: \(why)"
        }
    }
}
