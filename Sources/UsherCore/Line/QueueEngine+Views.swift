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
            v.estimatedWaitSeconds = estimatedWait(position: position)
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

    /// Seconds until a visitor at `position` is likely granted: slots free up
    /// at about `capacity` per mean hold, the mean taken over this queue's last
    /// 100 finished holds, or `hold_seconds` before any has finished. Nil when
    /// nobody can be granted (capacity 0) or there is nothing to go on (no
    /// finished hold and no hold limit). Rounded to milliseconds.
    func estimatedWait(position: Int) -> Double? {
        guard config.capacity > 0 else { return nil }
        let mean: Double
        if let m = holds.mean {
            mean = m
        } else if holdMicros > 0 {
            mean = Double(holdMicros)
        } else {
            return nil
        }
        let micros = Double(position) * mean / Double(config.capacity)
        return (micros / 1000).rounded() / 1000
    }
}
