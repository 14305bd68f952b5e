/// One entry in a machine's history: a transition, or a transaction that
/// ended without one (then `from == to`: the machine stayed where it was).
package struct MachineTransition: Sendable, Equatable {
    /// What made the entry.
    package enum Cause: String, Sendable {
        /// A client fired the event (directly, or by committing a transaction).
        case event
        /// A state's timeout fired the event.
        case timeout
        /// A client aborted a transaction: no transition.
        case aborted
        /// A transaction's timeout ran out: no transition.
        case expired
    }

    /// The event that was applied (or attempted).
    package let event: String
    /// The state the machine left.
    package let from: String
    /// The state the machine entered (may equal `from`; always does for an attempt).
    package let to: String
    /// The machine's version after the entry: a transition's fence.
    package let version: Int64
    /// When it happened.
    package let at: Timestamp
    /// A client's event, a timeout, or how a transaction ended without a transition.
    package let cause: Cause
    /// The `data` the client sent with the event or transaction, if any (never for a timeout).
    package let data: JSONValue?
    /// The transaction's id, when the entry ends one.
    package let transaction: String?
    /// An aborted or expired transaction's target: the state it did not enter.
    package let attempted: String?

    /// Creates an entry; `transaction` and `attempted` only for transactions.
    package init(
        event: String, from: String, to: String, version: Int64, at: Timestamp, cause: Cause, data: JSONValue?,
        transaction: String? = nil, attempted: String? = nil
    ) {
        self.event = event
        self.from = from
        self.to = to
        self.version = version
        self.at = at
        self.cause = cause
        self.data = data
        self.transaction = transaction
        self.attempted = attempted
    }

    /// How the transaction this entry ended came out, or nil for a plain event or a timeout.
    var transactionOutcome: MachineTransaction.Status? {
        guard transaction != nil else { return nil }
        switch cause {
        case .event, .timeout: return .committed
        case .aborted: return .aborted
        case .expired: return .expired
        }
    }

}
