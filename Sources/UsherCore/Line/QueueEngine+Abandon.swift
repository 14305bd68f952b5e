// What a client that stops showing up keeps: nothing. A waiting visitor
// whose client was not heard of for `idle_seconds` is cancelled (reason
// `abandoned`); a grant made while no client waited on it, that no call
// names within `claim_seconds`, is released (reason `unclaimed`). Both
// checks are timeline entries, driven by the clock as hold expiries are.

extension QueueEngine {
    /// The timeline orders of idle and claim checks: one per record
    /// (`watchOrder`), below every fence (≥ 0) and above every delay order
    /// (which counts up from `noTime + 1`), so at one instant delays end
    /// first, then the checks run, then holds expire.
    static let watchOrders = (Int64.min / 2)..<0

    /// A call named `h`: its client is heard of now, and a grant waiting
    /// for its claim is claimed.
    mutating func hear(_ h: Int32) {
        let i = Int(h)
        records[i].heard = max(records[i].heard, operationTime)
        if records[i].status == .granted { records[i].watch = VisitorRecord.noTime }
    }

    /// A client parks on `id` until `until` (a long-poll): it counts as heard
    /// of for the whole wait, and claims a grant already made. Needs no
    /// operation frame; an unknown id is ignored.
    mutating func hear(id: String, until: Timestamp) {
        guard let h = ids[id] else { return }
        hear(h)
        records[Int(h)].heard = max(records[Int(h)].heard, until.micros)
    }

    /// A parked client is told of `id`'s change (in the step that made it):
    /// a grant it learns of is claimed.
    mutating func hearParked(id: String) {
        guard let h = ids[id], records[Int(h)].status == .granted else { return }
        records[Int(h)].watch = VisitorRecord.noTime
    }

    /// `h` entered the line: its idle check is due `idle_seconds` after it was last heard of.
    mutating func watchIdle(_ h: Int32) {
        let i = Int(h)
        guard idleMicros > 0 else {
            records[i].watch = VisitorRecord.noTime
            return
        }
        let due = records[i].heard + idleMicros
        records[i].watch = due
        timeline.push(.init(deadline: due, order: records[i].watchOrder, handle: h))
    }

    /// `h` was just granted: unless the operation names it, it has
    /// `claim_seconds` to be claimed (a parked client claims it as it is
    /// woken, in the same step: `hearParked`).
    mutating func watchClaim(_ h: Int32, now: Int64) {
        let i = Int(h)
        guard claimMicros > 0, h != named else {
            records[i].watch = VisitorRecord.noTime
            return
        }
        records[i].watch = now + claimMicros
        timeline.push(.init(deadline: now + claimMicros, order: records[i].watchOrder, handle: h))
    }

    /// `h`'s idle or claim check is due at `t` (its entry is current).
    mutating func watchDue(_ h: Int32, at t: Int64) {
        let i = Int(h)
        if records[i].status == .granted {
            records[i].watch = VisitorRecord.noTime
            guard claimMicros > 0 else { return }  // claim_seconds was patched to 0
            finish(h, as: unclaimedStatus, at: t, reason: .unclaimed)
            counts.unclaimedTotal += 1
        } else if idleMicros > 0 && records[i].heard + idleMicros <= t {
            finish(h, as: .cancelled, at: t, reason: .abandoned)
            counts.abandonedTotal += 1
        } else {
            // Heard of since the check was set (or idle_seconds changed): check again later.
            watchIdle(h)
        }
    }

    /// After a `PATCH` of `idle_seconds` or `claim_seconds`: when idle checks
    /// were off, every waiting visitor gets one, counted from now; checks
    /// already set run at their time and then follow the new values.
    mutating func rewatch(wasIdle: Int64) {
        guard wasIdle == 0, idleMicros > 0 else { return }
        for h in line.prefix(counts.waiting) {
            records[Int(h)].heard = max(records[Int(h)].heard, operationTime)
            watchIdle(h)
        }
    }
}
