// The engine's moving parts: time, the waiting line, dedup, grants, finishing.

extension QueueEngine {
    /// What happens to a visitor entering the waiting line.
    enum Dedup {
        /// It takes its place in the line.
        case enter
        /// It is merged into this waiting visitor.
        case merge(Int32)
        /// It and this waiting visitor cancel each other.
        case cancel(Int32)
    }

    // MARK: - Operation frame

    /// Starts an operation: forgets finished visitors beyond `history` (those
    /// finished by the previous operation stay until now, so its answers and
    /// its waiters could still see them), then applies everything due.
    mutating func begin(_ now: Timestamp) {
        changed.removeAll(keepingCapacity: changed.capacity <= 1024)
        while finished.count > config.history, let h = finished.popFirst() { evict(h) }
        applyDue(now)
    }

    /// Ends an operation: drops stale deadlines from the top so that
    /// `nextDeadline` is exact, and compacts the heap when stale entries
    /// outnumber live ones (extends and early finishes leave them behind).
    mutating func end() {
        while let e = timeline.min, !isCurrent(e) { timeline.popMin() }
        if timeline.count > 64 + 2 * (counts.delayed + counts.holding) {
            let records = self.records  // shares storage; the closure must not capture self
            timeline.compact { !Self.isCurrent($0, in: records) }
        }
    }

    /// True when `e` still describes its visitor: a delay end or a hold expiry to come.
    func isCurrent(_ e: DeadlineHeap.Entry) -> Bool { Self.isCurrent(e, in: records) }

    static func isCurrent(_ e: DeadlineHeap.Entry, in records: [VisitorRecord]) -> Bool {
        let i = Int(e.handle)
        return records[i].deadline == e.deadline && (records[i].status == .delayed || records[i].status == .granted)
    }

    /// Processes due deadlines one instant at a time, granting after each instant.
    mutating func applyDue(_ now: Timestamp) {
        while let top = timeline.min, top.deadline <= now.micros {
            let t = top.deadline
            while let e = timeline.min, e.deadline == t {
                timeline.popMin()
                guard isCurrent(e) else { continue }
                let h = e.handle
                if records[Int(h)].status == .delayed {
                    counts.delayed -= 1
                    records[Int(h)].status = .waiting
                    changed.append(h)
                    enterLine(h, at: t, dedup(key: records[Int(h)].key, action: records[Int(h)].action))
                } else {
                    finish(h, as: .expired, at: t)
                }
            }
            grantFree(now)
        }
    }

    // MARK: - Validation and creation

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
        if let id = r.id, !Names.isValid(id) {
            throw .invalid(field: "id", message: "must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
        }
        if let key = r.key, !Names.isValidKey(key) { throw .invalid(field: "key", message: "must be 1 to 256 characters") }
        if let a = r.action, !Names.isValidKey(a) { throw .invalid(field: "action", message: "must be 1 to 256 characters") }
        guard QueueConfig.Limits.priority.contains(r.priority) else {
            throw .invalid(field: "priority", message: "must be between -1000000 and 1000000")
        }
        if let d = r.delaySeconds, !(d.isFinite && QueueConfig.Limits.seconds.contains(d)) {
            throw .invalid(field: "delay_seconds", message: "must be between 0 and 31536000")
        }
        try checkHold(r.holdSeconds)
    }

    /// A client may ask for a shorter hold than the queue's, never a longer
    /// one, and for 0 (no limit) only when the queue has no limit.
    func checkHold(_ seconds: Double?) throws(QueueError) {
        guard let s = seconds else { return }
        guard s.isFinite, QueueConfig.Limits.seconds.contains(s) else {
            throw .invalid(field: "hold_seconds", message: "must be between 0 and 31536000")
        }
        let limit = config.holdSeconds
        guard limit > 0 else { return }
        let shown = JSONValue.seconds(limit).jsonString
        if s == 0 {
            throw .invalid(field: "hold_seconds", message: "must be more than 0: this queue limits holds to \(shown) s")
        }
        if s > limit {
            throw .invalid(field: "hold_seconds", message: "must be at most \(shown), the queue's hold_seconds")
        }
    }

    /// 429 with a Retry-After of about one slot's turnover: mean hold ÷ capacity.
    func full() -> QueueError {
        let hold = holds.mean ?? Double(holdMicros)
        let seconds = (hold / 1_000_000 / Double(max(1, config.capacity))).rounded(.up)
        return .full(retryAfterSeconds: Int(min(3600, max(1, seconds))))
    }

