/// A pool's elements in their stable order (the seed's iteration order:
/// declared, then added or grown, each at the end), with the lease each one
/// is under, and the free ones in the order they became free.
///
/// Costs: lookup, lease and free are O(1) (amortized); removing an element
/// is O(n) (it keeps the order), which only an administrator does.
struct ElementTable: Sendable {
    struct Element: Sendable {
        var id: String
        var data: JSONValue?
        /// The lease it is under, or nil when free.
        var lease: String?
        /// The holder of its most recent lease (current or ended); nil when
        /// it was never leased or that lease named no holder.
        var lastHolder: String?
        /// Leases whose holder differed from the previous lease's (see `lease(to:holder:)`).
        var transitions = 0
        /// Leases it was ever under.
        var leases = 0
        /// Stamped each time it becomes free, so stale queue entries are skipped.
        var ticket: Int64 = 0
        /// Increasing along `elements`: where a page of the list resumes.
        var order: Int64 = 0
    }

    private(set) var elements: [Element] = []
    private var index: [String: Int] = [:]
    /// Free elements, least recently freed first; entries whose element has
    /// since been leased or removed (the ticket no longer matches) are stale.
    private var free: [(id: String, ticket: Int64)] = []
    private var head = 0
    private var tickets: Int64 = 0
    private var orders: Int64 = 0
    /// Elements under a lease.
    private(set) var leased = 0

    var count: Int { elements.count }
    /// Elements not under a lease.
    var available: Int { elements.count - leased }

    func contains(_ id: String) -> Bool { index[id] != nil }

    subscript(id: String) -> Element? { index[id].map { elements[$0] } }

    /// Adds a free element at the end of the order.
    mutating func append(_ id: String, data: JSONValue?) {
        index[id] = elements.count
        orders += 1
        elements.append(Element(id: id, data: data, order: orders))
        pushFree(elements.count - 1)
    }

    mutating func setData(_ data: JSONValue?, of id: String) {
        guard let i = index[id] else { return }
        elements[i].data = data
    }

    /// Up to `limit` elements after the one with `order` (nil: from the
    /// first), and whether more follow: O(limit + log n).
    func page(after order: Int64?, limit: Int) -> (elements: ArraySlice<Element>, more: Bool) {
        var low = 0
        if let order {
            var high = elements.count
            while low < high {
                let mid = (low + high) / 2
                if elements[mid].order <= order { low = mid + 1 } else { high = mid }
            }
        }
        let end = low + min(elements.count - low, max(0, limit))
        return (elements[low..<end], end < elements.count)
    }

    /// Removes an element (leased or not) and answers it; the order of the rest is kept.
    @discardableResult
    mutating func remove(_ id: String) -> Element? {
        guard let i = index.removeValue(forKey: id) else { return nil }
        let e = elements.remove(at: i)
        for j in i..<elements.count { index[elements[j].id] = j }
        if e.lease != nil { leased -= 1 }
        compactIfStale()
        return e
    }

    /// Puts the least recently freed element under `lease` for `holder`;
    /// nil when none is free. Answers the element and the `lastHolder` it had.
    ///
    /// A holder change (Kubernetes Lease's `leaseTransitions`) is counted when
    /// a lease after the element's first has a holder other than the
    /// previous lease's; a lease without a holder is an unknown party, so it
    /// always counts (after the first).
    mutating func lease(to lease: String, holder: String?) -> (id: String, previousHolder: String?)? {
        while head < free.count {
            let (id, ticket) = free[head]
            head += 1
            guard let i = index[id], elements[i].lease == nil, elements[i].ticket == ticket else { continue }
            let previous = elements[i].lastHolder
            if elements[i].leases > 0 && (holder == nil || holder != previous) { elements[i].transitions += 1 }
            elements[i].leases += 1
            elements[i].lastHolder = holder
            elements[i].lease = lease
            leased += 1
            trimHead()
            return (id, previous)
        }
        return nil
    }

    /// Frees `id` if it is under `lease` (a lease that ended); false otherwise
    /// (the element was removed, or is under another lease).
    @discardableResult
    mutating func free(_ id: String, from lease: String) -> Bool {
        guard let i = index[id], elements[i].lease == lease else { return false }
        elements[i].lease = nil
        leased -= 1
        pushFree(i)
        return true
    }

    private mutating func pushFree(_ i: Int) {
        tickets += 1
        elements[i].ticket = tickets
        free.append((elements[i].id, tickets))
    }

    private mutating func trimHead() {
        if head >= 1024 && head * 2 >= free.count {
            free.removeFirst(head)
            head = 0
        }
    }

    /// Removing free elements leaves stale entries behind; drop them once
    /// they outnumber the live ones.
    private mutating func compactIfStale() {
        guard free.count - head > 64 + 2 * available else { return }
        let live = free[head...].filter { entry in
            guard let i = index[entry.id] else { return false }
            return elements[i].lease == nil && elements[i].ticket == entry.ticket
        }
        free = Array(live)
        head = 0
    }
}
