// Snapshots of visitors for answers and waiters.

extension QueueEngine {
    /// The view of `h`; a waiting visitor's position is its rank in the line (O(log n)).
    func view(_ h: Int32) -> VisitorView {
        view(h, position: records[Int(h)].status == .waiting ? line.rank(of: h) : nil)
    }

    /// The view of `h` when its position is already known.
    func view(_ h: Int32, position: Int?) -> VisitorView {
        let r = records[Int(h)]
        var v = VisitorView(
            id: r.id, queue: name, key: r.key, action: r.action, payload: r.payload,
            priority: Int(r.priority), status: r.status, enqueuedAt: Timestamp(micros: r.enqueuedAt))
        if r.status == .waiting, let position {
            v.position = position
            switch estimatedWait(position: position) {
            case .seconds(let seconds): v.estimatedWaitSeconds = seconds
            case .unknown(let reason): v.estimatedWaitReason = reason
            }
        }
        if r.grantedAt != VisitorRecord.noTime {
            v.grantedAt = Timestamp(micros: r.grantedAt)
            v.fence = r.fence
            if r.deadline != VisitorRecord.noTime { v.expiresAt = Timestamp(micros: r.deadline) }
        }
        if r.finishedAt != VisitorRecord.noTime { v.finishedAt = Timestamp(micros: r.finishedAt) }
        if r.status == .merged { v.mergedInto = related[h] }
        if r.reason == .opposite { v.cancelledWith = related[h] }
        v.reason = r.reason?.rawValue
        return v
    }

    /// The first `limit` delayed visitors in the order their delays end
    /// (arrival order among equal ends): the timeline's earliest current delay
    /// entries, found without walking the rest of it.
    func firstDelayed(_ limit: Int) -> [VisitorView] {
        guard counts.delayed > 0, limit > 0 else { return [] }
        let records = self.records
        return timeline.earliest(min(limit, counts.delayed)) { e in
            records[Int(e.handle)].status == .delayed && Self.isCurrent(e, in: records)
        }.map { view($0.handle, position: nil) }
    }

    /// The first `limit` waiting visitors in grant order, with their positions.
    func firstWaiting(_ limit: Int) -> [VisitorView] {
        line.prefix(max(0, limit)).enumerated().map { view($1, position: $0 + 1) }
    }

    /// Seconds until a visitor at `position` is likely granted (docs/api.md,
    /// `estimated_wait_seconds`). Position p waits for the j-th slot to free
    /// in round r (p − 1 = r × capacity + j − 1): the j-th earliest holder
    /// expiry when every holder has one (holders beyond a lowered capacity
    /// free no slot), else j × mean ÷ capacity while no holder has held
    /// longer than the mean; plus one mean hold per round. The mean is over
    /// the last 100 finished holds, or `hold_seconds` before any. Rounded to
    /// milliseconds. O(log holders).
    func estimatedWait(position: Int) -> WaitEstimate {
        let capacity = config.capacity
        guard capacity > 0, position > 0 else { return .unknown(.closed) }
        let mean = holds.mean ?? (holdMicros > 0 ? Double(holdMicros) : nil)
        // The longest current hold: the first holder's, in grant order.
        let longest = firstHolder == VisitorRecord.none ? 0 : operationTime - records[Int(firstHolder)].grantedAt
        let round = (position - 1) / capacity
        let slot = (position - 1) % capacity + 1
        let k = slot + max(0, counts.holding - capacity)
        let first: Double
        if holderExpiries.count == counts.holding && k <= counts.holding {
            first = Double(max(0, holderExpiries.deadline(rank: k) - operationTime))
        } else if let mean, Double(longest) <= mean {
            first = Double(slot) * mean / Double(capacity)
        } else {
            return .unknown(.noHoldLimit)
        }
        var micros = first
        if round > 0 {
            guard let mean else { return .unknown(.noHoldLimit) }
            micros += Double(round) * mean
        }
        return .seconds((micros / 1000).rounded() / 1000)
    }
}

/// A waiting visitor's estimate, or why there is none.
enum WaitEstimate: Equatable {
    case seconds(Double)
    case unknown(WaitUnknown)
}