    mutating func create(_ r: VisitorRequest, status: VisitorStatus, now: Timestamp) -> Int32 {
        let h = vacant.popLast() ?? Int32(records.count)
        let id: String
        if let given = r.id {
            id = given
            ids[id] = h
        } else {
            id = assignServerID(h)
        }
        var rec = VisitorRecord(id: id, enqueuedAt: now.micros, status: status)
        rec.key = r.key
        rec.action = r.action
        rec.payload = r.payload
        rec.priority = Int32(r.priority)
        rec.hold = r.holdSeconds.map(Self.micros) ?? -1
        if Int(h) == records.count {
            records.append(rec)
        } else {
            records[Int(h)] = rec
        }
        counts.enqueuedTotal += 1
        return h
    }

    /// Indexes `h` under the next free `v` + base-36 counter, skipping ids a
    /// client already took (one hash lookup when the id is free).
    mutating func assignServerID(_ h: Int32) -> String {
        while true {
            serverIDs += 1
            let id = "v" + String(serverIDs, radix: 36)
            guard let taken = ids.updateValue(h, forKey: id) else { return id }
            ids[id] = taken
        }
    }

    mutating func configChanged() {
        holdMicros = Self.micros(config.holdSeconds)
        oppositesOf = [:]
        for pair in config.opposites where pair.count == 2 {
            oppositesOf[pair[0], default: []].append(pair[1])
            oppositesOf[pair[1], default: []].append(pair[0])
        }
    }

    // MARK: - Dedup

    func isOpposite(_ a: String?, _ b: String?) -> Bool {
        guard let a, let b, let list = oppositesOf[a] else { return false }
        return list.contains(b)
    }

    /// The SPEC §2 rules, against waiting visitors only; duplicates first.
    func dedup(key: String?, action: String?) -> Dedup {
        guard let key else { return .enter }
        switch config.dedup {
        case .off:
            return .enter
        case .key:
            if let t = lastWithPair[KeyAction(key: key, action: action)] { return .merge(t) }
            if let t = lastWithKey[key], isOpposite(action, records[Int(t)].action) { return .cancel(t) }
            return .enter
        case .adjacent:
            let t = lastArrival
            guard t != VisitorRecord.none, records[Int(t)].key == key else { return .enter }
            if records[Int(t)].action == action { return .merge(t) }
            if isOpposite(action, records[Int(t)].action) { return .cancel(t) }
            return .enter
        }
    }

    /// `h` (status `waiting`, not yet in any list) enters the line at `t`,
    /// unless `outcome` (its `dedup` result, just computed) merges or cancels it.
    mutating func enterLine(_ h: Int32, at t: Int64, _ outcome: Dedup) {
        records[Int(h)].deadline = t
        switch outcome {
        case .enter:
            linkWaiting(h)
        case .merge(let into):
            related[h] = records[Int(into)].id
            settle(h, as: .merged, at: t, reason: nil)
        case .cancel(let other):
            related[h] = records[Int(other)].id
            related[other] = records[Int(h)].id
            finish(other, as: .cancelled, at: t, reason: .opposite)
            settle(h, as: .cancelled, at: t, reason: .opposite)
        }
    }

    // MARK: - Lists

    mutating func linkWaiting(_ h: Int32) {
        let i = Int(h)
        line.insert(h, priority: records[i].priority, seq: nextSeq)
        nextSeq += 1
        records[i].linePrev = lastArrival
        if lastArrival != VisitorRecord.none {
            records[Int(lastArrival)].lineNext = h
        } else {
            firstArrival = h
        }
        lastArrival = h
        if let key = records[i].key {
            if let prev = lastWithKey.updateValue(h, forKey: key) {
                records[i].keyPrev = prev
                records[Int(prev)].keyNext = h
            }
            if let prev = lastWithPair.updateValue(h, forKey: KeyAction(key: key, action: records[i].action)) {
                records[i].pairPrev = prev
                records[Int(prev)].pairNext = h
            }
        }
        counts.waiting += 1
    }

