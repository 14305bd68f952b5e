// The engine's moving parts: time, dedup, grants, finishing.

extension QueueEngine {
    /// What happens to a visitor entering the waiting line.
    enum Dedup {
        /// It takes its place in the line.
        case enter
        /// It is merged into this waiting visitor.
        case merge(Int32)
        /// It takes this waiting duplicate's place, which is merged into it.
        case replace(Int32)
        /// It and this waiting visitor cancel each other.
        case cancel(Int32)
    }

    // MARK: - Operation frame

    /// Starts an operation: forgets finished visitors beyond `history` whose
    /// `dedup_seconds` have passed (those finished by the previous operation
    /// stay until now, so its answers and its waiters could still see them),
    /// then applies everything due.
    mutating func begin(_ now: Timestamp) {
        operationTime = now.micros
        named = VisitorRecord.none
        changed.removeAll(keepingCapacity: changed.capacity <= 1024)
        withdrawn.removeAll()
        withdrawnViews.removeAll()
        while finished.count > config.history, let h = finished.first,
            records[Int(h)].finishedAt + dedupMicros <= now.micros
        {
            _ = finished.popFirst()
            evict(h)
        }
        keptByDedup = max(0, finished.count - config.history)
        applyDue(now)
    }

    /// Ends an operation: drops stale deadlines from the top so that
    /// `nextDeadline` is exact, and compacts the heap when stale entries
    /// outnumber live ones (extends and early finishes leave them behind).
    mutating func end() {
        while let e = timeline.min, !isCurrent(e) { timeline.popMin() }
        // Each delayed visitor has one current entry, each holder up to two
        // (expiry, claim), each waiting visitor one while idle checks are on.
        let live = counts.delayed + 2 * counts.holding + (idleMicros > 0 ? counts.waiting : 0)
        if timeline.count > 64 + 2 * live {
            let records = self.records  // shares storage; the closure must not capture self
            timeline.compact { !Self.isCurrent($0, in: records) }
        }
    }

    /// True when `e` still describes its visitor: a delay end or a hold expiry
    /// to come. The order (the delay's, or the grant's fence) tells it from an
    /// entry of an earlier visitor in a reused slot with the same deadline.
    func isCurrent(_ e: DeadlineHeap.Entry) -> Bool { Self.isCurrent(e, in: records) }

    static func isCurrent(_ e: DeadlineHeap.Entry, in records: SegmentedArray<VisitorRecord>) -> Bool {
        let r = records[Int(e.handle)]
        if watchOrders.contains(e.order) {
            return r.watch == e.deadline && r.watchOrder == e.order && (r.status == .waiting || r.status == .granted)
        }
        return r.deadline == e.deadline && r.fence == e.order && (r.status == .delayed || r.status == .granted)
    }

    /// Processes due deadlines one instant at a time, granting after each instant.
    mutating func applyDue(_ now: Timestamp) {
        while let top = timeline.min, top.deadline <= now.micros {
            let t = top.deadline
            while let e = timeline.min, e.deadline == t {
                timeline.popMin()
                guard isCurrent(e) else { continue }
                let h = e.handle
                if Self.watchOrders.contains(e.order) {
                    watchDue(h, at: t)
                } else if records[Int(h)].status == .delayed {
                    counts.delayed -= 1
                    records[Int(h)].status = .waiting
                    records[Int(h)].fence = VisitorRecord.noTime
                    // Idle time counts from the line entry: a delay is not silence.
                    records[Int(h)].heard = max(records[Int(h)].heard, t)
                    changed.append(h)
                    enterLine(h, at: t, dedup(key: records[Int(h)].key, action: records[Int(h)].action))
                    if records[Int(h)].status == .waiting { watchIdle(h) }
                } else {
                    finish(h, as: .expired, at: t)
                }
            }
            grantFree(now)
        }
    }

    // MARK: - Dedup

    func isOpposite(_ a: String?, _ b: String?) -> Bool {
        guard let a, let b, let list = oppositesOf[a] else { return false }
        return list.contains(b)
    }

    /// The rules of docs/api.md, "Order, dedup and opposites", against waiting visitors only; duplicates first.
    func dedup(key: String?, action: String?) -> Dedup {
        guard let key else { return .enter }
        switch config.dedup {
        case .off:
            return .enter
        case .key:
            if let t = lastWithPair[KeyAction(key: key, action: action)] { return duplicate(t) }
            if let t = lastWithKey[key], isOpposite(action, records[Int(t)].action) { return .cancel(t) }
            return .enter
        case .adjacent:
            let t = lastArrival
            guard t != VisitorRecord.none, records[Int(t)].key == key else { return .enter }
            if records[Int(t)].action == action { return duplicate(t) }
            if isOpposite(action, records[Int(t)].action) { return .cancel(t) }
            return .enter
        }
    }

    /// Meeting the waiting duplicate `t`: `dedup_keep` says which one stays.
    private func duplicate(_ t: Int32) -> Dedup {
        config.dedupKeep == .first ? .merge(t) : .replace(t)
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
        case .replace(let old):
            replaceWaiting(old, with: h)
            related[old] = records[Int(h)].id
            settle(old, as: .merged, at: t, reason: .replaced)
        case .cancel(let other):
            related[h] = records[Int(other)].id
            related[other] = records[Int(h)].id
            finish(other, as: .cancelled, at: t, reason: .opposite)
            settle(h, as: .cancelled, at: t, reason: .opposite)
        }
    }

    // MARK: - Grants and endings

    /// The hold a grant or a default extend gives, in µs; 0 = no limit.
    func effectiveHold(_ h: Int32) -> Int64 {
        let own = records[Int(h)].hold
        if holdPolicy == .ownOverrides && own >= 0 { return own }
        if holdMicros == 0 { return max(0, own) }
        return own > 0 ? min(own, holdMicros) : holdMicros
    }

    /// Grants free slots in priority-then-arrival order.
    mutating func grantFree(_ now: Timestamp) {
        while counts.holding < config.capacity, let h = line.first {
            unlinkWaiting(h)
            let i = Int(h)
            records[i].status = .granted
            waitHistogram.observe(micros: now.micros - records[i].deadline)  // while waiting, `deadline` is the arrival
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
            watchClaim(h, now: now.micros)
            counts.grantedTotal += 1
            changed.append(h)
        }
    }

    /// Takes `h` out of whatever it is in, then gives it its final status.
    mutating func finish(_ h: Int32, as status: VisitorStatus, at t: Int64, reason: FinishReason? = nil) {
        let i = Int(h)
        switch records[i].status {
        case .delayed:
            counts.delayed -= 1
            records[i].deadline = VisitorRecord.noTime
            records[i].fence = VisitorRecord.noTime
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
    mutating func settle(_ h: Int32, as status: VisitorStatus, at t: Int64, reason: FinishReason?) {
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
        storage.release(storedBytes(h))
        ids.removeValue(forKey: records[Int(h)].id)
        if records[Int(h)].status == .merged || records[Int(h)].reason == .opposite { related[h] = nil }
        records[Int(h)] = .vacant
        vacant.append(h)
    }
}
