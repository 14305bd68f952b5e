// The intrusive lists: the line (tree + arrival order + per key and per key/action), the holders.

extension QueueEngine {
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
        clearLinks(h)
        counts.waiting -= 1
    }

    /// `new` (same key and action, in no list) takes waiting `old`'s place in
    /// every list: its priority, its arrival order and line entry, its chains.
    /// `old` is left in none, with its links cleared.
    mutating func replaceWaiting(_ old: Int32, with new: Int32) {
        let (o, n) = (Int(old), Int(new))
        let place = line.key(of: old)
        line.remove(old)
        line.insert(new, priority: place.priority, seq: place.seq)
        let r = records[o]
        records[n].priority = r.priority
        records[n].deadline = r.deadline  // the line entry's time: arrival order stays sorted by it
        records[n].linePrev = r.linePrev
        records[n].lineNext = r.lineNext
        records[n].keyPrev = r.keyPrev
        records[n].keyNext = r.keyNext
        records[n].pairPrev = r.pairPrev
        records[n].pairNext = r.pairNext
        if r.linePrev != VisitorRecord.none { records[Int(r.linePrev)].lineNext = new } else { firstArrival = new }
        if r.lineNext != VisitorRecord.none { records[Int(r.lineNext)].linePrev = new } else { lastArrival = new }
        if r.keyPrev != VisitorRecord.none { records[Int(r.keyPrev)].keyNext = new }
        if r.pairPrev != VisitorRecord.none { records[Int(r.pairPrev)].pairNext = new }
        if let key = r.key {
            if r.keyNext != VisitorRecord.none {
                records[Int(r.keyNext)].keyPrev = new
            } else {
                lastWithKey[key] = new
            }
            if r.pairNext != VisitorRecord.none {
                records[Int(r.pairNext)].pairPrev = new
            } else {
                lastWithPair[KeyAction(key: key, action: r.action)] = new
            }
        }
        clearLinks(old)
    }

    /// `h` is in no list of the waiting line any more.
    private mutating func clearLinks(_ h: Int32) {
        let i = Int(h)
        records[i].linePrev = VisitorRecord.none
        records[i].lineNext = VisitorRecord.none
        records[i].keyPrev = VisitorRecord.none
        records[i].keyNext = VisitorRecord.none
        records[i].pairPrev = VisitorRecord.none
        records[i].pairNext = VisitorRecord.none
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
        if records[Int(h)].deadline != VisitorRecord.noTime {
            holderExpiries.insert(h, deadline: records[Int(h)].deadline)
        }
    }

    /// Keeps `holderExpiries` in step after a holder's deadline changed.
    mutating func holderDeadlineChanged(_ h: Int32) {
        if holderExpiries.contains(h) { holderExpiries.remove(h) }
        if records[Int(h)].deadline != VisitorRecord.noTime {
            holderExpiries.insert(h, deadline: records[Int(h)].deadline)
        }
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
        if holderExpiries.contains(h) { holderExpiries.remove(h) }
    }
}
