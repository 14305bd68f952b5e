import Testing

@testable import Locking
@testable import UsherAPI

/// `Array.mapAtOnce` and `forEachAtOnce`: every element's work runs at once,
/// answers keep the array's order, the first error in that order wins.
@Suite(.timeLimit(.minutes(1))) struct AtOnceTests {
    struct Failed: Error, Equatable { let element: Int }

    /// A count the elements' tasks share.
    final class Count: Sendable {
        private let value = Locked(0)
        func add() { value.withLock { $0 += 1 } }
        var now: Int { value.withLock { $0 } }
    }

    /// Marks `started` one more and waits until `n` have started (false
    /// after 10 s): work done one after another would never get there.
    static func arrive(_ started: Count, all n: Int) async -> Bool {
        started.add()
        for _ in 0..<10_000 {
            if started.now == n { return true }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return false
    }

    @Test func mapAtOnceRunsEveryElementAtOnceAndKeepsTheOrder() async {
        let elements = Array(0..<50)
        let started = Count()
        let answers = await elements.mapAtOnce { (i) async -> Int? in
            guard await Self.arrive(started, all: elements.count) else { return nil }
            // The last element ends first: the answers come in reverse.
            try? await Task.sleep(for: .milliseconds(2 * (elements.count - i)))
            return i * 10
        }
        #expect(answers == elements.map { $0 * 10 })
    }

    @Test func mapAtOnceThrowsTheFirstErrorInOrderOnceAllHaveEnded() async {
        let ended = Count()
        do throws(Failed) {
            _ = try await Array(0..<10).mapAtOnce { (i) async throws(Failed) -> Int in
                defer { ended.add() }
                // 7 fails at once, 3 later: 3 comes first in the array's order.
                if i == 3 {
                    try? await Task.sleep(for: .milliseconds(50))
                    throw Failed(element: 3)
                }
                if i == 7 { throw Failed(element: 7) }
                try? await Task.sleep(for: .milliseconds(20))
                return i
            }
            Issue.record("no error thrown")
        } catch {
            #expect(error == Failed(element: 3))
        }
        #expect(ended.now == 10)
    }

    @Test func mapAtOnceOfNothingIsEmpty() async {
        #expect(await [Int]().mapAtOnce { $0 }.isEmpty)
    }

    @Test func forEachAtOnceRunsEveryElementAtOnce() async {
        let started = Count()
        let together = Count()
        await Array(0..<20).forEachAtOnce { _ in
            if await Self.arrive(started, all: 20) { together.add() }
        }
        #expect(together.now == 20)
    }
}
