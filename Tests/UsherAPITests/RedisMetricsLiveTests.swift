import Foundation
import HTTPTestClient
import RedisTestServer
import TestSupport
import Testing

@testable import UsherAPI

extension OneAtATime {
    /// `GET /metrics` for Redis-backed resources, live: every instance on one
    /// Redis reports the same counts, and a Redis that is paused or gone leaves
    /// them out of the scrape without holding it up.
    @Suite(.serialized, .timeLimit(.minutes(2))) struct RedisMetricsLiveTests {
        typealias Sample = MetricsTests.Sample

        static func scrape(_ s: any BackendUnderTest) async throws -> (samples: [Sample], seconds: Double, status: Int)
        {
            let started = Date()
            let response = try await s.call("GET", "/metrics")
            return (MetricsTests.parse(response.text), Date().timeIntervalSince(started), response.status)
        }

        static func value(
            _ samples: [Sample], _ name: String, _ kind: String? = nil, _ resource: String? = nil,
            _ extra: [String: String] = [:]
        ) -> Double? {
            var labels = extra
            if let kind { labels["kind"] = kind }
            if let resource { labels["name"] = resource }
            return samples.first { $0.name == name && $0.labels == labels }?.value
        }

        @Test func anInstanceReportsWhatAnotherDid() async throws {
            let redis = try await RedisServer()
            let a = try await BackendLiveServer(.redis, redis: redis)
            let b = try await BackendLiveServer(.redis, redis: redis)
            #expect(try await a.call("PUT", "/v1/queues/q", a.put(#"{"capacity": 1}"#)).status == 201)
            #expect(try await a.call("PUT", "/v1/windows/w", a.put("{}")).status == 201)
            #expect(try await a.call("PUT", "/v1/pools/p", a.put(#"{"elements": ["e1", "e2"]}"#)).status == 201)
            #expect(try await a.call("PUT", "/v1/pipelines/pl", a.put("{}")).status == 201)
            let machine = #"{"definition": "player", "backend": "redis"}"#
            #expect(try await a.call("PUT", "/v1/machines/m", machine).status == 201)
            #expect(try await b.call("PUT", "/v1/queues/local", #"{"capacity": 2}"#).status == 201)

            #expect(try await a.call("POST", "/v1/queues/q/visitors", #"{"id": "h"}"#).status == 201)
            #expect(try await a.call("POST", "/v1/queues/q/visitors", #"{"id": "w1"}"#).status == 201)
            #expect(try await a.call("POST", "/v1/queues/q/visitors", #"{"id": "w2"}"#).status == 201)
            #expect(try await a.call("POST", "/v1/windows/w/show", #"{"id": "x"}"#).status == 201)
            #expect(try await a.call("POST", "/v1/windows/w/show", #"{"id": "y"}"#).status == 201)
            #expect(try await a.call("POST", "/v1/pools/p/fetch", #"{"holder": "ci"}"#).status == 201)
            #expect(try await a.call("POST", "/v1/pipelines/pl/items", #"{"payload": 1}"#).status == 201)
            #expect(try await a.call("POST", "/v1/pipelines/pl/items", #"{"payload": 2}"#).status == 201)
            try await Task.sleep(for: .milliseconds(20))

            // B knows the resources once their creation notices came.
            #expect(
                try await poll(5) {
                    let s = try await Self.scrape(b).samples
                    return Self.value(s, "usher_redis_resources", nil, nil, ["kind": "machines"]) == 1
                        && Self.value(s, "usher_redis_resources", nil, nil, ["kind": "queues"]) == 1
                })
            let (onB, _, status) = try await Self.scrape(b)
            #expect(status == 200)
            #expect(Self.value(onB, "usher_redis_scrape_ok") == 1)
            #expect((Self.value(onB, "usher_redis_scrape_duration_seconds") ?? -1) >= 0)
            #expect(Self.value(onB, "usher_queue_capacity", "queues", "q") == 1)
            #expect(Self.value(onB, "usher_queue_holding", "queues", "q") == 1)
            #expect(Self.value(onB, "usher_queue_waiting", "queues", "q") == 2)
            #expect(Self.value(onB, "usher_resource_events_total", "queues", "q", ["event": "enqueued"]) == 3)
            #expect(Self.value(onB, "usher_resource_events_total", "queues", "q", ["event": "granted"]) == 1)
            #expect((Self.value(onB, "usher_resource_oldest_waiting_age_seconds", "queues", "q") ?? 0) >= 0.01)
            #expect(Self.value(onB, "usher_window_showing", "windows", "w") == 1)
            #expect(Self.value(onB, "usher_window_queued", "windows", "w") == 1)
            #expect(Self.value(onB, "usher_resource_events_total", "windows", "w", ["event": "received"]) == 2)
            #expect((Self.value(onB, "usher_resource_oldest_waiting_age_seconds", "windows", "w") ?? 0) > 0)
            #expect(Self.value(onB, "usher_pool_size", "pools", "p") == 2)
            #expect(Self.value(onB, "usher_pool_leased", "pools", "p") == 1)
            #expect(Self.value(onB, "usher_pool_available", "pools", "p") == 1)
            #expect(Self.value(onB, "usher_resource_events_total", "pools", "p", ["event": "fetched"]) == 1)
            #expect(Self.value(onB, "usher_resource_oldest_waiting_age_seconds", "pools", "p") == 0)
            #expect(Self.value(onB, "usher_pipeline_ready", "pipelines", "pl") == 2)
            #expect(Self.value(onB, "usher_resource_events_total", "pipelines", "pl", ["event": "pushed"]) == 2)
            #expect(Self.value(onB, "usher_machine_state", "machines", "m", ["state": "NotReady"]) == 1)
            // Its version (µs-based, above 1e15) prints as an integer.
            #expect((Self.value(onB, "usher_machine_version", "machines", "m") ?? 0) > 1e15)
            let versionLine = try await b.call("GET", "/metrics").text.split(separator: "\n")
                .first { $0.hasPrefix("usher_machine_version{") && $0.contains("name=\"m\"") }
            #expect(versionLine?.split(separator: " ").last?.allSatisfy(\.isNumber) == true, "\(versionLine ?? "")")
            // Not kept in Redis: left out rather than shown as 0.
            #expect(Self.value(onB, "usher_resource_oldest_waiting_age_seconds", "pipelines", "pl") == nil)
            #expect(!onB.contains { $0.name.hasPrefix("usher_resource_wait_seconds") && $0.labels["name"] != "local" })
            #expect(!onB.contains { $0.name == "usher_machine_transactions_total" })
            // B's own memory queue is there as before.
            #expect(Self.value(onB, "usher_queue_capacity", "queues", "local") == 2)
            #expect(Self.value(onB, "usher_resource_wait_seconds_count", "queues", "local") == 0)

            // A reports the same Redis-wide numbers (aggregate with max, not sum).
            let onA = try await Self.scrape(a).samples
            for name in ["usher_queue_waiting", "usher_queue_holding"] {
                #expect(Self.value(onA, name, "queues", "q") == Self.value(onB, name, "queues", "q"), "\(name)")
            }
            #expect(
                Self.value(onA, "usher_resource_events_total", "queues", "q", ["event": "enqueued"]) == 3)

