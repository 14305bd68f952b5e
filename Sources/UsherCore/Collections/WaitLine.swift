/// Parked callers in arrival order, removable by id in O(1) (a deadline
/// passed, a task was cancelled). Ids are reserved before the caller parks,
/// so a cancellation handler can name its waiter.
struct WaitLine<Element> {
    private var entries: [UInt64: Element] = [:]
    /// Arrival order; ids no longer in `entries` are skipped.
    private var order: [UInt64] = []
    private var head = 0
    private var lastID: UInt64 = 0

    var count: Int { entries.count }
    var isEmpty: Bool { entries.isEmpty }

    /// A fresh id for `insert`.
    mutating func reserveID() -> UInt64 {
        lastID &+= 1
        return lastID
    }

    /// Parks `element` at the back under a reserved id.
    mutating func insert(_ element: Element, id: UInt64) {
        entries[id] = element
        order.append(id)
    }

    /// The longest-waiting element.
    mutating func first() -> (id: UInt64, element: Element)? {
        while head < order.count {
            let id = order[head]
            if let e = entries[id] { return (id, e) }
            head += 1
        }
        reset()
        return nil
    }

    /// Removes an element; nil when it already left.
    @discardableResult
    mutating func remove(_ id: UInt64) -> Element? {
        guard let e = entries.removeValue(forKey: id) else { return nil }
        if entries.isEmpty {
            reset()
        } else if head > 64 && head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        } else if order.count > 64 && order.count > 4 * entries.count {
            order = order[head...].filter { entries[$0] != nil }
            head = 0
        }
        return e
    }

    /// Removes everything, returning the elements in arrival order.
    mutating func removeAll() -> [Element] {
        let out = order[head...].compactMap { entries[$0] }
        entries = [:]
        reset()
        return out
    }

    private mutating func reset() {
        order.removeAll(keepingCapacity: order.capacity <= 1024)
        head = 0
    }
}
