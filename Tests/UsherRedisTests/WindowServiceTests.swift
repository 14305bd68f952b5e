import Foundation
import Testing

@testable import UsherCore
@testable import UsherRedis

/// The window's behaviours through `WindowService`, once on each backend (a
/// `WindowSlot`, a `RedisWindow` on a real redis-server), on a `ManualClock`:
/// what WindowSlotTests, WindowWaitTests and SingleReadTests check on memory
/// alone.
///
/// On Redis a display time or delay that ends is applied by the window's
/// timer (a `tick`) or by the next operation, whichever comes first: the
/// tests assert what the API shows after the clock moves. Differences by
/// design, not tested as equal: fences (memory counts up by one from the
/// creation time in µs, Redis takes max(last + 1, now in µs)); the storage
/// budget binds memory windows only; Redis emits a change's events when its
/// notice comes back through pub/sub, after the call returned.
@Suite(.serialized, .timeLimit(.minutes(2))) struct WindowServiceTests {
    typealias W = WindowUnderTest
    static let both: [TestBackend] = [.memory, .redis]

    // MARK: Show and dismiss

    @Test(arguments: both) func showsAtOnceWhenEmptyAndQueuesTheRestByPriorityThenArrival(_ backend: TestBackend)
        async throws
    {
        try await W.with(backend) { w in
            let a = try await w.show(ShowRequest(id: "a", title: "Order shipped", message: "#42", payload: .int(42)))
            #expect(a.status == .showing && a.shownAt == w.clock.now() && a.position == nil)
            #expect(a.title == "Order shipped" && a.message == "#42" && a.payload == .int(42))
            let b = try await w.show(ShowRequest(id: "b"))
            #expect(b.status == .queued && b.position == 1 && b.fence == nil)
            #expect(try await w.show(ShowRequest(id: "c", priority: 5)).position == 1)
            #expect(try await w.queued() == ["c", "b"])
            let d = try await w.dismiss()
            #expect(d.dismissed.id == "a" && d.dismissed.status == .dismissed)
            #expect(d.dismissed.finishedAt == w.clock.now())
            #expect(d.showing?.id == "c" && d.showing?.status == .showing)
            #expect(try await w.queued() == ["b"])
            // Fences rise with each showing.
            let fences = [a.fence, d.showing?.fence].compactMap { $0 }
            #expect(fences.count == 2 && fences[0] < fences[1])
        }
    }

    @Test(arguments: both) func serverIDsAndARetriedShowWithTheSameID(_ backend: TestBackend) async throws {
        try await W.with(backend) { w in
            #expect(try await w.show(ShowRequest()).id == "1767225600000001")
            let first = try await w.window.showItem(ShowRequest(id: "x", title: "one")).value()
            let again = try await w.window.showItem(ShowRequest(id: "x", title: "two")).value()
            #expect(first.created && !again.created)
            #expect(again.item == first.item && again.item.title == "one")
            #expect(try await w.counts().receivedTotal == 2)
        }
    }

    @Test(arguments: both) func dismissWithoutAnythingShowingOrWithAnUnknownID(_ backend: TestBackend) async throws {
        try await W.with(backend) { w in
            await #expect(throws: WindowError.nothingShowing) { try await w.dismiss() }
            await #expect(throws: WindowError.notFound("item \"nope\"")) { try await w.dismiss("nope") }
            await #expect(throws: WindowError.notFound("item \"nope\"")) { try await w.item("nope") }
        }
    }

    @Test(arguments: both) func dismissByIDTakesAQueuedItemOrTheShownOneAndRepeatsAreHarmless(
        _ backend: TestBackend
    ) async throws {
        try await W.with(backend) { w in
            for id in ["a", "b", "c"] { try await w.show(ShowRequest(id: id)) }
            let queuedOne = try await w.dismiss("b")
            #expect(queuedOne.dismissed.status == .dismissed && queuedOne.dismissed.shownAt == nil)
            #expect(queuedOne.showing?.id == "a")
            let shownOne = try await w.dismiss("a")
            #expect(shownOne.showing?.id == "c")
            let repeated = try await w.dismiss("a")
            #expect(repeated.dismissed == shownOne.dismissed && repeated.showing?.id == "c")
            let counts = try await w.counts()
            #expect(counts.dismissedTotal == 2 && counts.shownTotal == 2 && counts.showing == 1 && counts.queued == 0)
        }
    }

    @Test(arguments: both) func invalidRequestsAreRefusedInTheWindowsWords(_ backend: TestBackend) async throws {
        try await W.with(backend) { w in
            await #expect(
                throws: WindowError.invalid(field: "id", message: "must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
            ) {
                try await w.show(ShowRequest(id: "bad id"))
            }
            await #expect {
                try await w.show(ShowRequest(displaySeconds: -1))
            } throws: { error in
                if case .invalid(field: "display_seconds", _) = error as? WindowError { return true }
                return false
            }
            let counts = try await w.counts()
            #expect(counts.receivedTotal == 0)
        }
    }

    // MARK: Display time

    /// The login screen is an item pinned with `display_seconds: 0`, and every alert waits behind it.
    @Test(arguments: both) func aLoginScreenPinnedWithDisplaySecondsZeroHoldsTheSlotWhileAlertsQueue(
        _ backend: TestBackend
    ) async throws {
        try await W.with(backend, WindowConfig(displaySeconds: 5)) { w in
            let login = try await w.show(ShowRequest(id: "login", displaySeconds: 0))
            #expect(login.status == .showing && login.expiresAt == nil)
            try await w.show(ShowRequest(id: "alert-1", title: "City changed"))
            try await w.show(ShowRequest(id: "alert-2", title: "Order shipped"))
            w.clock.advance(by: 3600)
            #expect(try await w.showing() == "login")
            #expect(try await w.queued() == ["alert-1", "alert-2"])
            let next = try await w.dismiss("login")
            #expect(next.showing?.id == "alert-1" && next.showing?.expiresAt == w.later(5))
            w.clock.advance(by: 5)
            let a1 = try await w.item("alert-1")
            #expect(a1.status == .expired && a1.finishedAt == w.clock.now())
            #expect(try await w.showing() == "alert-2")
            w.clock.advance(by: 5)
            #expect(try await w.showing() == nil)
            let counts = try await w.counts()
            #expect(counts.expiredTotal == 2 && counts.dismissedTotal == 1 && counts.shownTotal == 3)
        }
    }

    @Test(arguments: both) func anItemsOwnDisplaySecondsOverridesTheWindowsEitherWay(_ backend: TestBackend)
        async throws
    {
        try await W.with(backend, WindowConfig(displaySeconds: 3)) { w in
            #expect(try await w.show(ShowRequest(id: "long", displaySeconds: 10)).expiresAt == w.later(10))
            try await w.show(ShowRequest(id: "short", displaySeconds: 1))
            try await w.show(ShowRequest(id: "plain"))
            w.clock.advance(by: 10)
            #expect(try await w.showing() == "short")
            w.clock.advance(by: 1)
            let plain = try await w.item("plain")
            #expect(plain.status == .showing && plain.expiresAt == w.later(3))
        }
    }

    @Test(arguments: both) func patchChangesWhatHappensNext(_ backend: TestBackend) async throws {
        try await W.with(backend) { w in
            try await w.show(ShowRequest(id: "a"))
            let config = try await w.window.applyPatch(WindowPatch(displaySeconds: 4)).value()
            #expect(config == WindowConfig(displaySeconds: 4))
            #expect(try await w.window.readConfig().value() == config)
            #expect(try await w.item("a").expiresAt == nil)
            try await w.show(ShowRequest(id: "b"))
            _ = try await w.dismiss()
            w.clock.advance(by: 4)
            #expect(try await w.showing() == nil)
        }
    }

    // MARK: Dedup, limits, delays

    @Test(arguments: both) func aDuplicateKeyMergesIntoTheQueuedItemNotTheShownOne(_ backend: TestBackend)
        async throws
    {
        try await W.with(backend, WindowConfig(dedup: .key)) { w in
            try await w.show(ShowRequest(id: "a", key: "city"))
            #expect(try await w.show(ShowRequest(id: "b", key: "city", title: "Berlin")).status == .queued)
            let c = try await w.show(ShowRequest(id: "c", key: "city", title: "Paris"))
            #expect(c.status == .merged && c.mergedInto == "b" && c.finishedAt == w.clock.now())
            try await w.show(ShowRequest(id: "d", key: "order"))
            #expect(try await w.queued() == ["b", "d"])
            #expect(try await w.counts().mergedTotal == 1)
            #expect(try await w.dismiss("c").dismissed.status == .merged)
        }
    }

    @Test(arguments: both) func withKeepLatestTheNewerItemIsShownInTheQueuedOnesPlace(_ backend: TestBackend)
        async throws
    {
        try await W.with(backend, WindowConfig(dedup: .key, dedupKeep: .latest)) { w in
            try await w.show(ShowRequest(id: "a", key: "order"))
            try await w.show(ShowRequest(id: "city-1", key: "city", title: "Berlin"))
            try await w.show(ShowRequest(id: "b", key: "order"))  // replaces nothing: a is shown
            let paris = try await w.show(ShowRequest(id: "city-2", key: "city", title: "Paris"))
            #expect(paris.status == .queued && paris.position == 1)
            #expect(try await w.queued() == ["city-2", "b"])
            _ = try await w.dismiss("a")
            #expect(try await w.showing() == "city-2")
            #expect(try await w.item("city-2").title == "Paris")
            let berlin = try await w.item("city-1")
            #expect(berlin.status == .merged && berlin.mergedInto == "city-2" && berlin.reason == "replaced")
            #expect(try await w.counts().mergedTotal == 1)
        }
    }

    @Test(arguments: both) func dedupOffNeverMergesAndMaxWaitingRefuses(_ backend: TestBackend) async throws {
        try await W.with(backend, WindowConfig(maxWaiting: 2, dedup: .off)) { w in
            for id in ["a", "b", "c"] { try await w.show(ShowRequest(id: id, key: "k")) }
            await #expect(throws: WindowError.full(retryAfterSeconds: 1)) {
                try await w.show(ShowRequest(id: "d", key: "k"))
            }
            _ = try await w.window.applyPatch(WindowPatch(dedup: .key)).value()
            // A duplicate of a queued key needs no room.
            #expect(try await w.show(ShowRequest(id: "e", key: "k")).status == .merged)
        }
    }

    @Test(arguments: both) func aDelayedItemQueuesWhenItsDelayEnds(_ backend: TestBackend) async throws {
        try await W.with(backend) { w in
            let d = try await w.show(ShowRequest(id: "d", delaySeconds: 2))
            #expect(d.status == .delayed)
            #expect(try await w.showing() == nil)
            w.clock.advance(by: 2)
            #expect(try await w.showing() == "d")
        }
    }

    @Test(arguments: both) func countsAddUpAndPagesFollowTheirCursors(_ backend: TestBackend) async throws {
        try await W.with(backend, WindowConfig(displaySeconds: 1, dedup: .key)) { w in
            for i in 0..<6 { try await w.show(ShowRequest(id: "i\(i)", key: i % 2 == 0 ? "k\(i)" : "same")) }
            try await w.show(ShowRequest(id: "late", delaySeconds: 10))
            let first = try await w.state(limit: 2)
            #expect(first.showing?.id == "i0" && first.queued.map(\.id) == ["i1", "i2"] && first.more)
            let cursor = try #require(first.cursors.last.flatMap(QueueCursor.init))
            let second = try await w.state(limit: 2, after: cursor)
            #expect(second.queued.map(\.id) == ["i4"] && !second.more && second.queued[0].position == 3)
            _ = try await w.dismiss("i1")
            w.clock.advance(by: 2.5)
            let c = try await w.counts()
            #expect(
                c.receivedTotal == c.showing + c.queued + c.delayed + c.dismissedTotal + c.expiredTotal + c.mergedTotal)
            #expect(c.receivedTotal == 7 && c.mergedTotal == 2)
        }
    }

    // MARK: Long-polls

    @Test(arguments: both) func aShowingWaitWithoutAfterWaitsWhileNothingIsShown(_ backend: TestBackend) async throws {
        try await W.with(backend) { w in
            let waiter = w.parkForShowing(after: nil, until: w.later(30))
            await w.parked(1)
            try await w.show(ShowRequest(id: "a"))
            #expect(try await waiter.value?.id == "a")
            #expect(try await w.window.parkUntilShowing(after: nil, until: w.later(30)).item()?.id == "a")
        }
    }

    @Test(arguments: both) func aDismissAndTheNextShowingAreOneChange(_ backend: TestBackend) async throws {
        try await W.with(backend) { w in
            try await w.show(ShowRequest(id: "a"))
            try await w.show(ShowRequest(id: "b"))
            let waiters = (0..<3).map { _ in w.parkForShowing(after: "a", until: w.later(30)) }
            await w.parked(3)
            _ = try await w.dismiss()
            for waiter in waiters { #expect(try await waiter.value?.id == "b") }
            // After the last item: null.
            let last = w.parkForShowing(after: "b", until: w.later(30))
            await w.parked(1)
            _ = try await w.dismiss("b")
            #expect(try await last.value == nil)
        }
    }

    @Test(arguments: both) func anAutoDismissOnTheClockWakesTheScreen(_ backend: TestBackend) async throws {
        try await W.with(backend, WindowConfig(displaySeconds: 2)) { w in
            try await w.show(ShowRequest(id: "a"))
            try await w.show(ShowRequest(id: "b"))
            let waiter = w.parkForShowing(after: "a", until: w.later(30))
            await w.parked(1)
            w.clock.advance(by: 2)
            let b = try await waiter.value
            #expect(b?.id == "b" && b?.shownAt == W.t0.adding(seconds: 2))
        }
    }

    @Test(arguments: both) func theDeadlineAnswersWhatIsShown(_ backend: TestBackend) async throws {
        try await W.with(backend) { w in
            try await w.show(ShowRequest(id: "a"))
            let waiter = w.parkForShowing(after: "a", until: w.later(5))
            await w.parked(1)
            w.clock.advance(by: 5)
            #expect(try await waiter.value?.id == "a")
            #expect(try await w.window.parkUntilShowing(after: "old", until: w.later(5)).item()?.id == "a")
        }
    }

    @Test(arguments: both) func anItemWaitAnswersWhenItsStatusChangesOrAtTheDeadline(_ backend: TestBackend)
        async throws
    {
        try await W.with(backend) { w in
            try await w.show(ShowRequest(id: "a"))
            try await w.show(ShowRequest(id: "b"))
            let waiter = w.parkForChange("b", from: .queued, until: w.later(30))
            await w.parked(1)
            _ = try await w.dismiss()
            let b = try await waiter.value
            #expect(b.status == .showing && b.id == "b")
            let still = w.parkForChange("b", from: .showing, until: w.later(5))
            await w.parked(1)
            w.clock.advance(by: 5)
            #expect(try await still.value.status == .showing)
            // A finished item answers at once, whatever status the caller saw.
            _ = try await w.dismiss("a")
            #expect(try await w.window.parkUntilChange(id: "a", from: .dismissed, until: w.later(5)).item().id == "a")
            await #expect(throws: WindowError.notFound("item \"zz\"")) {
                try await w.window.parkUntilChange(id: "zz", from: .queued, until: w.later(5)).item()
            }
        }
    }

    @Test(arguments: both) func eventsTellEveryChangeInTheWindowsWords(_ backend: TestBackend) async throws {
        try await W.with(backend, WindowConfig(displaySeconds: 1, dedup: .key)) { w in
            let seen = w.recordEvents()
            try await w.show(ShowRequest(id: "a", key: "k"))
            try await w.show(ShowRequest(id: "b", key: "k"))
            try await w.show(ShowRequest(id: "c", key: "k"))
            _ = try await w.dismiss("a")
            w.clock.advance(by: 1)
            _ = try await w.showing()
            let expected = ["shown:a", "queued:b", "merged:c", "dismissed:a", "shown:b", "expired:b"]
            await eventually { seen.all.count >= expected.count }
            #expect(seen.all == expected)
        }
    }
}
