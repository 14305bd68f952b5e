import TestSupport
import Testing

@testable import UsherCore

/// `WindowSlot` on a `ManualClock`: one item shown, the rest queued, dismiss
/// shows the next in one step, display time, dedup, the showing long-poll.
@Suite struct WindowSlotTests {
    typealias F = QueueFixtures
    let clock = ManualClock()

    func window(_ config: WindowConfig = WindowConfig()) -> WindowSlot {
        WindowSlot(name: "alerts", config: config, clock: clock)
    }

    func later(_ seconds: Double) -> Timestamp { clock.now().adding(seconds: seconds) }

    @discardableResult
    func show(_ w: WindowSlot, _ r: ShowRequest) throws -> WindowItem {
        try w.withIsolation { w throws(WindowError) in try w.show(r) }.item
    }

    func dismiss(_ w: WindowSlot, _ id: String? = nil) throws -> Dismissal {
        try w.withIsolation { w throws(WindowError) in try w.dismiss(id: id) }
    }

    func showing(_ w: WindowSlot) throws -> String? {
        try w.withIsolation { w throws(WindowError) in try w.showing() }?.id
    }

    func queued(_ w: WindowSlot) throws -> [String] {
        try w.withIsolation { w throws(WindowError) in try w.state(limit: 100) }.queued.map(\.id)
    }

    @Test func showsAtOnceWhenEmptyAndQueuesTheRestByPriorityThenArrival() throws {
        let w = window()
        let a = try show(w, ShowRequest(id: "a", title: "Order shipped", message: "#42", payload: .int(42)))
        #expect(a.status == .showing && a.shownAt == clock.now() && a.position == nil)
        #expect(a.title == "Order shipped" && a.message == "#42" && a.payload == .int(42))
        let b = try show(w, ShowRequest(id: "b"))
        #expect(b.status == .queued && b.position == 1 && b.fence == nil)
        let c = try show(w, ShowRequest(id: "c", priority: 5))
        #expect(c.position == 1)
        #expect(try queued(w) == ["c", "b"])
        let d = try dismiss(w)
        #expect(d.dismissed.id == "a" && d.dismissed.status == .dismissed && d.dismissed.finishedAt == clock.now())
        #expect(d.showing?.id == "c" && d.showing?.status == .showing)
        #expect(try queued(w) == ["b"])
    }

    @Test func serverIDsAndARetriedShowWithTheSameID() throws {
        let w = window()
        #expect(try show(w, ShowRequest()).id == "1767225600000001")
        let (first, created) = try w.withIsolation { w throws(WindowError) in
            try w.show(ShowRequest(id: "x", title: "one"))
        }
        let (again, createdAgain) = try w.withIsolation { w throws(WindowError) in
            try w.show(ShowRequest(id: "x", title: "two"))
        }
        #expect(created && !createdAgain)
        #expect(again == first && again.title == "one")
        #expect(w.withIsolation { $0.counts.receivedTotal } == 2)
    }

    @Test func dismissWithoutAnythingShowingOrWithAnUnknownID() throws {
        let w = window()
        #expect(throws: WindowError.nothingShowing) { try dismiss(w) }
        #expect(throws: WindowError.notFound("item \"nope\"")) { try dismiss(w, "nope") }
    }

    @Test func dismissByIDTakesAQueuedItemOrTheShownOneAndRepeatsAreHarmless() throws {
        let w = window()
        try show(w, ShowRequest(id: "a"))
        try show(w, ShowRequest(id: "b"))
        try show(w, ShowRequest(id: "c"))
        let queuedOne = try dismiss(w, "b")
        #expect(queuedOne.dismissed.status == .dismissed && queuedOne.dismissed.shownAt == nil)
        #expect(queuedOne.showing?.id == "a")
        let shownOne = try dismiss(w, "a")
        #expect(shownOne.showing?.id == "c")
        // Dismissing a finished item again answers it as it is.
        let repeated = try dismiss(w, "a")
        #expect(repeated.dismissed == shownOne.dismissed && repeated.showing?.id == "c")
        let counts = w.withIsolation { $0.counts }
        #expect(counts.dismissedTotal == 2 && counts.shownTotal == 2 && counts.showing == 1 && counts.queued == 0)
    }

    /// The seed's generalisation: the login screen is an item pinned with
    /// `display_seconds: 0`, and every alert waits behind it.
    @Test func aLoginScreenPinnedWithDisplaySecondsZeroHoldsTheSlotWhileAlertsQueue() throws {
        let w = window(WindowConfig(displaySeconds: 5))
        let login = try show(w, ShowRequest(id: "login", displaySeconds: 0))
        #expect(login.status == .showing && login.expiresAt == nil)
        try show(w, ShowRequest(id: "alert-1", title: "City changed"))
        try show(w, ShowRequest(id: "alert-2", title: "Order shipped"))
        clock.advance(by: 3600)
        #expect(try showing(w) == "login")
        #expect(try queued(w) == ["alert-1", "alert-2"])
        #expect(clock.pendingCount == 0)  // nothing is timed while the login screen is up
        let next = try dismiss(w, "login")
        #expect(next.showing?.id == "alert-1" && next.showing?.expiresAt == later(5))
        clock.advance(by: 5)  // alert-1 dismisses itself and alert-2 is shown
        let a1 = try w.withIsolation { w throws(WindowError) in try w.item(id: "alert-1") }
        #expect(a1.status == .expired && a1.finishedAt == clock.now())
        #expect(try showing(w) == "alert-2")
        clock.advance(by: 5)
        #expect(try showing(w) == nil)
        let counts = w.withIsolation { $0.counts }
        #expect(counts.expiredTotal == 2 && counts.dismissedTotal == 1 && counts.shownTotal == 3)
    }

