/// Deadlines kept in order with O(log n) insert, remove and "the k-th
/// earliest": a treap with subtree sizes, addressed by the caller's `Int32`
/// handles (a queue's slab indices) like `OrderStatisticTree`, so a node costs
/// 24 bytes and no allocation. A queue keeps its holders' expiries here for
/// wait estimates.
///
/// Order: earlier `deadline` first, then lower handle. Heap weights are a
/// keyed hash of the handle with a random per-tree seed.
struct RankedDeadlines: Sendable {
    struct Node: Sendable {
        var left: Int32 = RankedDeadlines.none
        var right: Int32 = RankedDeadlines.none
        /// Nodes in this subtree (0 when the handle is not in the tree).
        var size: Int32 = 0
        var deadline: Int64 = 0
    }

    /// The absent handle.
    static let none: Int32 = -1

    private(set) var nodes = SegmentedArray<Node>()
    private(set) var root: Int32 = none
    private let seed: UInt64

    /// `seed` fixes the shape for reproducible tests; by default it is random.
    init(seed: UInt64 = UInt64.random(in: .min ... .max)) {
        self.seed = seed
    }

    /// Number of handles in the tree.
    var count: Int { size(root) }

    /// True when `handle` is in the tree.
    func contains(_ handle: Int32) -> Bool {
        Int(handle) < nodes.count && nodes[Int(handle)].size > 0
    }

    /// Adds `handle` (not already in the tree) with `deadline`.
    mutating func insert(_ handle: Int32, deadline: Int64) {
        let i = Int(handle)
        while i >= nodes.count { nodes.append(Node()) }
        nodes[i] = Node(left: Self.none, right: Self.none, size: 1, deadline: deadline)
        root = insert(handle, into: root)
    }

    /// Removes `handle`, which must be in the tree.
    mutating func remove(_ handle: Int32) {
        root = remove(handle, from: root)
        nodes[Int(handle)] = Node()
    }

    /// The `rank`-th earliest deadline (1-based, at most `count`).
    func deadline(rank: Int) -> Int64 {
        precondition(rank >= 1 && rank <= count, "deadline(rank:) out of range")
        var t = root
        var k = rank
        while true {
            let n = nodes[Int(t)]
            let before = size(n.left)
            if k <= before {
                t = n.left
            } else if k == before + 1 {
                return n.deadline
            } else {
                k -= before + 1
                t = n.right
            }
        }
    }

    // MARK: - Treap

    private func precedes(_ a: Int32, _ b: Int32) -> Bool {
        let x = nodes[Int(a)].deadline
        let y = nodes[Int(b)].deadline
        return x != y ? x < y : a < b
    }

    private func size(_ t: Int32) -> Int {
        t == Self.none ? 0 : Int(nodes[Int(t)].size)
    }

    /// Heap weight: a SplitMix64 finaliser over the seeded handle.
    private func weight(_ t: Int32) -> UInt64 {
        var z = UInt64(UInt32(bitPattern: t)) &+ seed
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    private mutating func update(_ t: Int32) {
        let n = nodes[Int(t)]
        nodes[Int(t)].size = Int32(size(n.left) + size(n.right) + 1)
    }

    private mutating func insert(_ x: Int32, into t: Int32) -> Int32 {
        guard t != Self.none else { return x }
        if weight(x) > weight(t) {
            let (l, r) = split(t, around: x)
            nodes[Int(x)].left = l
            nodes[Int(x)].right = r
            update(x)
            return x
        }
        if precedes(x, t) {
            let l = insert(x, into: nodes[Int(t)].left)
            nodes[Int(t)].left = l
        } else {
            let r = insert(x, into: nodes[Int(t)].right)
            nodes[Int(t)].right = r
        }
        nodes[Int(t)].size += 1
        return t
    }

    /// Splits `t` into the nodes before `key` and those after it.
    private mutating func split(_ t: Int32, around key: Int32) -> (Int32, Int32) {
        guard t != Self.none else { return (Self.none, Self.none) }
        if precedes(t, key) {
            let (l, r) = split(nodes[Int(t)].right, around: key)
            nodes[Int(t)].right = l
            update(t)
            return (t, r)
        } else {
            let (l, r) = split(nodes[Int(t)].left, around: key)
            nodes[Int(t)].left = r
            update(t)
            return (l, t)
        }
    }

    /// Joins two trees where every node of `a` precedes every node of `b`.
    private mutating func merge(_ a: Int32, _ b: Int32) -> Int32 {
        if a == Self.none { return b }
        if b == Self.none { return a }
        if weight(a) > weight(b) {
            let r = merge(nodes[Int(a)].right, b)
            nodes[Int(a)].right = r
            update(a)
            return a
        } else {
            let l = merge(a, nodes[Int(b)].left)
            nodes[Int(b)].left = l
            update(b)
            return b
        }
    }

    private mutating func remove(_ x: Int32, from t: Int32) -> Int32 {
        precondition(t != Self.none, "remove(_:) of a handle not in the tree")
        if t == x { return merge(nodes[Int(x)].left, nodes[Int(x)].right) }
        if precedes(x, t) {
            let l = remove(x, from: nodes[Int(t)].left)
            nodes[Int(t)].left = l
        } else {
            let r = remove(x, from: nodes[Int(t)].right)
            nodes[Int(t)].right = r
        }
        nodes[Int(t)].size -= 1
        return t
    }
}
