// What a client's hang-up takes back: the place of a visitor whose client
// stopped waiting, and a grant whose answer never reached its client; and
// the place of a try-acquire whose wait ended.

extension QueueEngine {
    /// The client of a waiting or delayed visitor hung up: it is `cancelled`
    /// (reason `disconnected`). Applies `now` first, so a visitor granted by
    /// then stays granted (the grant came first; the answer's undo releases
    /// it); a visitor in any other status is returned as it is.
    mutating func disconnect(id: String, now: Timestamp) throws(QueueError) -> VisitorView {
        begin(now)
        defer { end() }
        let h = try handle(id)
        if records[Int(h)].status.isWaiting { finish(h, as: .cancelled, at: now.micros, reason: .disconnected) }
        return view(h)
    }

    /// The wait of a try-acquire (`on_timeout=cancel`) ended: a visitor still
    /// waiting or delayed is `cancelled` (reason `timeout`) and counted in
    /// `timed_out_total`. Applies `now` first, so a visitor granted by then
    /// stays granted; one in any other status is returned as it is.
    mutating func timeOut(id: String, now: Timestamp) throws(QueueError) -> VisitorView {
        begin(now)
        defer { end() }
        let h = try handle(id)
        timeOut(h, now: now)
        return view(h)
    }

    /// A try-acquire without a wait (`on_timeout=cancel`, no `wait`): as
    /// `enqueue`, and a visitor not granted at once is timed out in the same
    /// operation (its changes and the enqueue's are drained together).
    mutating func enqueueOrTimeOut(
        _ r: VisitorRequest, now: Timestamp
    ) throws(QueueError) -> (view: VisitorView, created: Bool) {
        let (entered, created) = try enqueue(r, now: now)
        guard entered.status.isWaiting, let h = ids[entered.id] else { return (entered, created) }
        // No `begin`: it would clear the enqueue's changes before they are drained.
        defer { end() }
        timeOut(h, now: now)
        return (view(h), created)
    }

    private mutating func timeOut(_ h: Int32, now: Timestamp) {
        guard records[Int(h)].status.isWaiting else { return }
        finish(h, as: .cancelled, at: now.micros, reason: .timeout)
        counts.timedOutTotal += 1
    }

    /// The answer that granted `id` the grant `fence` never reached its
    /// client: the holder leaves as `status` (`released`; a pool's lease
    /// `completed`, shown as recycled) with reason `undelivered`, and its slot
    /// passes on. Nil, changing nothing, when it no longer holds that grant
    /// (it finished meanwhile, or the id now names a later visitor), and when
    /// a retry named it (`noteRetry`): that answer may have carried the grant.
    mutating func undoGrant(
        id: String, fence: Int64, as status: VisitorStatus = .released, now: Timestamp
    ) -> VisitorView? {
        begin(now)
        defer { end() }
        guard let h = ids[id], records[Int(h)].status == .granted, records[Int(h)].fence == fence,
            !records[Int(h)].retried
        else { return nil }
        finish(h, as: status, at: now.micros, reason: .undelivered)
        grantFree(now)
        return view(h)
    }

    /// A request named the live visitor `h` again (a client's retry of an
    /// enqueue or fetch, answered this record): from now on no `undoGrant`
    /// takes its grant back, whichever request's clean-up asks, since that
    /// answer, or a later one, may be what its client holds.
    mutating func noteRetry(_ h: Int32) {
        if !records[Int(h)].status.isFinished { records[Int(h)].retried = true }
    }

    /// `noteRetry` by id; the visitor as it is, nil for an unknown id.
    mutating func noteRetry(id: String) -> VisitorView? {
        guard let h = ids[id] else { return nil }
        noteRetry(h)
        hear(h)
        return view(h)
    }
}
