import Foundation
import HTTPServer
import UsherCore

/// `GET /metrics`: the Prometheus text exposition (see docs/metrics.md).
enum MetricsRoute {
    /// With Redis-backed resources the answer waits for their counts, at
    /// most `redis.metrics_timeout_seconds`; without, it is made at once.
    static func handle(_ app: UsherApp) -> HTTPHandlerResult {
        let memory = memorySamples(app)
        guard let scrape = app.redisScrape else { return .respond(response(app, memory: memory, redis: nil)) }
        if app.isStopping {
            return .respond(response(app, memory: memory, redis: RedisScrape.Outcome(complete: false)))
        }
        let shared = ResourceKind.allCases.flatMap {
            app.registry.list($0).compactMap { $0 as? any RedisMetricsSampled }
        }
        guard !shared.isEmpty else { return .respond(response(app, memory: memory, redis: RedisScrape.Outcome())) }
        return .deferred { response(app, memory: memory, redis: await scrape.sample(shared)) }
    }

    /// The memory-backed resources' samples, each read under its isolation.
    static func memorySamples(_ app: UsherApp) -> [ResourceSample] {
        var samples: [ResourceSample] = []
        for kind in ResourceKind.allCases {
            for resource in app.registry.list(kind) {
                if let sampled = resource as? any MetricsSampled, let s = sampled.metricsSample() { samples.append(s) }
            }
        }
        return samples
    }

    /// The exposition; `redis` is what the Redis-backed resources gave (nil without a `redis` block).
    static func response(_ app: UsherApp, memory: [ResourceSample], redis: RedisScrape.Outcome?) -> HTTPResponse {
        var out = PrometheusText()
        app.httpMetrics.write(to: &out)
        ResourceMetrics.write(
            memory + (redis?.samples ?? []), counts: app.registry.counts(), now: app.clock.now(), to: &out)
        writeStorage(app.storage, to: &out)
        writeRedis(app, scrape: redis, to: &out)
        writeProcess(to: &out)
        return HTTPResponse(
            status: 200, contentType: PrometheusText.contentType, text: out.text, headers: Reply.unstored)
    }

    /// `usher_stored_bytes` and `usher_stored_bytes_limit`: the storage budget.
    static func writeStorage(_ budget: StorageBudget, to out: inout PrometheusText) {
        out.family("usher_stored_bytes", "gauge", "Bytes clients store now, as max_stored_bytes counts them.")
        out.sample("usher_stored_bytes", [:], Double(budget.usedBytes))
        out.family("usher_stored_bytes_limit", "gauge", "max_stored_bytes.")
        out.sample("usher_stored_bytes_limit", [:], Double(budget.limit))
    }

    /// With a `redis` block: whether notices reach this instance, how many
    /// came, how many Redis-backed resources it knows (no round trip), and
    /// whether their counts came in time.
    static func writeRedis(_ app: UsherApp, scrape: RedisScrape.Outcome?, to out: inout PrometheusText) {
        guard let redis = app.redis, let scrape else { return }
        out.family("usher_redis_up", "gauge", "1 while the Redis subscriber connection is up and subscribed.")
        out.sample("usher_redis_up", [:], redis.isSubscribed ? 1 : 0)
        out.family("usher_redis_notices_total", "counter", "Notices heard from Redis, from every instance.")
        out.sample("usher_redis_notices_total", [:], Double(redis.noticesHeard))
        out.family("usher_redis_resources", "gauge", "Redis-backed resources this instance knows, by kind.")
        for kind in ResourceKind.allCases {
            let shared = app.registry.sharedCount(kind)
            out.sample("usher_redis_resources", ["kind": kind.rawValue], Double(shared))
        }
        out.family(
            "usher_redis_scrape_ok", "gauge",
            "1 when every Redis-backed resource's counts came within redis.metrics_timeout_seconds, else 0.")
        out.sample("usher_redis_scrape_ok", [:], scrape.complete ? 1 : 0)
        out.family(
            "usher_redis_scrape_duration_seconds", "gauge",
            "How long this scrape waited for the Redis-backed resources' counts.")
        out.sample("usher_redis_scrape_duration_seconds", [:], scrape.seconds)
    }

    /// `process_resident_memory_bytes` (from /proc/self/status) and
    /// `process_open_fds` where /proc exists.
    static func writeProcess(to out: inout PrometheusText) {
        if let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kb = Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        {
            out.family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.")
            out.sample("process_resident_memory_bytes", [:], kb * 1024)
        }
        if let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            out.family("process_open_fds", "gauge", "Number of open file descriptors.")
            out.sample("process_open_fds", [:], Double(fds.count))
        }
    }
}
