import Testing

@testable import UsherCore

/// Cursors: a page resumes after a key that does not move, so what stays
/// put is listed exactly once across pages.
@Suite struct PagingTests {
    @Test func treePrefixAfterAKeyIsTheRestOfTheOrder() {
        var tree = OrderStatisticTree(seed: 7)
        var keys: [(handle: Int32, priority: Int32, seq: Int64)] = []
        for h in 0..<200 {
            let priority = Int32(h * 7919 % 5) - 2
            tree.insert(Int32(h), priority: priority, seq: Int64(h))
            keys.append((Int32(h), priority, Int64(h)))
        }
        let order = tree.prefix(.max)
        #expect(order.count == 200)
        for (i, h) in order.enumerated() {
            let key = tree.key(of: h)
            #expect(tree.prefix(.max, after: key) == Array(order[(i + 1)...]))
            #expect(tree.prefix(3, after: key) == Array(order[(i + 1)...].prefix(3)))
        }
        // The key of a handle that left the tree still finds its place.
        let gone = order[50]
        let key = tree.key(of: gone)
        tree.remove(gone)
        #expect(tree.prefix(.max, after: key) == Array(order[51...]))
    }

    @Test func queuePagesCoverHoldersThenTheLineExactlyOnce() throws {
        let clock = ManualClock()
        var config = QueueConfig()
        config.capacity = 5
        var engine = QueueEngine(name: "q", config: config, createdAt: clock.now())
        for i in 0..<23 {
            _ = try engine.enqueue(VisitorRequest(id: "v\(i)", priority: i % 4), now: clock.now())
        }
        var seen: [String] = []
        var cursor: QueueCursor?
        var positions: [Int] = []
        repeat {
            let page = engine.state(limit: 4, after: cursor, now: clock.now())
            seen += page.holding.map(\.id) + page.waiting.map(\.id)
            positions += page.waiting.compactMap(\.position)
            #expect(page.cursors.count == page.holding.count + page.waiting.count)
            cursor = page.more ? page.cursors.last : nil
            #expect(cursor.map { QueueCursor($0.text) == $0 } ?? true)
        } while cursor != nil
        #expect(seen.count == 23 && Set(seen).count == 23)
        #expect(positions == Array(1...18))
        // A page resumes after a holder that has since left.
        let holders = engine.state(limit: 10, now: clock.now()).holding.map(\.id)
        let first = engine.state(limit: 2, now: clock.now())
        let after = try #require(first.cursors.last)
        _ = try engine.complete(id: holders[0], now: clock.now())
        _ = try engine.complete(id: holders[1], now: clock.now())
        let next = engine.state(limit: 2, after: after, now: clock.now())
        #expect(next.holding.map(\.id) == Array(holders[2..<4]))
        #expect(QueueCursor("x1") == nil && QueueCursor("w1") == nil && QueueCursor("h") == nil)
    }
}
