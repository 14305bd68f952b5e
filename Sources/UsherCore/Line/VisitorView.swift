/// A snapshot of one visitor, as the API shows it.
///
/// Wire convention (`VisitorBody`): `key`, `action`, `payload`, `granted_at`,
/// `expires_at`, `finished_at` and `fence` are always present and `null` when
/// they have no value, so clients can rely on the shape; `position` and
/// `estimated_wait_seconds` appear only while the visitor is `waiting`, and
/// `merged_into`, `cancelled_with` and `reason` only where they apply
/// (`merged`; `cancelled` by an opposite; `cancelled`, or `released` with
/// `undelivered`). A waiting visitor's
/// `estimated_wait_seconds` is `null` when it cannot be estimated, and
/// `estimated_wait_reason` then says why.
package struct VisitorView: Sendable, Hashable {
    /// The visitor's id (client-supplied or generated: `IDGenerator`).
    package var id: String
    /// The queue's name.
    package var queue: String
    /// Dedup key, as requested.
    package var key: String?
    /// Action, as requested.
    package var action: String?
    /// Payload, as requested.
    package var payload: JSONValue?
    /// Priority, as requested (default 0).
    package var priority: Int
    /// Where it stands now.
    package var status: VisitorStatus
    /// 1-based place in grant order, while waiting.
    package var position: Int?
    /// While waiting: how long it is likely to wait, reckoned from now.
    package var forecast = WaitForecast()
    /// While waiting: position × recent mean hold ÷ capacity; nil when unknowable.
    package var estimatedWaitSeconds: Double? {
        get { forecast.seconds }
        set { forecast.seconds = newValue }
    }
    /// While waiting without an estimate: why there is none.
    package var estimatedWaitReason: WaitUnknown? {
        get { forecast.reason }
        set { forecast.reason = newValue }
    }
    /// When it was posted (for a delayed visitor, before its delay).
    package var enqueuedAt: Timestamp
    /// When it was granted a slot.
    package var grantedAt: Timestamp?
    /// When the hold runs out; nil for no limit (and before a grant).
    package var expiresAt: Timestamp?
    /// When it reached its final status.
    package var finishedAt: Timestamp?
    /// The fencing token of its grant.
    package var fence: Int64?
    /// The waiting visitor this one was merged into.
    package var mergedInto: String?
    /// The opposite visitor this one cancelled with.
    package var cancelledWith: String?
    /// Why it finished as it did: cancelled `"opposite"`, `"client"`
    /// (`DELETE`), `"disconnected"` (its waiting client hung up) or
    /// `"timeout"` (a try-acquire's wait ended) or `"abandoned"` (its client
    /// was not heard of for `idle_seconds`); released (a pool's lease:
    /// recycled) `"undelivered"` (the grant never reached its client) or
    /// `"unclaimed"` (granted while nobody waited on it, and not claimed).
    package var reason: String?

    /// A view; normally made by the engine.
    package init(
        id: String, queue: String, key: String? = nil, action: String? = nil, payload: JSONValue? = nil,
        priority: Int = 0, status: VisitorStatus, position: Int? = nil, estimatedWaitSeconds: Double? = nil,
        enqueuedAt: Timestamp, grantedAt: Timestamp? = nil, expiresAt: Timestamp? = nil,
        finishedAt: Timestamp? = nil, fence: Int64? = nil, mergedInto: String? = nil,
        cancelledWith: String? = nil, reason: String? = nil
    ) {
        self.id = id
        self.queue = queue
        self.key = key
        self.action = action
        self.payload = payload
        self.priority = priority
        self.status = status
        self.position = position
        self.enqueuedAt = enqueuedAt
        self.grantedAt = grantedAt
        self.expiresAt = expiresAt
        self.finishedAt = finishedAt
        self.fence = fence
        self.mergedInto = mergedInto
        self.cancelledWith = cancelledWith
        self.reason = reason
        forecast.seconds = estimatedWaitSeconds
    }
}

/// A waiting visitor's estimate. It moves with the clock, not with the
/// queue, so it is left out of the visitor's hash, and so of the `ETag`s
/// built from it (docs/api.md, Conditional GETs).
package struct WaitForecast: Sendable, Hashable {
    /// Seconds until it is likely granted; nil when unknowable.
    package var seconds: Double?
    /// Why there is no estimate.
    package var reason: WaitUnknown?

    package init() {}

    package func hash(into hasher: inout Hasher) {}
}

/// Why a waiting visitor has no `estimated_wait_seconds`.
package enum WaitUnknown: String, Sendable, Equatable, CaseIterable {
    /// Capacity 0: nobody is granted until it is raised.
    case closed
    /// A slot frees when a holder without an expiry finishes, and the holds
    /// that finished say nothing of when: none has finished yet, or a current
    /// holder has already held longer than their mean.
    case noHoldLimit = "no_hold_limit"
}

/// Live counts and lifetime totals of one queue.
///
/// Invariant: `enqueuedTotal == waiting + holding + delayed + completedTotal +
/// releasedTotal + expiredTotal + cancelledTotal + mergedTotal`.
package struct QueueCounts: Sendable, Hashable {
    /// Visitors in the waiting line now.
    package var waiting = 0
    /// Visitors holding a slot now.
    package var holding = 0
    /// Visitors whose delay has not ended.
    package var delayed = 0
    /// Visitors ever created (not refused ones, not repeats of an existing id).
    package var enqueuedTotal = 0
    /// Grants ever made (one per granted visitor).
    package var grantedTotal = 0
    /// Holders that completed.
    package var completedTotal = 0
    /// Holders removed with `DELETE`.
    package var releasedTotal = 0
    /// Holders whose hold ran out.
    package var expiredTotal = 0
    /// Waiting or delayed visitors removed, or cancelled by an opposite.
    package var cancelledTotal = 0
    /// Visitors merged into a waiting duplicate.
    package var mergedTotal = 0
    /// Of `cancelledTotal`: try-acquires whose wait ended (reason `timeout`).
    package var timedOutTotal = 0
    /// Of `cancelledTotal`: waiting visitors whose client went quiet (reason `abandoned`).
    package var abandonedTotal = 0
    /// Of `releasedTotal` (a pool: recycled): grants nobody claimed (reason `unclaimed`).
    package var unclaimedTotal = 0

    /// All zero.
    package init() {}
}

/// `GET /v1/queues/{q}`: the config, the holders, the head of the line, counts.
package struct QueueState: Sendable, Hashable {
    /// The queue's name.
    package var name: String
    /// Its config, defaults filled in.
    package var config: QueueConfig
    /// Holders in grant order (at most `limit`).
    package var holding: [VisitorView]
    /// The first `limit` waiting visitors in grant order.
    package var waiting: [VisitorView]
    /// On the first page: the first `limit` delayed visitors, the next to
    /// enter the line first.
    package var delayed: [VisitorView] = []
    /// Counts and totals.
    package var counts: QueueCounts
    /// Where the page resumes after each listed visitor (holding, then
    /// waiting); not part of the JSON.
    package var cursors: [QueueCursor] = []
    /// True when more visitors follow the last one listed.
    package var more = false
    /// Where the next page starts (`next_cursor`), or nil on the last page.
    package var nextCursor: String?

    /// A state; normally made by the engine.
    package init(name: String, config: QueueConfig, holding: [VisitorView], waiting: [VisitorView], counts: QueueCounts)
    {
        self.name = name
        self.config = config
        self.holding = holding
        self.waiting = waiting
        self.counts = counts
    }
}
