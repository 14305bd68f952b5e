/// A transition held open (seed 004's transaction, with the work done by the
/// client): the event was allowed when it opened, and the machine stays in
/// `from`, refusing every other event, until the client commits it (the
/// transition happens), aborts it, or `expiresAt` passes (nothing happens).
package struct MachineTransaction: Sendable, Equatable {
    /// Where the transaction is in its life.
    package enum Status: String, Sendable {
        /// Open: the machine waits for a commit or an abort.
        case open
        /// Committed: the transition happened.
        case committed
        /// Aborted by the client: the state did not change.
        case aborted
        /// Its timeout ran out: the state did not change.
        case expired
    }

    /// The machine's id for it (see `MachineEngine.makeTransactionID`).
    package let id: String
    /// The event it applies on commit.
    package let event: String
    /// The state the machine stays in while it is open.
    package let from: String
    /// The state a commit enters.
    package let to: String
    /// The client's data, kept in the history entry either way.
    package let data: JSONValue?
    /// When it opened.
    package let openedAt: Timestamp
    /// When it expires if still open.
    package let expiresAt: Timestamp
    /// Open, or how it ended.
    package internal(set) var status: Status
    /// The machine's version after it opened, or after it ended.
    package internal(set) var version: Int64

    /// A transaction as given (the Redis store builds one from its reply).
    package init(
        id: String, event: String, from: String, to: String, data: JSONValue?, openedAt: Timestamp,
        expiresAt: Timestamp, status: Status, version: Int64
    ) {
        self.id = id
        self.event = event
        self.from = from
        self.to = to
        self.data = data
        self.openedAt = openedAt
        self.expiresAt = expiresAt
        self.status = status
        self.version = version
    }
}

/// How many transactions a machine has ended, by outcome (`/metrics`).
package struct TransactionCounts: Sendable, Equatable {
    /// Committed: the transition happened.
    package var committed = 0
    /// Aborted by the client.
    package var aborted = 0
    /// Expired: their timeout ran out.
    package var expired = 0

    /// Counts as given; none by default.
    package init(committed: Int = 0, aborted: Int = 0, expired: Int = 0) {
        self.committed = committed
        self.aborted = aborted
        self.expired = expired
    }
}
