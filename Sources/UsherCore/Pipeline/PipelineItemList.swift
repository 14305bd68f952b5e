/// Items that left the buffer, oldest first, found by id in O(1), bounded
/// by the owner (`trim`): the dead list (items handed out `max_deliveries`
/// times that came back) and the finished items a pipeline remembers
/// (`history`), so neither can grow memory without bound.
struct PipelineItemList: Sendable {
    private struct Entry: Sendable {
        var serial: Int64
        var item: PipelineItem
    }

    private var byID: [String: Entry] = [:]
    /// Arrival order; entries whose serial no longer matches `byID` were
    /// removed out of order (cancel) and are skipped.
    private var order: [(serial: Int64, id: String)] = []
    private var head = 0
    private var nextSerial: Int64 = 0

    var count: Int { byID.count }
    var isEmpty: Bool { byID.isEmpty }

    func contains(_ id: String) -> Bool { byID[id] != nil }

    func item(_ id: String) -> PipelineItem? { byID[id]?.item }

    /// Adds `item` as the newest.
    mutating func append(_ item: PipelineItem) {
        nextSerial += 1
        byID[item.id] = Entry(serial: nextSerial, item: item)
        order.append((nextSerial, item.id))
    }

    /// Removes and returns the oldest item.
    mutating func popOldest() -> PipelineItem? {
        while head < order.count {
            let (serial, id) = order[head]
            head += 1
            if let e = byID[id], e.serial == serial {
                byID[id] = nil
                compactIfSparse()
                return e.item
            }
        }
        compactIfSparse()
        return nil
    }

    /// Removes the item with this id.
    mutating func remove(_ id: String) -> PipelineItem? {
        guard let e = byID.removeValue(forKey: id) else { return nil }
        compactIfSparse()
        return e.item
    }

    /// Drops the oldest items until at most `limit` remain; returns them.
    mutating func trim(to limit: Int) -> [PipelineItem] {
        var dropped: [PipelineItem] = []
        while byID.count > limit, let item = popOldest() { dropped.append(item) }
        return dropped
    }

    /// Up to `limit` items after the one with `serial` (nil: from the
    /// oldest), oldest first, each with its serial, and whether more follow.
    func page(after serial: Int64?, limit: Int) -> (items: [PipelineItem], serials: [Int64], more: Bool) {
        var i = head
        if let serial {
            var high = order.count
            while i < high {
                let mid = (i + high) / 2
                if order[mid].serial <= serial { i = mid + 1 } else { high = mid }
            }
        }
        var items: [PipelineItem] = []
        var serials: [Int64] = []
        while i < order.count {
            let (s, id) = order[i]
            i += 1
            guard let e = byID[id], e.serial == s else { continue }
            if items.count == limit { return (items, serials, true) }
            items.append(e.item)
            serials.append(s)
        }
        return (items, serials, false)
    }

    /// The oldest `limit` items, oldest first.
    func oldest(_ limit: Int) -> [PipelineItem] {
        var out: [PipelineItem] = []
        var i = head
        while out.count < limit && i < order.count {
            let (serial, id) = order[i]
            if let e = byID[id], e.serial == serial { out.append(e.item) }
            i += 1
        }
        return out
    }

    /// Keeps `order` within twice the live entries.
    private mutating func compactIfSparse() {
        let live = order.count - head
        guard live > 32, live > 2 * byID.count || head > live else {
            if byID.isEmpty {
                order.removeAll(keepingCapacity: order.count < 1024)
                head = 0
            }
            return
        }
        order = order[head...].filter { byID[$0.id]?.serial == $0.serial }
        head = 0
    }
}
