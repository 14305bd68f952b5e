import RedisClient
import RedisTestServer
import Testing

@testable import UsherCore
@testable import UsherRedis

extension RedisQueueStoreTests {
    /// Each call asks for its own connection: concurrent calls on one queue
    /// spread over all of them, and the queue's rules still hold.
    @Test func everyCallTakesAConnectionOfItsOwn() async throws {
        let server = try await RedisServer()
        let pool = (0..<3).map { _ in server.connection() }
        let q = RedisQueueStore(
            keys: ResourceKeys(prefix: "usher:", kind: "queue", name: "q"), connections: RedisConnectionPool(pool),
            time: .clock(ManualClock(start: Self.start)), channel: "usher:notices", onDeadline: { _ in })
        _ = try await q.create(QueueConfig(capacity: 1))
        let views = try await withThrowingTaskGroup(of: VisitorView.self) { group in
            for i in 0..<30 { group.addTask { try await q.enqueue(VisitorRequest(id: "v\(i)")).view } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        // 31 calls in turn over 3 connections: each connected, once.
        for connection in pool { #expect(await connection.connectCount == 1) }
        #expect(views.filter { $0.status == .granted }.count == 1)
        #expect(Set(views.compactMap(\.position)) == Set(1...29))
    }
}