    mutating func unlinkWaiting(_ h: Int32) {
        let i = Int(h)
        line.remove(h)
        let r = records[i]
        if r.linePrev != VisitorRecord.none {
            records[Int(r.linePrev)].lineNext = r.lineNext
        } else {
            firstArrival = r.lineNext
        }
        if r.lineNext != VisitorRecord.none {
            records[Int(r.lineNext)].linePrev = r.linePrev
        } else {
            lastArrival = r.linePrev
        }
        if let key = r.key {
            if r.keyPrev != VisitorRecord.none { records[Int(r.keyPrev)].keyNext = r.keyNext }
            if r.keyNext != VisitorRecord.none {
                records[Int(r.keyNext)].keyPrev = r.keyPrev
            } else if r.keyPrev != VisitorRecord.none {
                lastWithKey[key] = r.keyPrev
            } else {
                lastWithKey.removeValue(forKey: key)
            }
            if r.pairPrev != VisitorRecord.none { records[Int(r.pairPrev)].pairNext = r.pairNext }
            if r.pairNext != VisitorRecord.none {
                records[Int(r.pairNext)].pairPrev = r.pairPrev
            } else if r.pairPrev != VisitorRecord.none {
                lastWithPair[KeyAction(key: key, action: r.action)] = r.pairPrev
            } else {
                lastWithPair.removeValue(forKey: KeyAction(key: key, action: r.action))
            }
        }
        records[i].linePrev = VisitorRecord.none
        records[i].lineNext = VisitorRecord.none
        records[i].keyPrev = VisitorRecord.none
        records[i].keyNext = VisitorRecord.none
        records[i].pairPrev = VisitorRecord.none
        records[i].pairNext = VisitorRecord.none
        counts.waiting -= 1
    }

    mutating func linkHolder(_ h: Int32) {
        records[Int(h)].linePrev = lastHolder
        if lastHolder != VisitorRecord.none {
            records[Int(lastHolder)].lineNext = h
        } else {
            firstHolder = h
        }
        lastHolder = h
        counts.holding += 1
    }

    mutating func unlinkHolder(_ h: Int32) {
        let r = records[Int(h)]
        if r.linePrev != VisitorRecord.none {
            records[Int(r.linePrev)].lineNext = r.lineNext
        } else {
            firstHolder = r.lineNext
        }
        if r.lineNext != VisitorRecord.none {
            records[Int(r.lineNext)].linePrev = r.linePrev
        } else {
            lastHolder = r.linePrev
        }
        records[Int(h)].linePrev = VisitorRecord.none
        records[Int(h)].lineNext = VisitorRecord.none
        counts.holding -= 1
    }

    // MARK: - Grants and endings

    /// The hold a grant or a default extend gives, in µs; 0 = no limit.
    func effectiveHold(_ h: Int32) -> Int64 {
        let own = records[Int(h)].hold
        if holdMicros == 0 { return max(0, own) }
        return own > 0 ? min(own, holdMicros) : holdMicros
    }

    /// Grants free slots in priority-then-arrival order.
    mutating func grantFree(_ now: Timestamp) {
        while counts.holding < config.capacity, let h = line.first {
            unlinkWaiting(h)
            let i = Int(h)
            records[i].status = .granted
            records[i].grantedAt = now.micros
            records[i].fence = nextFence
            nextFence += 1
            let hold = effectiveHold(h)
            if hold > 0 {
                records[i].deadline = now.micros + hold
                timeline.push(.init(deadline: now.micros + hold, order: records[i].fence, handle: h))
            } else {
                records[i].deadline = VisitorRecord.noTime
            }
            linkHolder(h)
            counts.grantedTotal += 1
            changed.append(h)
        }
    }

    /// Takes `h` out of whatever it is in, then gives it its final status.
    mutating func finish(_ h: Int32, as status: VisitorStatus, at t: Int64, reason: CancelReason? = nil) {
        let i = Int(h)
        switch records[i].status {
        case .delayed:
            counts.delayed -= 1
            records[i].deadline = VisitorRecord.noTime
        case .waiting:
            unlinkWaiting(h)
        case .granted:
            unlinkHolder(h)
            holds.record(t - records[i].grantedAt)
        default:
            return
        }
        settle(h, as: status, at: t, reason: reason)
    }

    /// Records a final status for a visitor that is in no list.
    mutating func settle(_ h: Int32, as status: VisitorStatus, at t: Int64, reason: CancelReason?) {
        let i = Int(h)
        records[i].status = status
        records[i].finishedAt = t
        records[i].reason = reason
        switch status {
        case .completed: counts.completedTotal += 1
        case .released: counts.releasedTotal += 1
        case .expired: counts.expiredTotal += 1
        case .cancelled: counts.cancelledTotal += 1
        case .merged: counts.mergedTotal += 1
        case .delayed, .waiting, .granted: preconditionFailure("settle(_:as:) needs a final status")
        }
        finished.append(h)
        changed.append(h)
    }

    /// Forgets a finished visitor: its id is free again and its slot reusable.
    mutating func evict(_ h: Int32) {
        ids.removeValue(forKey: records[Int(h)].id)
        if records[Int(h)].status == .merged || records[Int(h)].reason == .opposite { related[h] = nil }
        records[Int(h)] = .vacant
        vacant.append(h)
    }
}
