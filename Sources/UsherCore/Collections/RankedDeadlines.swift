/// Deadlines kept in order with O(log n) insert, remove and "the k-th
/// earliest", addressed by the caller's `Int32` handles: an
/// `OrderStatisticTree` whose second key is the deadline. A queue keeps its
/// holders' expiries here for wait estimates.
///
/// Order: earlier `deadline` first, then lower handle.
struct RankedDeadlines: Sendable {
    private var tree: OrderStatisticTree

    /// `seed` fixes the shape for reproducible tests; by default it is random.
    init(seed: UInt64 = UInt64.random(in: .min ... .max)) {
        tree = OrderStatisticTree(seed: seed)
    }

    /// Number of handles in the tree.
    var count: Int { tree.count }

    /// True when `handle` is in the tree.
    func contains(_ handle: Int32) -> Bool { tree.contains(handle) }

    /// Adds `handle` (not already in the tree) with `deadline`.
    mutating func insert(_ handle: Int32, deadline: Int64) { tree.insert(handle, priority: 0, seq: deadline) }

    /// Removes `handle`, which must be in the tree.
    mutating func remove(_ handle: Int32) { tree.remove(handle) }

    /// The `rank`-th earliest deadline (1-based, at most `count`).
    func deadline(rank: Int) -> Int64 { tree.key(of: tree.handle(rank: rank)).seq }
}
