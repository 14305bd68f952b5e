/// A min-heap of timed events (delay ends, hold expiries) with lazy deletion:
/// an event that no longer applies stays until it reaches the top or the
/// owner compacts the heap, and the owner decides which entries are stale.
struct DeadlineHeap: MinHeap, Sendable {
    struct Entry: Sendable {
        /// When the event is due, in microseconds since the epoch.
        var deadline: Int64
        /// Tie-break among equal deadlines (smaller first), e.g. arrival order.
        var order: Int64
        /// The owner's handle for the subject of the event.
        var handle: Int32
    }

    private(set) var entries: [Entry] = []

    var count: Int { entries.count }

    /// The earliest entry.
    var min: Entry? { entries.first }

    mutating func push(_ e: Entry) {
        entries.append(e)
        siftUp(entries.count - 1)
    }

    @discardableResult
    mutating func popMin() -> Entry? {
        guard !entries.isEmpty else { return nil }
        let top = entries[0]
        let last = entries.removeLast()
        if !entries.isEmpty {
            entries[0] = last
            siftDown(0)
        }
        return top
    }

    /// The first `limit` entries `wanted` accepts, earliest first, without
    /// disturbing the heap: a best-first walk from the root that opens only
    /// the children of entries it has taken or passed over, so it costs
    /// O((limit + entries passed over) · log) and not a sort of the whole heap.
    func earliest(_ limit: Int, where wanted: (Entry) -> Bool) -> [Entry] {
        var found: [Entry] = []
        var frontier = DeadlineHeap()  // entries as (deadline, order, index into `entries`)
        if !entries.isEmpty { frontier.push(.init(deadline: entries[0].deadline, order: entries[0].order, handle: 0)) }
        while found.count < limit, let next = frontier.popMin() {
            let i = Int(next.handle)
            if wanted(entries[i]) { found.append(entries[i]) }
            for child in [2 * i + 1, 2 * i + 2] where child < entries.count {
                let e = entries[child]
                frontier.push(.init(deadline: e.deadline, order: e.order, handle: Int32(child)))
            }
        }
        return found
    }

    /// Drops every entry `isStale` says no longer applies and rebuilds the heap: O(n).
    mutating func compact(removingWhere isStale: (Entry) -> Bool) {
        entries.removeAll(where: isStale)
        if entries.count * 4 < entries.capacity {
            // Give memory back after a burst (removeAll keeps the capacity).
            var smaller: [Entry] = []
            smaller.reserveCapacity(entries.count * 2)
            smaller.append(contentsOf: entries)
            entries = smaller
        }
        var i = entries.count / 2 - 1
        while i >= 0 {
            siftDown(i)
            i -= 1
        }
    }

    static func precedes(_ a: Entry, _ b: Entry) -> Bool {
        a.deadline != b.deadline ? a.deadline < b.deadline : a.order < b.order
    }

    func node(at index: Int) -> Entry { entries[index] }

    mutating func place(_ node: Entry, at index: Int) { entries[index] = node }
}
