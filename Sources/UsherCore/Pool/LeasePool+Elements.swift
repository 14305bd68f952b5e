// Elements: handed to leases as the engine grants them, added, replaced,
// removed and grown at run time.

extension LeasePool {
    /// After every engine operation: the elements of leases that ended are
    /// free again, then the leases granted in the same step take free
    /// elements, least recently freed first, and record them.
    func engineDidChange(_ ids: [String]) {
        var granted: [String] = []
        for id in ids {
            guard let v = engine.statusAndPayload(of: id) else { continue }
            let note = LeaseNote(stored: v.payload)
            switch v.status {
            case .granted where note.element == nil:
                granted.append(id)
            case .completed, .expired, .released:
                if let e = note.element { table.free(e, from: id) }
            default:
                break
            }
        }
        for id in granted {
            guard let v = engine.statusAndPayload(of: id) else { continue }
            var note = LeaseNote(stored: v.payload)
            // Capacity is the element count, so a granted lease always finds one.
            guard let (e, previous) = table.lease(to: id, holder: note.holder) else {
                assertionFailure("lease \(id) was granted with no free element")
                continue
            }
            // The element keeps its last holder: charged with it, past the lease's own record.
            engine.storage.charge(Self.holderBytes(note.holder))
            engine.storage.release(Self.holderBytes(previous))
            note.element = e
            engine.setPayload(note.stored, of: id)
        }
    }

    /// `PUT …/elements/{id}`: a new element at the end of the order (201; a
    /// waiting fetcher gets it at once), or new `data` for an existing one (200).
    func putElement(_ id: String, data: JSONValue?) throws(PoolError) -> (element: PoolElement, created: Bool) {
        try run(nil) { (e, now) in e.advance(to: now) }
        if let existing = table[id] {
            let old = Self.storedBytes(id, existing.data)
            engine.storage.release(old)
            do throws(PoolError) { try reserveElement(Self.storedBytes(id, data)) } catch {
                engine.storage.charge(old)
                throw error
            }
            table.setData(data, of: id)
            return (element(table[id] ?? existing), false)
        }
        guard table.count < PoolConfig.Limits.elements.upperBound else {
            throw .tooManyElements(limit: PoolConfig.Limits.elements.upperBound)
        }
        try reserveElement(Self.storedBytes(id, data))
        table.append(id, data: data)
        try syncCapacity()
        guard let added = table[id] else { preconditionFailure("element \(id) vanished") }
        return (element(added), true)
    }

    /// `DELETE …/elements/{id}[?force=true]`: a free element goes at once; a
    /// leased one only with `force`, which ends its lease (`revoked`: its
    /// holder's recycle and extend answer `not_leased`).
    func removeElement(_ id: String, force: Bool) throws(PoolError) -> ElementRemoval {
        try run(nil) { (e, now) in e.advance(to: now) }
        guard let el = table[id] else { throw .notFound("element \"\(id)\"") }
        if let leaseID = el.lease, !force { throw .elementLeased(element: id, lease: leaseID) }
        table.remove(id)
        engine.storage.release(Self.storedBytes(id, el.data) + Self.holderBytes(el.lastHolder))
        // Lower the capacity first, so ending the lease grants nobody.
        try syncCapacity()
        var ended: Lease?
        if let leaseID = el.lease {
            let v = try run(leaseID) { (e, now) throws(QueueError) in try e.remove(id: leaseID, now: now) }
            ended = Lease(v, data: el.data)
        }
        return ElementRemoval(
            element: PoolElement(
                id: el.id, data: el.data, lease: nil, leaseTransitions: el.transitions, lastHolder: el.lastHolder),
            endedLease: ended)
    }

    /// With `grow`, creates elements while nothing is free and someone needs
    /// one (`extra` fetchers beside those waiting), up to `max_size`.
    func grow(forWaiters extra: Int) throws(PoolError) {
        guard let g = config.grow else { return }
        let limit = min(g.maxSize, PoolConfig.Limits.elements.upperBound)
        while table.available == 0 && engine.counts.waiting + extra > 0 && table.count < limit {
            var id: String
            repeat {
                grownIDs += 1
                id = g.prefix + String(grownIDs)
            } while table.contains(id)
            try reserveElement(Self.storedBytes(id, nil))
            table.append(id, data: nil)
            grownTotal += 1
            try syncCapacity()
        }
    }

    /// The engine's capacity is the element count: raising it grants waiting
    /// fetchers at once; lowering it takes no lease away.
    func syncCapacity() throws(PoolError) {
        try run(nil) { (e, now) in e.apply(QueuePatch(capacity: table.count), now: now) }
    }
}
