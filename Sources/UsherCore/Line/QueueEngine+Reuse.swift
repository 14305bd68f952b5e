// What the other managers built on the engine need: windows watch and free
// the one slot, pools record which element a grant got and take back a
// fetch that stopped waiting.

extension QueueEngine {
    /// Gives back every byte this engine holds: its resource was deleted.
    mutating func releaseStorage() { storage.releaseAll() }

    /// The longest-standing holder, without applying time (a window: the item shown).
    var firstHolderView: VisitorView? {
        firstHolder == VisitorRecord.none ? nil : view(firstHolder)
    }

    /// The longest-standing holder leaves as with `remove` (`released`) and
    /// its slot passes on in the same step; nil when nobody holds a slot.
    mutating func removeFirstHolder(now: Timestamp) -> VisitorView? {
        begin(now)
        defer { end() }
        let h = firstHolder
        guard h != VisitorRecord.none else { return nil }
        finish(h, as: .released, at: now.micros)
        grantFree(now)
        return view(h)
    }

    /// The resource is being deleted: every holder ends `released`, reason
    /// `deleted`, and nobody is granted in their place (the changes say who,
    /// for the events).
    mutating func releaseHoldersForDeletion(now: Timestamp) {
        begin(now)
        defer { end() }
        while firstHolder != VisitorRecord.none {
            finish(firstHolder, as: .released, at: now.micros, reason: .deleted)
        }
    }

    /// Replaces a visitor's payload without applying time: a manager records
    /// what a grant gave (a pool: the element). False for an unknown id.
    /// A visitor's status and payload, without building its view (no
    /// position, no timestamps): for a manager reacting to changes.
    func statusAndPayload(of id: String) -> (status: VisitorStatus, payload: JSONValue?)? {
        guard let h = ids[id] else { return nil }
        let record = records[Int(h)]
        return (record.status, record.payload)
    }

    @discardableResult
    mutating func setPayload(_ payload: JSONValue?, of id: String) -> Bool {
        guard let h = ids[id] else { return false }
        storage.release(storedBytes(h))
        records[Int(h)].payload = payload
        storage.charge(storedBytes(h))
        return true
    }

    /// Takes back a visitor that is still `waiting` or `delayed` as if it had
    /// never come: no total counts it and its id is free again (a pool's
    /// fetch whose wait ended without an element). Applies `now` first, so a
    /// visitor granted by then stays granted; answers nil when withdrawn,
    /// else the visitor as it is.
    mutating func withdraw(id: String, now: Timestamp) throws(QueueError) -> VisitorView? {
        begin(now)
        defer { end() }
        let h = try handle(id)
        let i = Int(h)
        guard records[i].status.isWaiting else { return view(h) }
        withdrawnViews[id] = view(h)
        if records[i].status == .waiting { unlinkWaiting(h) } else { counts.delayed -= 1 }
        counts.enqueuedTotal -= 1
        changed.removeAll { $0 == h }
        withdrawn.append(id)
        storage.release(storedBytes(h))
        ids.removeValue(forKey: id)
        records[i] = .vacant
        vacant.append(h)
        return nil
    }
}