    @Test func anItemsOwnDisplaySecondsOverridesTheWindowsEitherWay() throws {
        let w = window(WindowConfig(displaySeconds: 3))
        let long = try show(w, ShowRequest(id: "long", displaySeconds: 10))
        #expect(long.expiresAt == later(10))
        try show(w, ShowRequest(id: "short", displaySeconds: 1))
        try show(w, ShowRequest(id: "plain"))
        clock.advance(by: 10)
        #expect(try showing(w) == "short")
        clock.advance(by: 1)
        let plain = try w.withIsolation { w throws(WindowError) in try w.item(id: "plain") }
        #expect(plain.status == .showing && plain.expiresAt == later(3))
    }

    @Test func untilDismissedByDefault() throws {
        let w = window()
        #expect(try show(w, ShowRequest(id: "a")).expiresAt == nil)
        clock.advance(by: 86_400)
        #expect(try showing(w) == "a")
    }

    @Test func aDuplicateKeyMergesIntoTheQueuedItemNotTheShownOne() throws {
        let w = window(WindowConfig(dedup: .key))
        try show(w, ShowRequest(id: "a", key: "city"))
        // The shown item is not queued: a new one with its key queues.
        let b = try show(w, ShowRequest(id: "b", key: "city", title: "Berlin"))
        #expect(b.status == .queued)
        let c = try show(w, ShowRequest(id: "c", key: "city", title: "Paris"))
        #expect(c.status == .merged && c.mergedInto == "b" && c.finishedAt == clock.now())
        try show(w, ShowRequest(id: "d", key: "order"))
        #expect(try queued(w) == ["b", "d"])
        #expect(w.withIsolation { $0.counts.mergedTotal } == 1)
        // Dismissing a merged item answers it as it is.
        #expect(try dismiss(w, "c").dismissed.status == .merged)
    }

    @Test func dedupOffNeverMerges() throws {
        let w = window(WindowConfig(dedup: .off))
        try show(w, ShowRequest(id: "a", key: "k"))
        try show(w, ShowRequest(id: "b", key: "k"))
        #expect(try show(w, ShowRequest(id: "c", key: "k")).status == .queued)
    }

    @Test func maxWaitingRefusesMoreQueuedItems() throws {
        let w = window(WindowConfig(maxWaiting: 1, dedup: .key))
        try show(w, ShowRequest(id: "a"))
        try show(w, ShowRequest(id: "b"))
        #expect(throws: WindowError.full(retryAfterSeconds: 1)) { try show(w, ShowRequest(id: "c")) }
        // A duplicate of a queued key needs no room.
        let w2 = window(WindowConfig(maxWaiting: 1, dedup: .key))
        try show(w2, ShowRequest(id: "a"))
        try show(w2, ShowRequest(id: "b", key: "k"))
        #expect(try show(w2, ShowRequest(id: "c", key: "k")).status == .merged)
    }

    @Test func aDelayedItemQueuesWhenItsDelayEnds() throws {
        let w = window()
        let d = try show(w, ShowRequest(id: "d", delaySeconds: 2))
        #expect(d.status == .delayed)
        #expect(try showing(w) == nil)
        clock.advance(by: 2)
        #expect(try showing(w) == "d")
    }

    @Test func everyShowingGetsAGrowingFence() throws {
        let w = window()
        let a = try show(w, ShowRequest(id: "a"))
        try show(w, ShowRequest(id: "b"))
        let next = try dismiss(w)
        #expect(a.fence == F.t0.micros)
        #expect(next.showing?.fence == F.t0.micros + 1)
    }

    @Test func patchChangesWhatHappensNext() throws {
        let w = window()
        try show(w, ShowRequest(id: "a"))
        let config = try w.withIsolation { w throws(WindowError) in try w.apply(WindowPatch(displaySeconds: 4)) }
        #expect(config == WindowConfig(displaySeconds: 4))
        #expect(try w.withIsolation { w throws(WindowError) in try w.item(id: "a") }.expiresAt == nil)
        try show(w, ShowRequest(id: "b"))
        _ = try dismiss(w)
        clock.advance(by: 4)
        #expect(try showing(w) == nil)
    }

    @Test func countsAddUp() throws {
        let w = window(WindowConfig(displaySeconds: 1))
        for i in 0..<6 { try show(w, ShowRequest(id: "i\(i)", key: i % 2 == 0 ? "k\(i)" : "same")) }
        try show(w, ShowRequest(id: "late", delaySeconds: 10))
        _ = try dismiss(w, "i3")
        clock.advance(by: 2.5)
        let c = w.withIsolation { $0.counts }
        #expect(c.receivedTotal == c.showing + c.queued + c.delayed + c.dismissedTotal + c.expiredTotal + c.mergedTotal)
        #expect(c.receivedTotal == 7)
    }
}
