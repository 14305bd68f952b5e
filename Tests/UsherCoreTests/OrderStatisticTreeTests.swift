import TestSupport
import Testing

@testable import UsherCore

/// A deterministic generator for property tests (SplitMix64).
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The treap against a sorted array, over random inserts and removals.
@Suite struct OrderStatisticTreeTests {
    struct Item: Equatable {
        var handle: Int32
        var priority: Int32
        var seq: Int64
    }

    static func sorted(_ items: [Item]) -> [Item] {
        items.sorted { $0.priority != $1.priority ? $0.priority > $1.priority : $0.seq < $1.seq }
    }

    @Test func emptyTree() {
        let t = OrderStatisticTree(seed: 1)
        #expect(t.isEmpty && t.count == 0 && t.first == nil && t.prefix(10).isEmpty)
    }

    @Test func ranksFollowPriorityThenSequence() {
        var t = OrderStatisticTree(seed: 7)
        t.insert(0, priority: 0, seq: 0)
        t.insert(1, priority: 5, seq: 1)
        t.insert(2, priority: 0, seq: 2)
        t.insert(3, priority: -3, seq: 3)
        t.insert(4, priority: 5, seq: 4)
        #expect(t.prefix(10) == [1, 4, 0, 2, 3])
        #expect((0..<5).map { t.rank(of: Int32($0)) } == [3, 1, 4, 5, 2])
        t.remove(4)
        #expect(t.rank(of: 0) == 2)
        #expect(!t.contains(4) && t.contains(0))
        #expect(t.first == 1)
    }

    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func matchesASortedArray(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        var tree = OrderStatisticTree(seed: seed)
        var model: [Item] = []
        var free: [Int32] = Array(0..<300)
        var seq: Int64 = 0
        for step in 0..<2000 {
            let insert = model.isEmpty || (free.count > 0 && Int.random(in: 0..<100, using: &rng) < 55)
            if insert {
                let h = free.remove(at: Int.random(in: 0..<free.count, using: &rng))
                let p = Int32.random(in: -3...3, using: &rng)
                tree.insert(h, priority: p, seq: seq)
                model.append(Item(handle: h, priority: p, seq: seq))
                seq += 1
            } else {
                // Remove the first, the last or one from the middle.
                let order = Self.sorted(model)
                let pick: Item
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: pick = order.first!
                case 1: pick = order.last!
                default: pick = order.randomElement(using: &rng)!
                }
                tree.remove(pick.handle)
                model.removeAll { $0.handle == pick.handle }
                free.append(pick.handle)
            }
            let order = Self.sorted(model)
            guard tree.count == order.count, tree.first == order.first?.handle else {
                Issue.record("count or first differ at step \(step)")
                return
            }
            if step % 100 == 0 {
                #expect(tree.prefix(order.count) == order.map(\.handle))
                for (i, item) in order.enumerated() { #expect(tree.rank(of: item.handle) == i + 1) }
            } else if let probe = order.randomElement(using: &rng),
                tree.rank(of: probe.handle) != order.firstIndex(of: probe)! + 1
                    || tree.prefix(5) != order.prefix(5).map(\.handle)
            {
                Issue.record("rank or prefix differ at step \(step)")
                return
            }
        }
    }

    @Test func staysShallowForFIFOInserts() {
        var t = OrderStatisticTree(seed: 42)
        for i in 0..<20_000 { t.insert(Int32(i), priority: 0, seq: Int64(i)) }
        #expect(t.rank(of: 19_999) == 20_000)
        #expect(depth(t, t.root) < 50)
        for i in 0..<10_000 { t.remove(Int32(i * 2)) }
        #expect(t.rank(of: 19_999) == 10_000)
        #expect(t.first == 1)
    }

    func depth(_ t: OrderStatisticTree, _ n: Int32) -> Int {
        n == OrderStatisticTree.none ? 0 : 1 + max(depth(t, t.nodes[Int(n)].left), depth(t, t.nodes[Int(n)].right))
    }
}
