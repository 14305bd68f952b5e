import Foundation
import Locking
import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

/// Notices on a resource's own channel reach its listener only when it wants
/// them; those on the shared channel always do.
@Suite(.serialized, .timeLimit(.minutes(1))) struct NoticeChannelTests {
    struct Said: Decodable { let say: String }

    final class Listener: NoticeListener {
        let wants = Locked(false)
        let heard = Locked<[String]>([])

        var wantsNotices: Bool { wants.withLock { $0 } }
        func receive(_ payload: [UInt8]) {
            let said = (try? JSONDecoder().decode(Said.self, from: Data(payload)))?.say
            heard.withLock { $0.append(said ?? "?") }
        }
        func resynchronize() {}
    }

    @Test func ownNoticesAreDroppedUnreadUnlessWanted() async throws {
        let server = try await RedisServer()
        let clock = ManualClock(start: Timestamp(micros: 1_767_225_600_000_000))
        let backend = try RedisBackend(
            settings: RedisSettings(url: "redis://127.0.0.1:\(server.port)"), clock: clock)
        try backend.start { _ in }
        defer { backend.stopSubscriber() }
        try await Self.eventually { await backend.unavailableReason() == nil }
        let listener = Listener()
        backend.register(listener, kind: "queue", name: "q")
        let own = backend.keys(kind: "queue", name: "q").noticeChannel
        #expect(own == "usher:notices:queue:q")
        func publish(_ channel: String, _ say: String) async throws {
            _ = try await backend.command(["PUBLISH", channel, #"{"kind":"queue","name":"q","say":"\#(say)"}"#])
        }
        try await publish(own, "unwanted")
        try await publish(backend.channel, "shared")
        try await Self.eventually { listener.heard.withLock { $0 } == ["shared"] }
        listener.wants.withLock { $0 = true }
        try await publish(own, "wanted")
        try await publish(backend.keys(kind: "queue", name: "other").noticeChannel, "elsewhere")
        try await publish(backend.channel, "shared again")
        try await Self.eventually { listener.heard.withLock { $0 } == ["shared", "wanted", "shared again"] }
    }

    @Test func patternsEscapeThePrefix() {
        #expect(RedisBackend.globEscaped("app*[1]?:notices:") == #"app\*\[1\]\?:notices:"#)
        #expect(RedisBackend.globEscaped(#"a\b^"#) == #"a\\b\^"#)
    }

    static func eventually(_ met: () async -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(5)
        while !(await met()) {
            guard ContinuousClock.now < deadline else {
                Issue.record("not met within 5 s")
                return
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}
