// Admission: what a request may ask for, and how a visitor gets its slot and id.

extension QueueEngine {
    static func micros(_ seconds: Double) -> Int64 {
        seconds > 0 ? max(1, Timestamp.micros(fromSeconds: seconds)) : 0
    }

    func handle(_ id: String) throws(QueueError) -> Int32 {
        guard let h = ids[id] else { throw .notFound("visitor \"\(id)\"") }
        return h
    }

    /// Checks what `VisitorRequest.parse` checks (for callers that build requests
    /// in code) and whether the hold suits this queue.
    func check(_ r: VisitorRequest) throws(QueueError) {
        if let problem = Self.requestProblem(r) { throw problem }
        try checkHold(r.holdSeconds)
    }

    /// What is wrong with `r` whatever the queue's config (its hold aside), or
    /// nil: the checks of `check` a store outside the engine makes before the
    /// config is known.
    package static func requestProblem(_ r: VisitorRequest) -> QueueError? {
        if let id = r.id, !Names.isValid(id) {
            return .invalid(field: "id", message: "must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
        }
        if let key = r.key, !Names.isValidKey(key) {
            return .invalid(field: "key", message: "must be 1 to 256 characters")
        }
        if let a = r.action, !Names.isValidKey(a) {
            return .invalid(field: "action", message: "must be 1 to 256 characters")
        }
        guard QueueConfig.Limits.priority.contains(r.priority) else {
            return .invalid(field: "priority", message: "must be between -1000000 and 1000000")
        }
        if let d = r.delaySeconds, !Durations.isAllowed(d) {
            return .invalid(field: "delay_seconds", message: Durations.range())
        }
        return nil
    }

    /// A client may ask for a shorter hold than the queue's, never a longer
    /// one, and for 0 (no limit) only when the queue has no limit; under
    /// `.ownOverrides` any hold in range is allowed.
    func checkHold(_ seconds: Double?) throws(QueueError) {
        if let problem = Self.holdRangeProblem(seconds) { throw problem }
        guard let s = seconds, holdPolicy == .atMostResource,
            let problem = Self.holdLimitProblem(s, limit: config.holdSeconds)
        else { return }
        throw problem
    }

    /// A hold outside the allowed durations, or nil.
    package static func holdRangeProblem(_ seconds: Double?) -> QueueError? {
        guard let s = seconds, !Durations.isAllowed(s) else { return nil }
        return .invalid(field: "hold_seconds", message: Durations.range())
    }

    /// Under `.atMostResource`: a hold of `seconds` where the queue allows
    /// `limit` (0 = no limit) that is too long, or nil.
    package static func holdLimitProblem(_ seconds: Double, limit: Double) -> QueueError? {
        HoldPolicy.excess(seconds, limit: limit, resource: "queue", holds: "holds", field: "hold_seconds").map {
            .invalid(field: "hold_seconds", message: $0)
        }
    }

    /// 429 with a Retry-After of about one slot's turnover: mean hold ÷ capacity.
    func full() -> QueueError {
        let hold = holds.mean ?? Double(holdMicros)
        let seconds = (hold / 1_000_000 / Double(max(1, config.capacity))).rounded(.up)
        return .full(retryAfterSeconds: Int(min(3600, max(1, seconds))))
    }

    /// Stores a new record, charged to the budget (a server-made id priced
    /// at its fixed length), or throws `storageFull` having changed nothing.
    mutating func create(_ r: VisitorRequest, status: VisitorStatus, now: Timestamp) throws(QueueError) -> Int32 {
        let priced =
            StorageBudget.cost(r.id, r.key, r.action, payload: r.payload) + (r.id == nil ? IDGenerator.length : 0)
        try reserve(priced)
        let h = vacant.popLast() ?? Int32(records.count)
        let id: String
        if let given = r.id {
            id = given
            ids[id] = h
        } else {
            id = assignServerID(h, now: now)
        }
        var rec = VisitorRecord(id: id, enqueuedAt: now.micros, status: status)
        rec.key = r.key
        rec.action = r.action
        rec.payload = r.payload
        rec.priority = Int32(r.priority)
        rec.hold = r.holdSeconds.map(Self.micros) ?? -1
        rec.watchOrder = nextWatchOrder
        nextWatchOrder += 1
        if Int(h) == records.count {
            records.append(rec)
        } else {
            records[Int(h)] = rec
        }
        counts.enqueuedTotal += 1
        return h
    }

    /// Takes `bytes` from the budget; when it is short, first forgets the
    /// finished visitors kept beyond `history` only by `dedup_seconds`
    /// (the oldest; none that this operation finished).
    private mutating func reserve(_ bytes: Int) throws(QueueError) {
        while true {
            do throws(StorageFull) {
                return try storage.reserve(bytes)
            } catch {
                guard keptByDedup > 0, let h = finished.popFirst() else { throw .storageFull(error) }
                keptByDedup -= 1
                evict(h)
            }
        }
    }

    /// What record `h` is charged: its id, key, action and payload.
    func storedBytes(_ h: Int32) -> Int {
        let r = records[Int(h)]
        return StorageBudget.cost(r.id, r.key, r.action, payload: r.payload)
    }

    /// Indexes `h` under the next generated id, skipping ids a client already
    /// took (one hash lookup when the id is free).
    mutating func assignServerID(_ h: Int32, now: Timestamp) -> String {
        while true {
            let id = serverIDs.next(now: now)
            guard let taken = ids.updateValue(h, forKey: id) else { return id }
            ids[id] = taken
        }
    }

    mutating func configChanged() {
        holdMicros = Self.micros(config.holdSeconds)
        idleMicros = Self.micros(config.idleSeconds)
        claimMicros = Self.micros(config.claimSeconds)
        dedupMicros = Self.micros(config.dedupSeconds)
        oppositesOf = [:]
        for pair in config.opposites where pair.count == 2 {
            oppositesOf[pair[0], default: []].append(pair[1])
            oppositesOf[pair[1], default: []].append(pair[0])
        }
    }
}
