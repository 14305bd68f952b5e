/// What changed in an engine since the manager last looked, so it wakes only
/// the waiters that can now make progress.
package struct PipelineChanges: OptionSet, Sendable {
    /// The bits.
    package let rawValue: UInt8
    /// Changes from bits.
    package init(rawValue: UInt8) { self.rawValue = rawValue }

    /// A consumer may now get something: an item became ready, or an in-flight
    /// slot freed up (consume, release, timeout, a larger `max_in_flight`).
    static let itemsAvailable = PipelineChanges(rawValue: 1)
    /// A producer may now push: an item left the buffer or `capacity` grew.
    static let roomAvailable = PipelineChanges(rawValue: 2)
}

/// The value-type heart of a pipeline: the bounded buffer, the in-flight
/// items, the dead list and the filters, with the rules that move items
/// between them. No clock, no timers, no concurrency: every operation takes
/// `now`, first applies every deadline that has passed (delays ending, ack
/// deadlines), and `Pipeline` owns one engine and schedules one timer at
/// `nextDeadline()`.
///
/// Order of hand-out: higher `priority` first, then arrival. Items that come
/// back (released, or their ack deadline passed) go to the FRONT: ahead of
/// every other item of their priority, behind every item of a higher one; the
/// latest to come back is first. A delayed push arrives (joins the back) when
/// its delay ends; a delayed release joins the front when its delay ends.
/// Redriven dead items join the back.
///
/// Push and take are O(log n): ready items sit in an order-statistic treap
/// (which also gives the position), deadlines in a lazy min-heap.
package struct PipelineEngine: Sendable {
    /// The config, with patches applied (`filters` as created; the live set is `filters`).
    package private(set) var config: PipelineConfig
    /// The filters that run now.
    package private(set) var filters: PipelineFilters
    /// Running totals.
    package private(set) var counts = PipelineCounts()
    /// Waits from push to first delivery (for metrics).
    package private(set) var waitHistogram = WaitHistogram()
    /// The latest fence handed out; starts at the creation time in microseconds.
    package private(set) var fence: Int64
    /// Accumulated since the last `takeChanges()`.
    package private(set) var changes: PipelineChanges = []
    /// Items waiting for their delay to end.
    private(set) var delayedCount = 0
    /// Items handed out and not yet consumed or released.
    private(set) var inFlightCount = 0
    /// While true nothing is handed out; pushes, deadlines and delays go on.
    package private(set) var paused = false
    /// While true, `moves` collects the id of every item whose status or
    /// delivery changes (someone waits on items by id).
    var tracksMoves = false
    /// Ids moved since the last `takeMoves()`, repeats allowed.
    private var moves: [String] = []

    /// Ready, delayed and in-flight items, addressed by handle. Segmented and
    /// sharded like the queue engine's: growing never copies or rehashes the
    /// whole buffer under the lock (docs/design.md).
    private var slots = SegmentedArray<PipelineItem?>()
    private var freeHandles: [Int32] = []
    private var handles = ShardedDictionary<Int32>()
    private var ready: OrderStatisticTree
    /// Delay ends and ack deadlines; entries whose token no longer matches the item are stale.
    private var timers = DeadlineHeap()
    private var dead = PipelineItemList()
    /// Consumed and cancelled items, payloads dropped, at most `history`:
    /// what a retried consume, release, cancel or push of their id is told.
    private var finished = PipelineItemList()
    /// Decreases: items that come back go ahead of all others of their priority.
    private var frontSeq: Int64 = 0
    /// Increases: arrivals.
    private var backSeq: Int64 = 0
    private var timerSeq: Int64 = 0
    /// Server-made ids, seeded with the creation time.
    private var serverIDs: IDGenerator
    /// This pipeline's share of the server's storage budget: an item is
    /// charged from its push until it leaves (consumed, filtered, cancelled,
    /// or dropped from the dead list).
    private(set) var storage: StorageAccount
    /// The most one `take` hands out, in encoded bytes (`max_response_bytes`):
    /// the rest stay ready for the next take. At least one item always goes.
    var maxTakeBytes = Int.max

    /// An empty pipeline; `seed` fixes the treap's shape in tests.
    package init(
        config: PipelineConfig, createdAt: Timestamp, seed: UInt64? = nil, budget: StorageBudget = StorageBudget()
    ) {
        self.config = config
        storage = StorageAccount(budget)
        filters = PipelineFilters(config.filters)
        fence = createdAt.micros
        serverIDs = IDGenerator(createdAt: createdAt)
        ready = seed.map { OrderStatisticTree(seed: $0) } ?? OrderStatisticTree()
    }

    // MARK: - Counts

    /// Items waiting to be handed out.
    var readyCount: Int { ready.count }
    /// Items on the dead list.
    var deadCount: Int { dead.count }
    /// When the ready item pushed longest ago was pushed (scans the items:
    /// for metrics at scrape time, not for the request path).
    package var oldestReadySince: Timestamp? {
        slots.lazy.compactMap { $0 }.filter { $0.status == .ready }.map(\.createdAt).min { $0.micros < $1.micros }
    }
    /// Ready, delayed and in-flight items: what `capacity` bounds.
    package var count: Int { ready.count + delayedCount + inFlightCount }
    /// Room for `n` more items now.
    func hasRoom(for n: Int = 1) -> Bool { count + n <= config.capacity }
    /// Whether `take` could hand something out now (before filters).
    var canDeliver: Bool { !paused && !ready.isEmpty && inFlightCount < config.maxInFlight }

    /// Returns and clears what changed since the last call.
    mutating func takeChanges() -> PipelineChanges {
        defer { changes = [] }
        return changes
    }

    /// Returns and clears the ids moved since the last call (see `tracksMoves`).
    mutating func takeMoves() -> [String] {
        defer { moves.removeAll(keepingCapacity: true) }
        return moves
    }

    private mutating func moved(_ id: String) {
        if tracksMoves { moves.append(id) }
    }

    // MARK: - Push

    /// Adds an item, ready or (with a delay) delayed. An id the pipeline holds
    /// (live or dead), or remembers as finished within `dedup_seconds` of its
    /// push, returns that item with `created == false`, even when full.
    ///
    /// - Throws: `.full` when there is no room; `.invalid` for a bad id,
    ///   priority or delay.
    package mutating func push(_ request: PipelinePushRequest, now: Timestamp) throws(PipelineError)
        -> PipelinePushResult
    {
        try Self.validate(request, field: "")
        expire(now: now)
        if let id = request.id, let existing = existingResult(id, now: now) { return existing }
        guard hasRoom() else { throw .full(retryAfterSeconds: 1) }
        let priced = Self.price(request)
        do throws(StorageFull) { try storage.reserve(priced) } catch { throw .storageFull(error) }
        return insert(request, now: now, priced: priced)
    }

    /// Adds every item or none.
    ///
    /// - Throws: `.invalid` when the batch holds more items than `capacity`
    ///   (it could never fit) or an entry is invalid; `.full` when there is
    ///   no room for all the new ones now. Entries whose id the pipeline
    ///   already holds or remembers within `dedup_seconds` (or that repeat an
    ///   id earlier in the batch) need no room and answer with the existing item.
    mutating func pushBatch(_ requests: [PipelinePushRequest], now: Timestamp) throws(PipelineError)
        -> [PipelinePushResult]
    {
        guard requests.count <= config.capacity else {
            throw .invalid(
                field: "items",
                message: "the batch has \(requests.count) items, more than the capacity \(config.capacity)")
        }
        for (i, r) in requests.enumerated() { try Self.validate(r, field: "items[\(i)].") }
        expire(now: now)
        var newIDs = Set<String>()
        var needed = 0
        for r in requests {
            if let id = r.id {
                if isKnown(id, now: now) || !newIDs.insert(id).inserted { continue }
            }
            needed += 1
        }
        guard hasRoom(for: needed) else { throw .full(retryAfterSeconds: 1) }
        var priced = 0
        newIDs.removeAll(keepingCapacity: true)
        for r in requests {
            if let id = r.id {
                if isKnown(id, now: now) || !newIDs.insert(id).inserted { continue }
            }
            priced += Self.price(r)
        }
        do throws(StorageFull) { try storage.reserve(priced) } catch { throw .storageFull(error) }
        var out: [PipelinePushResult] = []
        out.reserveCapacity(requests.count)
        for r in requests {
            if let id = r.id, let existing = existingResult(id, now: now) {
                out.append(existing)
            } else {
                out.append(insert(r, now: now, priced: Self.price(r)))
            }
        }
        return out
    }

    // MARK: - Take

    /// Hands out up to `min(max, max_in_flight − in_flight)` items, running the
    /// filters on each: a dropped item leaves the pipeline (`filtered_total`)
    /// and does not count against `max`. Each hand-out increments
    /// `deliveries`, gets the next fence and an ack deadline.
    ///
    /// - Parameter ackSeconds: a shorter ack limit than the pipeline's; 0 (no
    ///   limit) only when the pipeline's `ack_seconds` is 0.
    package mutating func take(max: Int, ackSeconds: Double? = nil, now: Timestamp) throws(PipelineError)
        -> [PipelineDelivery]
    {
        let ack = try effectiveAckSeconds(ackSeconds)
        expire(now: now)
        if paused { return [] }
        var out: [PipelineDelivery] = []
        var bytes = 0
        let limit = Swift.min(max, config.maxInFlight - inFlightCount)
        while out.count < limit, let h = ready.first {
            guard var item = slots[Int(h)] else { preconditionFailure("ready handle without an item") }
            guard let payload = filters.apply(to: item.payload) else {
                ready.remove(h)
                storage.release(Self.storedBytes(vacate(h)))
                counts.filteredTotal += 1
                changes.insert(.roomAvailable)
                continue
            }
            let size = Self.deliveryBytes(id: item.id, payload: payload)
            if !out.isEmpty && bytes + size > maxTakeBytes { break }
            bytes += size
            ready.remove(h)
            fence += 1
            if item.deliveries == 0 { waitHistogram.observe(micros: now.micros - item.createdAt.micros) }
            item.status = .inFlight
            moved(item.id)
            item.deliveries += 1
            item.takenAt = now
            item.fence = fence
            item.ackDeadline = ack > 0 ? now.adding(seconds: ack) : nil
            if let deadline = item.ackDeadline { schedule(&item, handle: h, at: deadline) }
            slots[Int(h)] = item
            inFlightCount += 1
            counts.deliveredTotal += 1
            out.append(
                PipelineDelivery(
                    id: item.id, payload: payload, priority: item.priority, deliveries: item.deliveries,
                    takenAt: now, ackDeadline: item.ackDeadline, fence: fence))
        }
        return out
    }

    /// Checks a requested ack limit and returns the one that applies.
    func effectiveAckSeconds(_ requested: Double?) throws(PipelineError) -> Double {
        guard let requested else { return config.ackSeconds }
        guard Durations.isAllowed(requested) else {
            throw .invalid(field: "ack_seconds", message: Durations.range())
        }
        if config.ackSeconds == 0 { return requested }
        guard requested > 0 else {
            throw .invalid(
                field: "ack_seconds", message: "0 (no limit) is only allowed when the pipeline's ack_seconds is 0")
        }
        return Swift.min(requested, config.ackSeconds)
    }

    // MARK: - Consume, release, cancel

    /// The in-flight item is done and leaves the pipeline.
    ///
    /// - Parameter fence: when given, must be the item's latest hand-out.
    /// - Throws: `.notFound`; `.notInFlight(current:)` when it is not in flight
    ///   (or `fence` belongs to an earlier hand-out).
    @discardableResult
    package mutating func consume(_ id: String, fence: Int64? = nil, now: Timestamp) throws(PipelineError)
        -> PipelineItem
    {
        expire(now: now)
        let h = try inFlightHandle(id, fence: fence)
        var item = vacate(h)
        storage.release(Self.storedBytes(item))
        inFlightCount -= 1
        counts.consumedTotal += 1
        changes.formUnion([.itemsAvailable, .roomAvailable])
        item.ackDeadline = nil
        item.status = .consumed
        moved(id)
        remember(item)
        return item
    }

    /// The in-flight item goes back to the front of the buffer, or with a
    /// delay, to the front when the delay ends; an item already handed out
    /// `max_deliveries` times moves to the dead list instead.
    ///
    /// - Throws: like `consume`; `.invalid` for a bad delay.
    @discardableResult
    mutating func release(
        _ id: String, delaySeconds: Double? = nil, fence: Int64? = nil, now: Timestamp
    ) throws(PipelineError) -> PipelineItem {
        if let delaySeconds, !Durations.isAllowed(delaySeconds) {
            throw .invalid(field: "delay_seconds", message: Durations.range())
        }
        expire(now: now)
        let h = try inFlightHandle(id, fence: fence)
        return giveBack(h, delaySeconds: delaySeconds ?? 0, now: now)
    }

    /// Moves an in-flight item's ack deadline to now + `ackSeconds` (capped
    /// at the pipeline's `ack_seconds`; nil: the pipeline's), or leaves it
    /// where it is when that is later: an extend never shortens. An item
    /// with no deadline keeps none; 0 removes the deadline (only when the
    /// pipeline's `ack_seconds` is 0). Counts in `extended_total`.
    ///
    /// - Throws: like `consume`; `.invalid` for a bad `ackSeconds`.
    @discardableResult
    mutating func extend(
        _ id: String, ackSeconds: Double? = nil, fence: Int64? = nil, now: Timestamp
    ) throws(PipelineError) -> PipelineItem {
        let ack = try effectiveAckSeconds(ackSeconds)
        expire(now: now)
        let h = try inFlightHandle(id, fence: fence)
        guard var item = slots[Int(h)] else { preconditionFailure("no item for handle") }
        counts.extendedTotal += 1
        guard let current = item.ackDeadline else { return item }
        if ack == 0 {
            // Without a token the filed deadline is stale.
            item.ackDeadline = nil
            item.timerToken = PipelineItem.noTimer
        } else {
            let wanted = now.adding(seconds: ack)
            guard current < wanted else { return item }
            item.ackDeadline = wanted
            schedule(&item, handle: h, at: wanted)
        }
        slots[Int(h)] = item
        return item
    }

    /// Stops (true) or resumes (false) hand-outs; resuming wakes waiting consumers.
    mutating func setPaused(_ paused: Bool) {
        if self.paused && !paused { changes.insert(.itemsAvailable) }
        self.paused = paused
    }

    /// The hand-out `fence` of `id` never reached its consumer: the item goes
    /// back to the front of the buffer as if that hand-out had not happened
    /// (`deliveries` one less, so it never goes to the dead list for it; with
    /// no hand-out left, `taken_at` and `fence` are null again).
    /// `delivered_total` keeps counting it: a total never goes down. Nil,
    /// changing nothing, when the item is no longer in flight under that fence.
    mutating func undeliver(_ id: String, fence: Int64, now: Timestamp) -> PipelineItem? {
        expire(now: now)
        guard let h = handles[id], var item = slots[Int(h)], item.status == .inFlight, item.fence == fence else {
            return nil
        }
        item.deliveries -= 1
        if item.deliveries == 0 {
            item.takenAt = nil
            item.fence = nil
        }
        slots[Int(h)] = item
        return giveBack(h, delaySeconds: 0, now: now)
    }

    /// Removes a ready, delayed or dead item; a remembered finished item is
    /// returned as it is.
    ///
    /// - Throws: `.notFound`; `.inFlight` for an in-flight item.
    @discardableResult
    mutating func cancel(_ id: String, now: Timestamp) throws(PipelineError) -> PipelineItem {
        expire(now: now)
        if let item = finished.item(id) { return item }
        var cancelled: PipelineItem
        if let item = dead.remove(id) {
            cancelled = item
        } else {
            guard let h = handles[id], let item = slots[Int(h)] else { throw .notFound(id) }
            switch item.status {
            case .inFlight:
                throw .inFlight
            case .ready:
                ready.remove(h)
            case .delayed:
                delayedCount -= 1
            case .dead, .consumed, .cancelled:
                preconditionFailure("\(item.status) item in a slot")
            }
            changes.insert(.roomAvailable)
            cancelled = vacate(h)
        }
        storage.release(Self.storedBytes(cancelled))
        counts.cancelledTotal += 1
        cancelled.status = .cancelled
        moved(id)
        remember(cancelled)
        return cancelled
    }

    /// Keeps a finished item's record, without its payload, among the last
    /// `history`; it is charged as its id alone.
    private mutating func remember(_ item: PipelineItem) {
        guard config.history > 0 else { return }
        var record = item
        record.payload = .null
        record.ackDeadline = nil
        storage.charge(StorageBudget.cost(record.id))
        finished.append(record)
        trimFinished()
    }

    /// Forgets the oldest finished items beyond `history`.
    private mutating func trimFinished() {
        for item in finished.trim(to: config.history) { storage.release(StorageBudget.cost(item.id)) }
    }

    /// Whether a push of this id answers an existing item: the pipeline
    /// holds it, or remembers it as finished within `dedup_seconds` of its push.
    private func isKnown(_ id: String, now: Timestamp) -> Bool {
        if handles[id] != nil || dead.contains(id) { return true }
        guard let record = finished.item(id) else { return false }
        return isDuplicate(record, now: now)
    }

    /// A push at `now` of a finished item's id repeats that item's push.
    private func isDuplicate(_ record: PipelineItem, now: Timestamp) -> Bool {
        config.dedupSeconds > 0 && now < record.createdAt.adding(seconds: config.dedupSeconds)
    }

    // MARK: - Dead list

    /// Moves dead items back to the buffer (oldest first, to the back, with
    /// `deliveries` reset) while there is room; returns how many moved.
    mutating func redrive(now: Timestamp) -> Int {
        expire(now: now)
        var moved = 0
        while hasRoom(), var item = dead.popOldest() {
            item.deliveries = 0
            item.deadAt = nil
            item.takenAt = nil
            item.fence = nil
            item.ackDeadline = nil
            item.availableAt = now
            let h = allocate(item)
            makeReady(h, front: false)
            moved += 1
        }
        return moved
    }

    /// The oldest `limit` dead items, oldest first.
    func deadItems(limit: Int) -> [PipelineItem] { dead.oldest(limit) }

    // MARK: - Config and filters

    /// Changes the mutable config. A larger capacity or `max_in_flight` takes
    /// effect at once; a smaller capacity evicts nothing (pushes wait until the
    /// buffer shrinks) but trims the dead list; a new `ack_seconds` applies to
    /// later hand-outs and a new `max_deliveries` to later returns; `paused`
    /// stops or resumes hand-outs.
    package mutating func apply(_ patch: PipelinePatch, now: Timestamp) {
        expire(now: now)
        let old = config
        config = patch.applied(to: config)
        if config.capacity > old.capacity { changes.insert(.roomAvailable) }
        if config.maxInFlight > old.maxInFlight { changes.insert(.itemsAvailable) }
        if let paused = patch.paused { setPaused(paused) }
        trimDead()
        trimFinished()
    }

    /// Gives back every byte this pipeline holds: it was deleted.
    mutating func releaseStorage() { storage.releaseAll() }

    /// Drops the oldest dead items beyond `capacity`; they leave the pipeline.
    private mutating func trimDead() {
        let dropped = dead.trim(to: config.capacity)
        counts.deadDroppedTotal += dropped.count
        for item in dropped { storage.release(Self.storedBytes(item)) }
    }

    /// At least what a delivery of `payload` adds to a take's answer: its
    /// fields, its id, and the payload's encoded size.
    static func deliveryBytes(id: String, payload: JSONValue) -> Int {
        256 + id.utf8.count + payload.encodedSizeBound
    }

    /// What an item is charged: its id and stored payload.
    static func storedBytes(_ item: PipelineItem) -> Int {
        StorageBudget.cost(item.id, payload: item.payload)
    }

    /// What a push is priced at before its id exists (a server id at its
    /// fixed length).
    static func price(_ r: PipelinePushRequest) -> Int {
        StorageBudget.cost(r.id, payload: r.payload) + (r.id == nil ? IDGenerator.length : 0)
    }

    /// Adds or replaces a filter; true when it is new.
    ///
    /// - Throws: `.invalid` for a bad name or beyond `PipelineFilter.Limits.count` filters.
    mutating func putFilter(name: String, _ filter: PipelineFilter) throws(PipelineError) -> Bool {
        guard Names.isValid(name) else {
            throw .invalid(field: "name", message: "must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
        }
        guard filters[name] != nil || filters.count < PipelineFilter.Limits.count else {
            throw .invalid(field: "filters", message: "a pipeline has at most \(PipelineFilter.Limits.count) filters")
        }
        return filters.put(name: name, filter)
    }

    /// Removes a filter.
    ///
    /// - Throws: `.notFound(name)` when there is none.
    mutating func removeFilter(name: String) throws(PipelineError) {
        guard filters.remove(name: name) else { throw .notFound(name) }
    }

    // MARK: - Reading

    /// The item with this id: live, dead, or remembered as finished.
    package func item(_ id: String) -> PipelineItem? {
        if let h = handles[id] { return slots[Int(h)] }
        return dead.item(id) ?? finished.item(id)
    }

    /// 1-based place of a ready item in hand-out order.
    package func position(of id: String) -> Int? {
        guard let h = handles[id], slots[Int(h)]?.status == .ready else { return nil }
        return ready.rank(of: h)
    }

    /// The first `limit` ready items in hand-out order (stored payloads).
    func readyItems(limit: Int) -> [PipelineItem] {
        ready.prefix(Swift.max(0, limit)).compactMap { slots[Int($0)] }
    }

    /// Up to `limit` ready items in hand-out order after `cursor` (nil: from
    /// the first), each with its cursor, and whether more follow.
    func readyPage(limit: Int, after cursor: PipelineCursor?) -> (
        items: [PipelineItem], cursors: [String], more: Bool
    ) {
        let limit = Swift.min(Swift.max(0, limit), Int.max - 1)
        let handles: [Int32]
        if case .ready(let priority, let seq) = cursor {
            handles = ready.prefix(limit + 1, after: (priority, seq))
        } else {
            handles = ready.prefix(limit + 1)
        }
        let listed = handles.prefix(limit)
        return (
            listed.compactMap { slots[Int($0)] },
            listed.map { h in
                let key = ready.key(of: h)
                return PipelineCursor.ready(priority: key.priority, seq: key.seq).text
            },
            handles.count > limit
        )
    }

    /// Up to `limit` dead items, oldest first, after `cursor` (nil: from the
    /// oldest), each with its cursor, and whether more follow.
    func deadPage(limit: Int, after cursor: PipelineCursor?) -> (
        items: [PipelineItem], cursors: [String], more: Bool
    ) {
        var serial: Int64?
        if case .dead(let s) = cursor { serial = s }
        let page = dead.page(after: serial, limit: Swift.max(0, limit))
        return (page.items, page.serials.map { PipelineCursor.dead(serial: $0).text }, page.more)
    }

    // MARK: - Deadlines and moves

    /// Puts a delivered (`.inFlight`) item back: to the dead list when it has
    /// had `max_deliveries` hand-outs, else to the front now or after `delaySeconds`.
    private mutating func giveBack(_ h: Int32, delaySeconds: Double, now: Timestamp) -> PipelineItem {
        guard var item = slots[Int(h)] else { preconditionFailure("no item for handle") }
        moved(item.id)
        inFlightCount -= 1
        changes.insert(.itemsAvailable)
        item.ackDeadline = nil
        if item.deliveries >= config.maxDeliveries {
            slots[Int(h)] = item
            return kill(h, now: now)
        }
        if delaySeconds > 0 {
            item.status = .delayed
            item.toFront = true
            item.availableAt = now.adding(seconds: delaySeconds)
            schedule(&item, handle: h, at: item.availableAt)
            slots[Int(h)] = item
            delayedCount += 1
        } else {
            item.availableAt = now
            slots[Int(h)] = item
            makeReady(h, front: true)
        }
        return slots[Int(h)]!
    }

    /// Makes a slotted item ready, at the front or the back of its priority.
    private mutating func makeReady(_ h: Int32, front: Bool) {
        guard var item = slots[Int(h)] else { return }
        if front {
            frontSeq -= 1
            item.seq = frontSeq
        } else {
            backSeq += 1
            item.seq = backSeq
        }
        item.status = .ready
        moved(item.id)
        item.toFront = false
        // Whatever deadline it had is stale: a later hand-out without one must not match it.
        item.timerToken = PipelineItem.noTimer
        slots[Int(h)] = item
        ready.insert(h, priority: Int32(item.priority), seq: item.seq)
        changes.insert(.itemsAvailable)
    }

    /// Moves a slotted item (no longer ready, delayed or in flight) to the dead list.
    private mutating func kill(_ h: Int32, now: Timestamp) -> PipelineItem {
        var item = vacate(h)
        item.status = .dead
        moved(item.id)
        item.deadAt = now
        item.ackDeadline = nil
        dead.append(item)
        counts.deadTotal += 1
        trimDead()
        changes.insert(.roomAvailable)
        return item
    }

    /// Files a heap entry for the item's current deadline.
    private mutating func schedule(_ item: inout PipelineItem, handle: Int32, at deadline: Timestamp) {
        timerSeq += 1
        item.timerToken = timerSeq
        timers.push(DeadlineHeap.Entry(deadline: deadline.micros, order: timerSeq, handle: handle))
    }

    /// Applies every deadline at or before `now`, in deadline order.
    mutating func expire(now: Timestamp) {
        while let top = timers.min, top.deadline <= now.micros {
            timers.popMin()
            guard isLive(top), let item = slots[Int(top.handle)] else { continue }
            switch item.status {
            case .delayed:
                delayedCount -= 1
                makeReady(top.handle, front: item.toFront)
            case .inFlight:
                // Back to the front for another hand-out, or dead after the last one.
                let comesBack = item.deliveries < config.maxDeliveries
                _ = giveBack(top.handle, delaySeconds: 0, now: Timestamp(micros: top.deadline))
                if comesBack { counts.redeliveredTotal += 1 }
            case .ready, .dead, .consumed, .cancelled:
                break
            }
        }
        if timers.count > 64 && timers.count > 2 * (delayedCount + inFlightCount) {
            let slots = self.slots
            timers.compact { entry in
                guard let item = slots[Int(entry.handle)] else { return true }
                return item.timerToken != entry.order || (item.status != .delayed && item.status != .inFlight)
            }
        }
    }

    /// The earliest pending deadline (a delay ending or an ack deadline).
    mutating func nextDeadline() -> Timestamp? {
        while let top = timers.min {
            if isLive(top) { return Timestamp(micros: top.deadline) }
            timers.popMin()
        }
        return nil
    }

    private func isLive(_ entry: DeadlineHeap.Entry) -> Bool {
        guard Int(entry.handle) < slots.count, let item = slots[Int(entry.handle)] else { return false }
        return item.timerToken == entry.order && (item.status == .delayed || item.status == .inFlight)
    }

    // MARK: - Private

    package static func validate(_ r: PipelinePushRequest, field prefix: String) throws(PipelineError) {
        if let id = r.id, !Names.isValid(id) {
            throw .invalid(field: prefix + "id", message: "must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
        }
        guard PipelineConfig.Limits.priority.contains(r.priority) else {
            throw .invalid(field: prefix + "priority", message: "must be between -1000000 and 1000000")
        }
        if let d = r.delaySeconds, !Durations.isAllowed(d) {
            throw .invalid(field: prefix + "delay_seconds", message: Durations.range())
        }
    }

    /// The item a push of `id` repeats (counted in `deduplicated_total`), or
    /// nil when the push adds one: a finished item's record past
    /// `dedup_seconds` is forgotten here, so the new item takes its id.
    private mutating func existingResult(_ id: String, now: Timestamp) -> PipelinePushResult? {
        if handles[id] == nil, !dead.contains(id), let record = finished.item(id), !isDuplicate(record, now: now) {
            _ = finished.remove(id)
            storage.release(StorageBudget.cost(id))
            return nil
        }
        guard let item = item(id) else { return nil }
        counts.deduplicatedTotal += 1
        return PipelinePushResult(item: item, position: position(of: id), created: false)
    }

    /// Stores a new item whose push reserved `priced` bytes.
    private mutating func insert(_ r: PipelinePushRequest, now: Timestamp, priced: Int) -> PipelinePushResult {
        let id = r.id ?? makeID(now: now)
        let delay = r.delaySeconds ?? 0
        var item = PipelineItem(
            id: id, payload: r.payload, priority: r.priority, status: .delayed, deliveries: 0, createdAt: now,
            availableAt: delay > 0 ? now.adding(seconds: delay) : now)
        counts.pushedTotal += 1
        storage.charge(Self.storedBytes(item) - priced)
        let h = allocate(item)
        if delay > 0 {
            schedule(&item, handle: h, at: item.availableAt)
            slots[Int(h)] = item
            delayedCount += 1
            return PipelinePushResult(item: item, position: nil, created: true)
        }
        makeReady(h, front: false)
        return PipelinePushResult(item: slots[Int(h)]!, position: ready.rank(of: h), created: true)
    }

    private mutating func makeID(now: Timestamp) -> String {
        while true {
            let id = serverIDs.next(now: now)
            if handles[id] == nil && !dead.contains(id) && !finished.contains(id) { return id }
        }
    }

    private mutating func allocate(_ item: PipelineItem) -> Int32 {
        let h: Int32
        if let reused = freeHandles.popLast() {
            h = reused
            slots[Int(h)] = item
        } else {
            h = Int32(slots.count)
            slots.append(item)
        }
        handles[item.id] = h
        return h
    }

    /// Frees the item's slot and returns the item.
    @discardableResult
    private mutating func vacate(_ h: Int32) -> PipelineItem {
        guard let item = slots[Int(h)] else { preconditionFailure("no item for handle") }
        slots[Int(h)] = nil
        freeHandles.append(h)
        handles[item.id] = nil
        return item
    }

    private func inFlightHandle(_ id: String, fence: Int64?) throws(PipelineError) -> Int32 {
        guard let h = handles[id], let item = slots[Int(h)] else {
            if let item = dead.item(id) ?? finished.item(id) { throw .notInFlight(current: item.status.rawValue) }
            throw .notFound(id)
        }
        guard item.status == .inFlight else { throw .notInFlight(current: item.status.rawValue) }
        if let fence, fence != item.fence { throw .notInFlight(current: item.status.rawValue) }
        return h
    }
}
