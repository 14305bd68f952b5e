/// Where a lease stands: `active` → `recycled` | `expired` | `revoked`
/// (`waiting` only while its fetch still waits for an element).
package enum LeaseStatus: String, Sendable, Equatable, CaseIterable {
    /// The fetch waits for a free element.
    case waiting
    /// The holder has the element.
    case active
    /// Finished: given back with `recycle`.
    case recycled
    /// Finished: `lease_seconds` ran out and the element went back to the pool.
    case expired
    /// Finished: the element was removed with `force=true`.
    case revoked

    /// True for the three final statuses.
    package var isFinished: Bool { liveStatus == nil }

    /// The engine's status of a live lease; nil for a finished one (those
    /// stand for several).
    var liveStatus: VisitorStatus? {
        switch self {
        case .waiting: .waiting
        case .active: .granted
        case .recycled, .expired, .revoked: nil
        }
    }

    /// The pool's name for a queue visitor's status.
    package init(_ status: VisitorStatus) {
        switch status {
        case .delayed, .waiting: self = .waiting
        case .granted: self = .active
        case .completed: self = .recycled
        case .expired: self = .expired
        case .released, .cancelled, .merged: self = .revoked
        }
    }
}

/// One lease, as the API shows it.
///
/// Its wire form is `LeaseBody` (UsherAPI): `element` is null while waiting,
/// `holder`, `expires_at` (no expiry), `finished_at` null when they have no
/// value; `reason` only where it applies (`undelivered`).
package struct Lease: Sendable, Hashable {
    package var id: String
    /// The element's id; nil while the fetch waits.
    package var element: String?
    /// The element's current data (nil once the element was removed).
    package var elementData: JSONValue?
    package var holder: String?
    package var status: LeaseStatus
    /// When the fetch asked for it.
    package var createdAt: Timestamp
    package var grantedAt: Timestamp?
    /// When the lease expires; nil for no expiry.
    package var expiresAt: Timestamp?
    /// When it was recycled, expired or revoked.
    package var finishedAt: Timestamp?
    /// The fencing token of the lease: grows with every lease of the pool.
    package var fence: Int64?
    /// Why it ended, where the status alone does not say: `undelivered` (the
    /// answer that leased it never reached its client).
    package var reason: String?

    /// The lease a pool's queue visitor stands for; `data` is the element's current data.
    init(_ v: VisitorView, data: JSONValue?) {
        let note = LeaseNote(stored: v.payload)
        id = v.id
        element = note.element
        elementData = data
        holder = note.holder
        status = LeaseStatus(v.status)
        createdAt = v.enqueuedAt
        grantedAt = v.grantedAt
        expiresAt = v.expiresAt
        finishedAt = v.status == .granted ? nil : v.finishedAt
        fence = v.fence
        reason = v.reason
    }
}

/// One element of a pool with its lease, as the pool's state lists it.
package struct PoolElement: Sendable, Hashable {
    package var id: String
    package var data: JSONValue?
    /// The lease it is under, or nil when free.
    package var lease: Lease?
    /// Leases after its first whose holder differed from the previous
    /// lease's (Kubernetes Lease's `leaseTransitions`; a lease without a
    /// holder always counts).
    package var leaseTransitions = 0
    /// The holder of its most recent lease, current or ended (Kubernetes
    /// Lease's `holderIdentity`, kept after the lease ends); nil when never
    /// leased or that lease named no holder.
    package var lastHolder: String?

    package init(id: String, data: JSONValue?, lease: Lease?, leaseTransitions: Int = 0, lastHolder: String? = nil) {
        self.id = id
        self.data = data
        self.lease = lease
        self.leaseTransitions = leaseTransitions
        self.lastHolder = lastHolder
    }
}

/// Lifetime totals of one pool.
///
/// Invariant: `fetched_total == leased + recycled_total + expired_total + revoked_total`.
package struct PoolCounts: Sendable, Hashable {
    /// Leases ever granted (a retried fetch with a known id does not count again).
    package var fetchedTotal = 0
    /// Leases given back with `recycle`.
    package var recycledTotal = 0
    /// Leases that ran out (their elements were recycled by the pool itself).
    package var expiredTotal = 0
    /// Leases ended by a forced removal of their element.
    package var revokedTotal = 0
    /// Elements created by `grow`.
    package var grownTotal = 0
    /// Of the fetches that ended unserved: those whose client was not heard of for `idle_seconds`.
    package var abandonedTotal = 0
    /// Of `recycledTotal`: leases nobody claimed within `claim_seconds`.
    package var unclaimedTotal = 0

    /// The pool's names for the queue engine's totals.
    init(_ c: QueueCounts, grown: Int) {
        fetchedTotal = c.grantedTotal
        recycledTotal = c.completedTotal
        expiredTotal = c.expiredTotal
        revokedTotal = c.releasedTotal
        grownTotal = grown
        abandonedTotal = c.abandonedTotal
        unclaimedTotal = c.unclaimedTotal
    }
}

/// `GET /v1/pools/{p}`.
package struct PoolState: Sendable, Hashable {
    package var name: String
    package var config: PoolConfig
    /// Elements now (declared, added and grown, less removed).
    package var size: Int
    /// Elements not leased.
    package var available: Int
    /// Elements leased.
    package var leased: Int
    /// Fetchers waiting for an element.
    package var waiting: Int
    /// When the first active lease expires, if any does.
    package var nextExpiryAt: Timestamp?
    /// The first `limit` elements in stable order.
    package var elements: [PoolElement]
    /// On the first page: the first `limit` waiting fetches, first in line
    /// first, as leases with status `waiting`.
    package var waitingLeases: [Lease] = []
    package var counts: PoolCounts
    /// Where the page resumes after each listed element; not part of the JSON.
    package var cursors: [String] = []
    /// True when more elements follow the last one listed.
    package var more = false
    /// Where the next page starts (`next_cursor`), or nil on the last page.
    package var nextCursor: String?
}

/// The answer to `DELETE …/elements/{id}`: the element removed, and the
/// lease that removal ended (`force=true` on a leased element).
package struct ElementRemoval: Sendable, Equatable {
    package var element: PoolElement
    package var endedLease: Lease?

    package init(element: PoolElement, endedLease: Lease?) {
        self.element = element
        self.endedLease = endedLease
    }
}

/// A fetch's answer: the lease, and whether this request made it (201) or
/// named one that exists (200: a retried `id`).
package struct FetchOutcome: Sendable, Equatable {
    package var lease: Lease
    package var created: Bool

    package init(lease: Lease, created: Bool) {
        self.lease = lease
        self.created = created
    }
}