            // A change through A shows on B's next scrape; a deletion takes the series away.
            #expect(try await a.call("POST", "/v1/queues/q/visitors/h/complete").status == 200)
            let after = try await Self.scrape(b).samples
            #expect(Self.value(after, "usher_queue_waiting", "queues", "q") == 1)
            #expect(Self.value(after, "usher_resource_events_total", "queues", "q", ["event": "completed"]) == 1)
            #expect(try await a.call("DELETE", "/v1/queues/q").status == 204)
            #expect(
                try await poll(5) {
                    Self.value(try await Self.scrape(b).samples, "usher_queue_waiting", "queues", "q") == nil
                })
            #expect(Self.value(try await Self.scrape(b).samples, "usher_redis_scrape_ok") == 1)
        }

        @Test func redisPausedOrGoneDoesNotHoldTheScrape() async throws {
            let redis = try await RedisServer()
            let s = try await BackendApp(.redis, #"{"queues": {"shared": {"capacity": 1}}}"#, redis: redis)
            #expect(try await s.call("PUT", "/v1/queues/local", #"{"capacity": 1, "backend": "memory"}"#).status == 201)
            #expect(try await s.call("POST", "/v1/queues/shared/visitors", "{}").status == 201)
            let before = try await Self.scrape(s).samples
            #expect(Self.value(before, "usher_queue_holding", "queues", "shared") == 1)
            #expect(Self.value(before, "usher_redis_scrape_ok") == 1)

            // Paused: each command would wait command_timeout_seconds (2 s); the
            // scrape waits metrics_timeout_seconds (0.25 s) and answers without them.
            redis.signal(SIGSTOP)
            let paused = try await Self.scrape(s)
            #expect(paused.status == 200)
            #expect(paused.seconds < 1.5, "\(paused.seconds)")
            #expect(Self.value(paused.samples, "usher_redis_scrape_ok") == 0)
            #expect(Self.value(paused.samples, "usher_queue_holding", "queues", "shared") == nil)
            #expect(Self.value(paused.samples, "usher_queue_holding", "queues", "local") == 0)
            #expect(Self.value(paused.samples, "usher_redis_resources", nil, nil, ["kind": "queues"]) == 1)
            #expect(Self.value(paused.samples, "usher_stored_bytes_limit") != nil)
            // The first sampling still waits for Redis: the next scrape does not start another.
            let again = try await Self.scrape(s)
            #expect(again.status == 200 && again.seconds < 1, "\(again.seconds)")
            #expect(Self.value(again.samples, "usher_redis_scrape_ok") == 0)
            #expect(Self.value(again.samples, "usher_queue_holding", "queues", "local") == 0)

            redis.signal(SIGCONT)
            #expect(
                try await poll(10) {
                    let samples = try await Self.scrape(s).samples
                    return Self.value(samples, "usher_redis_scrape_ok") == 1
                        && Self.value(samples, "usher_queue_holding", "queues", "shared") == 1
                })

            // Gone: the connections fail at once.
            redis.stop()
            let gone = try await Self.scrape(s)
            #expect(gone.status == 200)
            #expect(gone.seconds < 1.5, "\(gone.seconds)")
            #expect(Self.value(gone.samples, "usher_redis_scrape_ok") == 0)
            #expect(Self.value(gone.samples, "usher_queue_holding", "queues", "shared") == nil)
            #expect(Self.value(gone.samples, "usher_queue_holding", "queues", "local") == 0)
        }
    }
}
