/// The queue as a value-type state machine (docs/api.md, Queues): no clock, no async.
///
/// Every operation takes `now` and first applies everything due by then, in
/// deadline order (delays ending, with their dedup checks; holds expiring),
/// granting free slots after each instant's events, then does its own work
/// and grants again. Grants are stamped `now`; an expiry is stamped with its
/// deadline, and so is a delay's end. A delayed visitor arrives (for FIFO and
/// for `adjacent`) when its delay ends, behind those who came meanwhile.
///
/// Costs: enqueue, grant, complete, remove, dedup lookups, position and the
/// wait estimate are O(log n) or O(1); nothing scans the waiting line or
/// the holders.
/// Storage is a slab of `VisitorRecord`s with a free list, an id index, an
/// order-statistic treap for the line and one for the holders' expiries,
/// intrusive lists for "most recent waiting visitor with this key / key and
/// action / at all", and one lazily-pruned min-heap of deadlines.
package struct QueueEngine: Sendable {
    /// The queue's name (shown in every visitor).
    package let name: String
    /// The current config.
    package internal(set) var config: QueueConfig
    /// Live counts and totals.
    package internal(set) var counts = QueueCounts()
    /// Waits from entering the line to the grant (for metrics).
    package internal(set) var waitHistogram = WaitHistogram()
    /// The fence the next grant gets: starts at the creation time in µs, +1 per grant.
    package internal(set) var nextFence: Int64
    /// How a visitor's own hold relates to the config's `hold_seconds`.
    let holdPolicy: HoldPolicy

    // Segmented and sharded: none of these grows by copying or rehashing all
    // of a big queue at once (a pause under the lock; docs/design.md).
    var records = SegmentedArray<VisitorRecord>()
    var vacant: [Int32] = []
    var ids = ShardedDictionary<Int32>()
    /// Waiting visitors in grant order.
    var line = OrderStatisticTree()
    var lastWithKey = ShardedDictionary<Int32>()
    var lastWithPair: [KeyAction: Int32] = [:]
    var firstArrival = VisitorRecord.none
    var lastArrival = VisitorRecord.none
    var firstHolder = VisitorRecord.none
    var lastHolder = VisitorRecord.none
    /// Holders' expiries in order (holders without one are not in it), for wait estimates.
    var holderExpiries = RankedDeadlines()
    /// The current operation's time in µs: what views measure remaining holds from.
    var operationTime: Int64 = 0
    /// Delay ends and hold expiries; entries that no longer match their visitor are stale.
    var timeline = DeadlineHeap()
    /// The next delay's order: counts up from just above `noTime`, so it is
    /// unique, never a fence, and below every fence (at one instant, delays
    /// end in arrival order before holds expire).
    var nextDelayOrder = VisitorRecord.noTime + 1
    /// `merged_into` of merged visitors, `cancelled_with` of those cancelled by an opposite.
    var related: [Int32: String] = [:]
    /// Finished visitors still remembered, oldest first.
    var finished = HandleFIFO()
    var holds = HoldStatistics()
    /// Handles whose status changed during the current operation.
    var changed: [Int32] = []
    /// Ids withdrawn during the current operation (their handles are gone):
    /// reported as changes, so their long-polls learn they are gone.
    var withdrawn: [String] = []
    /// How each withdrawn visitor last looked, for its event.
    var withdrawnViews: [String: VisitorView] = [:]
    var nextSeq: Int64 = 0
    /// Server-made ids, seeded with the creation time.
    var serverIDs: IDGenerator
    var holdMicros: Int64 = 0
    var idleMicros: Int64 = 0
    var claimMicros: Int64 = 0
    var dedupMicros: Int64 = 0
    /// Finished visitors at the front of `finished` that only `dedup_seconds`
    /// keeps, as the current operation began.
    var keptByDedup = 0
    /// The next record's `watchOrder`: counts up from `watchOrders.lowerBound`,
    /// a range no delay order or fence reaches.
    var nextWatchOrder = Self.watchOrders.lowerBound
    /// The record the current operation names (its client is heard of, so a
    /// grant it gets in this operation is claimed), or `none`.
    var named = VisitorRecord.none
    /// How an unclaimed grant finishes: `released` (a pool: `completed`, shown as recycled).
    var unclaimedStatus = VisitorStatus.released
    var oppositesOf: [String: [String]] = [:]
    /// This engine's share of the server's storage budget: every record it
    /// keeps (waiting, holding or remembered) is charged until evicted.
    package internal(set) var storage: StorageAccount

    /// A new, empty queue; fences and server-made ids start at `createdAt`.
    /// Windows and pools run on this engine too, with their own hold policy.
    package init(
        name: String, config: QueueConfig, createdAt: Timestamp,
        holdPolicy: HoldPolicy = .atMostResource, budget: StorageBudget = StorageBudget()
    ) {
        self.name = name
        self.storage = StorageAccount(budget)
        self.config = config
        self.nextFence = createdAt.micros
        self.holdPolicy = holdPolicy
        self.serverIDs = IDGenerator(createdAt: createdAt)
        self.operationTime = createdAt.micros
        configChanged()
    }

    /// The earliest pending delay end or hold expiry: when `advance` next has work.
    var nextDeadline: Timestamp? {
        timeline.min.map { Timestamp(micros: $0.deadline) }
    }

    /// The earliest hold expiry (a pool's `next_expiry_at`), idle and claim checks aside.
    var nextHoldExpiry: Timestamp? {
        holderExpiries.count > 0 ? Timestamp(micros: holderExpiries.deadline(rank: 1)) : nil
    }

    /// When the visitor that has waited longest entered the line (for metrics).
    package var oldestWaitingSince: Timestamp? {
        guard firstArrival != VisitorRecord.none else { return nil }
        return Timestamp(micros: records[Int(firstArrival)].deadline)
    }

    /// Applies everything due by `now` (the manager's timer calls this).
    mutating func advance(to now: Timestamp) {
        begin(now)
        end()
    }

    /// Adds a visitor: granted at once if a slot is free, else waiting (or
    /// delayed, or merged/cancelled by the dedup rules). An `id` that already
    /// exists returns that visitor with `created == false` (a retry: see `noteRetry`).
    ///
    /// Room: only a visitor that will wait or be delayed needs it. One that
    /// is granted at once, merges, or cancels with an opposite never makes the
    /// line longer, so it is accepted even when the line is full.
    package mutating func enqueue(
        _ r: VisitorRequest, now: Timestamp
    ) throws(QueueError) -> (view: VisitorView, created: Bool) {
        begin(now)
        defer { end() }
        if let id = r.id, let h = ids[id] {
            noteRetry(h)
            hear(h)
            return (view(h), false)
        }
        try check(r)
        let delay = r.delaySeconds.map(Self.micros) ?? 0
        if delay > 0 {
            guard counts.waiting + counts.delayed < config.maxWaiting else { throw full() }
            let h = try create(r, status: .delayed, now: now)
            records[Int(h)].deadline = now.micros + delay
            records[Int(h)].fence = nextDelayOrder
            nextDelayOrder += 1
            counts.delayed += 1
            timeline.push(.init(deadline: now.micros + delay, order: records[Int(h)].fence, handle: h))
            changed.append(h)
            return (view(h), true)
        }
        let outcome = dedup(key: r.key, action: r.action)
        if case .enter = outcome, counts.holding >= config.capacity,
            counts.waiting + counts.delayed >= config.maxWaiting
        {
            throw full()
        }
        let h = try create(r, status: .waiting, now: now)
        named = h
        enterLine(h, at: now.micros, outcome)
        grantFree(now)
        // A grant or an ending already counts as a change; so does starting to wait.
        if records[Int(h)].status == .waiting {
            watchIdle(h)
            changed.append(h)
        }
        return (view(h), true)
    }

    /// The holder finishes: `completed`, and its slot passes on.
    package mutating func complete(id: String, now: Timestamp) throws(QueueError) -> VisitorView {
        begin(now)
        defer { end() }
        let h = try handle(id)
        guard records[Int(h)].status == .granted else { throw .notGranted(current: records[Int(h)].status) }
        finish(h, as: .completed, at: now.micros)
        grantFree(now)
        return view(h)
    }

    /// Moves a holder's expiry to `now + holdSeconds` (default: its own hold,
    /// or the queue's) unless it is already later: an extend never shortens a
    /// hold. The same limits as a request's `hold_seconds`.
    mutating func extend(id: String, holdSeconds: Double?, now: Timestamp) throws(QueueError) -> VisitorView {
        begin(now)
        defer { end() }
        let h = try handle(id)
        hear(h)
        guard records[Int(h)].status == .granted else { throw .notGranted(current: records[Int(h)].status) }
        try checkHold(holdSeconds)
        let hold = holdSeconds.map(Self.micros) ?? effectiveHold(h)
        let current = records[Int(h)].deadline
        guard current != VisitorRecord.noTime else { return view(h) }  // no limit: nothing is later
        if hold <= 0 {
            records[Int(h)].deadline = VisitorRecord.noTime
        } else if now.micros + hold > current {
            records[Int(h)].deadline = now.micros + hold
            timeline.push(.init(deadline: now.micros + hold, order: records[Int(h)].fence, handle: h))
        }
        holderDeadlineChanged(h)
        return view(h)
    }

    /// `DELETE`: a waiting or delayed visitor is `cancelled` (reason
    /// `client`), a holder `released` (reason `client` when `byClient`: a
    /// queue's `DELETE`, not a window's dismiss or a pool's element removal);
    /// a finished one is returned as it is.
    package mutating func remove(id: String, byClient: Bool = false, now: Timestamp) throws(QueueError) -> VisitorView {
        begin(now)
        defer { end() }
        let h = try handle(id)
        switch records[Int(h)].status {
        case .delayed, .waiting: finish(h, as: .cancelled, at: now.micros, reason: .client)
        case .granted: finish(h, as: .released, at: now.micros, reason: byClient ? .client : nil)
        default: break
        }
        grantFree(now)
        return view(h)
    }

    /// One visitor, live or remembered.
    package mutating func visitor(id: String, now: Timestamp) throws(QueueError) -> VisitorView {
        begin(now)
        defer { end() }
        let h = try handle(id)
        hear(h)
        return view(h)
    }

    /// The queue's state with at most `limit` holders and `limit` waiting
    /// visitors, resuming after `cursor`: O(limit + log n) (a holder cursor
    /// also walks the holders before it). The page lists holders, then the
    /// waiting line; when holders alone fill it, waiting visitors come on the
    /// next page. `cursors` gives each listed visitor's resume point. The
    /// first page (no `cursor`) also lists the first `limit` delayed
    /// visitors, the next to enter the line first.
    package mutating func state(limit: Int, after cursor: QueueCursor? = nil, now: Timestamp) -> QueueState {
        begin(now)
        defer { end() }
        let limit = min(max(0, limit), Int.max - 1)
        var holding: [VisitorView] = []
        var cursors: [QueueCursor] = []
        var more = false
        var waitingAfter: (priority: Int32, seq: Int64)?
        var listsWaiting = true
        switch cursor {
        case .waiting(let priority, let seq):
            waitingAfter = (priority, seq)
        case nil, .holding:
            var h = firstHolder
            if case .holding(let fence) = cursor {
                while h != VisitorRecord.none && records[Int(h)].fence <= fence { h = records[Int(h)].lineNext }
            }
            while h != VisitorRecord.none && holding.count < limit {
                holding.append(view(h))
                cursors.append(.holding(fence: records[Int(h)].fence))
                h = records[Int(h)].lineNext
            }
            if h != VisitorRecord.none {
                more = true
                listsWaiting = false
            }
        }
        var waiting: [VisitorView] = []
        if listsWaiting {
            // Holders count towards `limit`: the waiting line gets the room they leave.
            let room = limit - holding.count
            let handles = waitingAfter.map { line.prefix(room + 1, after: $0) } ?? line.prefix(room + 1)
            more = handles.count > room
            let firstPosition = handles.first.map { line.rank(of: $0) } ?? 1
            for (i, h) in handles.prefix(room).enumerated() {
                waiting.append(view(h, position: firstPosition + i))
                let key = line.key(of: h)
                cursors.append(.waiting(priority: key.priority, seq: key.seq))
            }
        }
        var state = QueueState(name: name, config: config, holding: holding, waiting: waiting, counts: counts)
        if cursor == nil { state.delayed = firstDelayed(limit) }
        state.cursors = cursors
        state.more = more
        return state
    }

    /// Changes the config. Raising `capacity` grants at once; lowering it
    /// takes no slot away. Other changes apply to what happens next.
    /// Returns the new config.
    @discardableResult
    package mutating func apply(_ patch: QueuePatch, now: Timestamp) -> QueueConfig {
        begin(now)
        defer { end() }
        let wasIdle = idleMicros
        config = patch.applied(to: config)
        configChanged()
        rewatch(wasIdle: wasIdle)
        grantFree(now)
        return config
    }

    /// The ids whose status changed during the last operation (each once),
    /// withdrawn ones included.
    /// Cleared when the next operation begins; so call it after each one.
    mutating func drainChanges() -> [String] {
        guard withdrawn.isEmpty else {
            defer { withdrawn.removeAll() }
            return drainChangedHandles() + withdrawn
        }
        return drainChangedHandles()
    }

    /// The ids of `changed`, each once; clears it.
    private mutating func drainChangedHandles() -> [String] {
        guard !changed.isEmpty else { return [] }
        var out: [String] = []
        out.reserveCapacity(changed.count)
        if changed.count <= 16 {
            // An operation changes one or two visitors: a scan beats hashing.
            for (i, h) in changed.enumerated() where !changed[..<i].contains(h) { out.append(records[Int(h)].id) }
        } else {
            var seen = Set<Int32>(minimumCapacity: changed.count)
            for h in changed where seen.insert(h).inserted { out.append(records[Int(h)].id) }
        }
        changed.removeAll(keepingCapacity: changed.count <= 1024)
        return out
    }

    /// A visitor's view without applying time: for the manager, right after an operation.
    func currentView(id: String) -> VisitorView? {
        ids[id].map { view($0) }
    }
}
