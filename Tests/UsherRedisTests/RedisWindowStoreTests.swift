import Foundation
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// `window.lua` and `RedisWindowStore` against a real redis-server: Redis
/// specifics (the rules are WindowServiceTests', on both backends), and a
/// differential run against the memory window's engine.
@Suite(.serialized, .timeLimit(.minutes(3))) struct RedisWindowStoreTests {
    static let start = RedisQueueStoreTests.start

    /// A store on `server` for window `name`, its time from `clock`.
    static func store(
        _ server: RedisServer, _ clock: ManualClock, name: String = "w", connection: RedisConnection? = nil,
        deadlines: Recorder<Timestamp?>? = nil
    ) -> RedisWindowStore {
        RedisWindowStore(
            keys: ResourceKeys(prefix: "usher:", kind: "window", name: name),
            connections: RedisConnectionPool([connection ?? server.connection()]),
            time: .clock(clock), channel: "usher:notices", onDeadline: { next in deadlines?.append(next) })
    }

    /// Notices of windows published on `server`, as they arrive.
    static func listen(_ server: RedisServer) async throws -> (Recorder<WindowNotice>, RedisSubscriber) {
        let notices = Recorder<WindowNotice>()
        let subscriber = try RedisSubscriber(
            endpoint: server.endpoint, connectTimeoutSeconds: 1, channels: ["usher:notices"]
        ) { event in
            if case .message(_, let payload) = event, let n = RedisWindowStore.decodeNotice(payload) {
                notices.append(n)
            }
        }
        try await RedisQueueStoreTests.waitUntil { await RedisQueueStoreTests.subscribers(server) == 1 }
        return (notices, subscriber)
    }

    @Test func createAnswersTheExistingConfigAndDeleteMakesItGone() async throws {
        let server = try await RedisServer()
        let w = Self.store(server, ManualClock(start: Self.start))
        let config = WindowConfig(maxWaiting: 7, displaySeconds: 0.25, dedup: .adjacent)
        #expect(try await w.create(config) == (config, true))
        #expect(try await w.create(WindowConfig()) == (config, false))
        #expect(try await w.config() == config)
        #expect(try await w.delete())
        #expect(try await w.delete() == false)
        await #expect(throws: WindowError.gone) { try await w.show(ShowRequest()) }
        await #expect(throws: WindowError.gone) { try await w.showing() }
    }

    @Test func payloadsRoundTripExactly() async throws {
        let server = try await RedisServer()
        let w = Self.store(server, ManualClock(start: Self.start))
        _ = try await w.create(WindowConfig())
        let text = #"{"big":9223372036854775807,"tenth":0.1,"huge":1e+19,"s":"a/\"b\"\u00e9","l":[null,true,{}]}"#
        let payload = try JSONValue.parse(text)
        let shown = try await w.show(ShowRequest(title: "t\u{e9}", message: "m\nn", payload: payload)).item
        #expect(shown.payload == payload && shown.title == "t\u{e9}" && shown.message == "m\nn")
        let showing = try await w.showing()
        let read = try #require(showing)
        #expect(read.payload == payload && read == shown)
        #expect(shown.id == IDGenerator.format(Self.start.micros + 1))
    }

    @Test func fencesNeverGoBackwardsWhenTheClockDoes() async throws {
        let server = try await RedisServer()
        let late = Self.store(server, ManualClock(start: Self.start.adding(seconds: 10)))
        let early = Self.store(server, ManualClock(start: Self.start))
        _ = try await late.create(WindowConfig())
        let first = try await late.show(ShowRequest()).item
        let second = try await early.dismiss().showing
        #expect(second == nil)
        let third = try await early.show(ShowRequest()).item
        #expect((third.fence ?? 0) > (first.fence ?? .max))
        #expect(third.id > first.id)
    }

    @Test func noticesTellEveryChangeAndConfigUpdate() async throws {
        let server = try await RedisServer()
        let (notices, subscriber) = try await Self.listen(server)
        defer { subscriber.stop() }
        let w = Self.store(server, ManualClock(start: Self.start))
        _ = try await w.create(WindowConfig(displaySeconds: 30))
        _ = try await w.show(ShowRequest(id: "a"))
        _ = try await w.show(ShowRequest(id: "b"))
        _ = try await w.dismiss()
        _ = try await w.apply(WindowPatch(maxWaiting: 5, dedup: .key))
        #expect(try await w.delete())
        try await RedisQueueStoreTests.waitUntil { notices.items.count == 6 }
        let got = notices.items
        #expect(got.map { $0.changed.map(\.id) } == [["a"], ["b"], ["a", "b"], [], ["b"], []])
        #expect(got[2].changed.map(\.status) == [.dismissed, .showing])
        #expect(got[2].next == Self.start.adding(seconds: 30))
        #expect(got[3].updated?.fields.map(\.field) == ["max_waiting", "dedup"])
        #expect(got[4].changed.map(\.status) == [.dismissed] && got[4].changed[0].reason == "deleted")
        #expect(got[5].deleted && got[5].name == "w")
    }

    @Test func aTickAppliesWhatIsDueOnceAndThenFindsNothing() async throws {
        let server = try await RedisServer()
        let (notices, subscriber) = try await Self.listen(server)
        defer { subscriber.stop() }
        let clock = ManualClock(start: Self.start)
        let deadlines = Recorder<Timestamp?>()
        let w = Self.store(server, clock, deadlines: deadlines)
        _ = try await w.create(WindowConfig(displaySeconds: 5))
        _ = try await w.show(ShowRequest(id: "a"))
        _ = try await w.show(ShowRequest(id: "b", delaySeconds: 1))
        clock.advance(by: 10)
        try await w.tick()
        try await w.tick()
        try await RedisQueueStoreTests.waitUntil { notices.items.count == 3 }
        try await Task.sleep(for: .milliseconds(50))
        #expect(notices.items.count == 3)
        let tick = notices.items[2]
        #expect(tick.changed.map(\.id) == ["b", "a"] && tick.changed.map(\.status) == [.showing, .expired])
        // a expired at 5 and b, queued at 1, is shown by the tick (at its time, as the engine does).
        #expect(try await w.item(id: "b").shownAt == Self.start.adding(seconds: 10))
        #expect(tick.next == Self.start.adding(seconds: 15))
        #expect(deadlines.items.suffix(2).allSatisfy { $0 == tick.next })
    }

    @Test func everyKeySharesOneSlotAndDeleteRemovesThemAll() async throws {
        let server = try await RedisServer()
        let connection = server.connection()
        let w = Self.store(server, ManualClock(start: Self.start), connection: connection)
        _ = try await w.create(WindowConfig(displaySeconds: 3))
        _ = try await w.show(ShowRequest(key: "k"))
        _ = try await w.show(ShowRequest(key: "k"))
        _ = try await w.show(ShowRequest(key: "k"))
        _ = try await w.show(ShowRequest(delaySeconds: 5))
        _ = try await w.dismiss()
        let keys = try await connection.command(["KEYS", "*"]).array?.compactMap(\.string) ?? []
        #expect(keys.count >= 7)
        #expect(Set(keys.map(RedisQueueStoreTests.slot)).count == 1)
        #expect(keys.allSatisfy { $0.hasPrefix("usher:{window:w}:") })
        #expect(try await w.delete())
        #expect(try await connection.command(["DBSIZE"]).int == 0)
    }

    @Test func aStoppedServerIsUnavailable() async throws {
        let server = try await RedisServer()
        let w = Self.store(server, ManualClock(start: Self.start))
        _ = try await w.create(WindowConfig())
        server.stop()
        await #expect {
            try await w.show(ShowRequest())
        } throws: { error in
            if case .backendUnavailable = error as? WindowError { return true }
            return false
        }
    }
}
