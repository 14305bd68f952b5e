import Foundation
import HTTPTestClient
import RedisTestServer
import TestSupport
import Testing

@testable import UsherAPI

extension OneAtATime {
    /// What only Redis-backed queues do, live: two Usher servers sharing one
    /// Redis, Redis going away and coming back, and PUT bodies naming a backend.
    @Suite(.serialized, .timeLimit(.minutes(2))) struct RedisQueueLiveTests {
        @Test func twoServersOnOneRedisShareAQueue() async throws {
            let redis = try await RedisServer()
            let a = try await BackendApp(.redis, redis: redis)
            let b = try await BackendLiveServer(.redis, redis: redis)
            #expect(try await a.call("PUT", "/v1/queues/q", a.put(#"{"capacity": 1}"#)).status == 201)
            // Visible on B at once.
            let onB = try await b.call("GET", "/v1/queues/q")
            #expect(onB.status == 200)
            #expect((onB.json["config"] as? [String: Any])?["capacity"] as? Int == 1)
            let list = try await b.call("GET", "/v1/queues")
            #expect((list.json["queues"] as? [[String: Any]])?.map { $0["name"] as? String } == ["q"])
            #expect(try await b.call("PUT", "/v1/queues/q", b.put(#"{"capacity": 1}"#)).status == 200)

            // B's event stream sees what is done on A.
            let opened = DispatchSemaphore(value: 0)
            let bPort = b.live.port
            let stream = Task {
                try await onThread { () throws -> [String] in
                    let events = try SSEReader(port: bPort)
                    opened.signal()
                    return try events.next(3)
                }
            }
            _ = try await onThread { opened.wait(timeout: .now() + 5) }
            #expect(try await a.call("POST", "/v1/queues/q/visitors", #"{"id": "h"}"#).status == 201)

            // A long-poll parked on A is answered when B completes the holder.
            let started = Date()
            let waiter = a.start("POST", "/v1/queues/q/visitors?wait=10", #"{"id": "w"}"#)
            #expect(await b.untilVisitor("q", "w")?.json["status"] as? String == "waiting")
            #expect(try await b.call("POST", "/v1/queues/q/visitors/h/complete").status == 200)
            let granted = try await waiter.value
            #expect(granted.status == 201 && granted.json["status"] as? String == "granted")
            #expect(Date().timeIntervalSince(started) < 5)
            #expect(try await stream.value == ["queue/q/granted", "queue/q/enqueued", "queue/q/completed"])

            // DELETE on B: A's parked long-poll is answered 410, A's GET is 404.
            let parked = a.start("POST", "/v1/queues/q/visitors?wait=10", #"{"id": "x"}"#)
            _ = await a.untilVisitor("q", "x")
            #expect(try await b.call("DELETE", "/v1/queues/q").status == 204)
            let gone = try await parked.value
            #expect(gone.status == 410 && gone.code == "gone")
            #expect(await untilDeleted { try await a.call("GET", "/v1/queues/q").status })
            #expect((try await a.call("GET", "/v1/queues").json["queues"] as? [[String: Any]])?.isEmpty == true)
        }

        @Test func redisDownFailsOnlyRedisRoutesAndRecovers() async throws {
            let redis = try await RedisServer()
            let s = try await BackendApp(.redis, #"{"queues": {"shared": {"capacity": 1}}}"#, redis: redis)
            #expect(try await s.call("PUT", "/v1/queues/local", #"{"capacity": 1, "backend": "memory"}"#).status == 201)
            #expect(try await s.call("POST", "/v1/queues/shared/visitors", "{}").status == 201)

            redis.stop()
            let down = try await s.call("POST", "/v1/queues/shared/visitors", "{}")
            #expect(down.status == 503)
            #expect(down.code == "backend_unavailable")
            #expect(Int(down.headers["retry-after"] ?? "") != nil)
            #expect(try await s.call("GET", "/v1/queues/shared").status == 503)
            #expect(try await s.call("POST", "/v1/queues/local/visitors", "{}").status == 201)
            #expect(try await s.call("GET", "/v1/queues/local").status == 200)
            #expect(try await s.call("GET", "/healthz").status == 200)
            #expect(try await s.call("GET", "/metrics").status == 200)
            let ready = try await s.call("GET", "/readyz")
            #expect(ready.status == 503)
            #expect(ready.text.lowercased().contains("redis"), "\(ready.text)")

            // Back (empty: no persistence): ready again within seconds, without a restart of Usher.
            try await redis.start()
            // Each command connection fails its first command after the restart
            // (Server closed the connection), /readyz's PING included: ready once
            // four PINGs in a row (one per connection) pass.
            var streak = 0
            let recovered = await poll(10) {
                streak = (try? await s.call("GET", "/readyz").status) == 200 ? streak + 1 : 0
                return streak >= 4
            }
            #expect(recovered)
            // What Redis held is lost; "shared", declared in the config file, is
            // made again (a new run_id says Redis restarted), empty, and the list
            // and a new PUT of another name work.
            var shared: TestHTTPClient.Response?
            let redeclared = await poll(10) {
                shared = try? await s.call("GET", "/v1/queues/shared")
                return shared?.status == 200 && (shared?.json["holding"] as? [Any])?.isEmpty == true
            }
            #expect(redeclared, "\(shared?.text ?? "")")
            let index = try await redis.connection().command(["HKEYS", "usher:resources"])
            #expect(index.array?.compactMap(\.string) == ["queue:shared"])
            let list = try await s.call("GET", "/v1/queues")
            #expect(list.status == 200)
            #expect(
                (list.json["queues"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["local", "shared"])
            #expect(try await s.call("PUT", "/v1/queues/again", s.put("{}")).status == 201)
            #expect(try await s.call("POST", "/v1/queues/again/visitors", "{}").status == 201)
            #expect(try await s.call("POST", "/v1/queues/local/visitors", "{}").status == 201)
        }

        @Test func aQueueBeingDeletedIsNotTakenUpAgainByAnotherServer() async throws {
            let redis = try await RedisServer()
            let a = try await BackendLiveServer(.redis, redis: redis)
            let b = try await BackendLiveServer(.redis, redis: redis)
            #expect(try await a.call("PUT", "/v1/queues/q", a.put(#"{"capacity": 1}"#)).status == 201)
            #expect(try await b.call("GET", "/v1/queues/q").status == 200)
            // A deletion between its script (keys gone, `deleted` published: B
            // forgets the queue) and the index's entry going.
            _ = try await redis.connection().command(["DEL", "usher:{queue:q}:meta"])
            let notice = #"{"kind": "queue", "name": "q", "time": "1", "deleted": true}"#
            _ = try await redis.connection().command(["PUBLISH", "usher:notices", notice])
            #expect(await poll(5) { (try? b.app.registry.resource(.queues, "q")) == nil })
            let onB = try await b.call("GET", "/v1/queues/q")
            #expect(onB.status == 404 && onB.code == "not_found", "\(onB.status) \(onB.text)")
            _ = try await redis.connection().command(["HDEL", "usher:resources", "queue:q"])
            #expect(try await b.call("GET", "/v1/queues/q").status == 404)
            #expect(try await b.call("PUT", "/v1/queues/q", b.put(#"{"capacity": 2}"#)).status == 201)
            #expect(try await b.call("GET", "/v1/queues/q").status == 200)
        }

        @Test func metricsSayWhetherRedisIsHeardWithoutAskingIt() async throws {
            let redis = try await RedisServer()
            let s = try await BackendApp(.redis, #"{"queues": {"shared": {"capacity": 1}}}"#, redis: redis)
            func sample(_ line: String) async throws -> Double? {
                let text = try await s.call("GET", "/metrics").text
                return text.split(separator: "\n").first { $0.hasPrefix(line + " ") }.flatMap {
                    Double($0.split(separator: " ").last ?? "")
                }
            }
            #expect(try await poll(5) { try await sample("usher_redis_up") == 1 })
            #expect(try await sample(#"usher_redis_resources{kind="queues"}"#) == 1)
            #expect(try await sample(#"usher_redis_resources{kind="machines"}"#) == 0)
            let heard = try #require(try await sample("usher_redis_notices_total"))
            #expect(try await s.call("POST", "/v1/queues/shared/visitors", "{}").status == 201)
            #expect(try await poll(5) { try await sample("usher_redis_notices_total") ?? 0 > heard })

            redis.stop()
            #expect(try await poll(5) { try await sample("usher_redis_up") == 0 })
            try await redis.start()
            #expect(try await poll(10) { try await sample("usher_redis_up") == 1 })
        }

        @Test func badBackendsInPutBodiesLoseNothing() async throws {
            let withRedis = try await BackendApp(.redis)
            let memoryOnly = try await BackendApp(.memory)
            let cases: [(BackendApp, String, String, Int, String)] = [
                (withRedis, "/v1/queues/q", #"{"backend": "disk"}"#, 400, "backend"),
                (withRedis, "/v1/queues/q", #"{"backend": 1}"#, 400, "backend"),
                (memoryOnly, "/v1/queues/q", #"{"backend": "redis"}"#, 400, "backend"),
                (
                    withRedis, "/v1/pipelines/pl", #"{"backend": "redis", "source": {"kind": "file", "path": "a"}}"#,
                    400,
                    "source"
                ),
                (memoryOnly, "/v1/pools/p", #"{"elements": ["a"], "backend": "redis"}"#, 400, "backend"),
            ]
            for (s, path, body, status, mention) in cases {
                let r = try await s.call("PUT", path, body)
                #expect(r.status == status, "\(path) \(body): \(r.text)")
                #expect((r.json["detail"] as? String)?.contains(mention) == true, "\(r.text) should mention \(mention)")
            }
            for s in [withRedis, memoryOnly] {
                #expect(try await s.call("GET", "/v1/queues/q").status == 404)
                #expect(try await s.call("GET", "/v1/pools/p").status == 404)
                #expect(try await s.call("GET", "/v1/pipelines/pl").status == 404)
                #expect((try await s.call("GET", "/v1/queues").json["queues"] as? [[String: Any]])?.isEmpty == true)
            }
        }
    }
}
