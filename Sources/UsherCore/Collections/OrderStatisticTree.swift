/// A waiting line with O(log n) insert, remove, first and rank: a treap whose
/// nodes carry subtree sizes, stored in one segmented array and addressed by the
/// caller's own `Int32` handles (a queue's slab indices), so a node costs 24
/// bytes and no allocation.
///
/// Order: higher `priority` first, then lower `seq` (a line's arrival order,
/// or a deadline), then lower handle. The treap's heap weights are a keyed
/// hash of the handle with a random per-tree seed, so clients choosing
/// priorities cannot steer the tree's shape.
struct OrderStatisticTree: Sendable {
    struct Node: Sendable {
        var left: Int32 = OrderStatisticTree.none
        var right: Int32 = OrderStatisticTree.none
        /// Nodes in this subtree (0 when the handle is not in the tree).
        var size: Int32 = 0
        var priority: Int32 = 0
        var seq: Int64 = 0
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
    var count: Int { root == Self.none ? 0 : Int(nodes[Int(root)].size) }

    var isEmpty: Bool { root == Self.none }

    /// True when `handle` is in the tree.
    func contains(_ handle: Int32) -> Bool {
        Int(handle) < nodes.count && nodes[Int(handle)].size > 0
    }

    /// Adds `handle` (not already in the tree).
    mutating func insert(_ handle: Int32, priority: Int32, seq: Int64) {
        let i = Int(handle)
        while i >= nodes.count { nodes.append(Node()) }
        nodes[i] = Node(left: Self.none, right: Self.none, size: 1, priority: priority, seq: seq)
        root = insert(handle, into: root)
    }

    /// Removes `handle`, which must be in the tree.
    mutating func remove(_ handle: Int32) {
        root = remove(handle, from: root)
        nodes[Int(handle)] = Node()
    }

    /// The handle granted next, if any.
    var first: Int32? {
        guard root != Self.none else { return nil }
        var t = root
        while nodes[Int(t)].left != Self.none { t = nodes[Int(t)].left }
        return t
    }

    /// The 1-based place of `handle` (in the tree) in grant order.
    func rank(of handle: Int32) -> Int {
        var t = root
        var rank = 0
        while t != Self.none {
            let n = nodes[Int(t)]
            if t == handle { return rank + size(n.left) + 1 }
            if precedes(handle, t) {
                t = n.left
            } else {
                rank += size(n.left) + 1
                t = n.right
            }
        }
        preconditionFailure("rank(of:) of a handle not in the tree")
    }

    /// The handle at 1-based place `rank` (at most `count`): O(log n).
    func handle(rank: Int) -> Int32 {
        precondition(rank >= 1 && rank <= count, "handle(rank:) out of range")
        var t = root
        var k = rank
        while true {
            let before = size(nodes[Int(t)].left)
            if k <= before {
                t = nodes[Int(t)].left
            } else if k == before + 1 {
                return t
            } else {
                k -= before + 1
                t = nodes[Int(t)].right
            }
        }
    }

    /// The first `limit` handles in grant order: O(limit + log n).
    func prefix(_ limit: Int) -> [Int32] {
        var out: [Int32] = []
        out.reserveCapacity(min(limit, count))
        var stack: [Int32] = []
        var t = root
        while out.count < limit && (t != Self.none || !stack.isEmpty) {
            while t != Self.none {
                stack.append(t)
                t = nodes[Int(t)].left
            }
            let n = stack.removeLast()
            out.append(n)
            t = nodes[Int(n)].right
        }
        return out
    }

    /// The order key of `handle` (in the tree): what a cursor resumes after.
    func key(of handle: Int32) -> (priority: Int32, seq: Int64) {
        (nodes[Int(handle)].priority, nodes[Int(handle)].seq)
    }

    /// The first `limit` handles that come after `key` in grant order (the
    /// key's own handle need not be in the tree any more): O(limit + log n).
    func prefix(_ limit: Int, after key: (priority: Int32, seq: Int64)) -> [Int32] {
        var out: [Int32] = []
        var stack: [Int32] = []
        var t = root
        // The path to the first node after `mark`, keeping every node after it.
        while t != Self.none {
            if Self.precedes((key.priority, key.seq, Int32.max), (nodes[Int(t)].priority, nodes[Int(t)].seq, t)) {
                stack.append(t)
                t = nodes[Int(t)].left
            } else {
                t = nodes[Int(t)].right
            }
        }
        while out.count < limit, let n = stack.popLast() {
            out.append(n)
            t = nodes[Int(n)].right
            while t != Self.none {
                stack.append(t)
                t = nodes[Int(t)].left
            }
        }
        return out
    }

    // MARK: - Treap

    /// Whether handle `a` comes before handle `b`.
    private func precedes(_ a: Int32, _ b: Int32) -> Bool {
        Self.precedes((nodes[Int(a)].priority, nodes[Int(a)].seq, a), (nodes[Int(b)].priority, nodes[Int(b)].seq, b))
    }

    private static func precedes(_ a: (Int32, Int64, Int32), _ b: (Int32, Int64, Int32)) -> Bool {
        if a.0 != b.0 { return a.0 > b.0 }
        return a.1 != b.1 ? a.1 < b.1 : a.2 < b.2
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
