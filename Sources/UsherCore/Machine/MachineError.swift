/// Why a machine refused a request. The core decides; the API layer maps each
/// case to a status and a problem code.
package enum MachineError: Error, Sendable, Equatable {
    /// The definition does not know the event (404); lists what the current state allows.
    case unknownEvent(allowedEvents: [String])
    /// The event is known but not allowed from `state` (409 `invalid_transition`).
    case invalidTransition(state: String, allowedEvents: [String])
    /// A transaction is open: no other event or transaction until it ends
    /// (409 `transaction_open`, naming it and its expiry).
    case transactionOpen(MachineTransaction)
    /// The transaction was committed, aborted or expired already (409 `transaction_ended`).
    case transactionEnded(MachineTransaction.Status)
    /// No such transaction, or one that left the history (404).
    case unknownTransaction
    /// The caller's expected version (`If-Match`) differs from `current` (412).
    case versionMismatch(current: Int64)
    /// The machine was deleted (410 `gone`).
    case gone
    /// Storing it would pass `max_stored_bytes` (507 `storage_full`).
    case storageFull(StorageFull)
    /// The service is shutting down (503 `shutting_down`).
    case shuttingDown
    /// The store that holds the machine (Redis) did not answer (503 `backend_unavailable`); why.
    case backendUnavailable(String)
    /// A definition or request field is invalid (400 `bad_request`).
    case invalid(field: String, message: String)

    /// Wraps a field error from parsing a definition or request.
    package init(_ error: FieldError) {
        self = .invalid(field: error.field, message: error.message)
    }
}
