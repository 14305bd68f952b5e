import Foundation
import HTTPServer
import UsherCore

/// `GET /metrics`: the Prometheus text exposition (see docs/metrics.md).
enum MetricsRoute {
    static func response(_ app: UsherApp) -> HTTPResponse {
        var out = PrometheusText()
        app.httpMetrics.write(to: &out)
        var samples: [ResourceSample] = []
        for kind in ResourceKind.allCases {
            for resource in app.registry.list(kind) {
                if let sampled = resource as? any MetricsSampled, let s = sampled.metricsSample() { samples.append(s) }
            }
        }
        ResourceMetrics.write(samples, counts: app.registry.counts(), now: app.clock.now(), to: &out)
        writeStorage(app.storage, to: &out)
        writeRedis(app, to: &out)
        writeProcess(to: &out)
        return HTTPResponse(status: 200, contentType: PrometheusText.contentType, text: out.text)
    }

    /// `usher_stored_bytes` and `usher_stored_bytes_limit`: the storage budget.
    static func writeStorage(_ budget: StorageBudget, to out: inout PrometheusText) {
        out.family("usher_stored_bytes", "gauge", "Bytes clients store now, as max_stored_bytes counts them.")
        out.sample("usher_stored_bytes", [:], Double(budget.usedBytes))
        out.family("usher_stored_bytes_limit", "gauge", "max_stored_bytes.")
        out.sample("usher_stored_bytes_limit", [:], Double(budget.limit))
    }

    /// With a `redis` block: whether notices reach this instance, how many
    /// came, and how many Redis-backed resources it knows. No round trip:
    /// a scrape answers while Redis is down.
    static func writeRedis(_ app: UsherApp, to out: inout PrometheusText) {
        guard let redis = app.redis else { return }
        out.family("usher_redis_up", "gauge", "1 while the Redis subscriber connection is up and subscribed.")
        out.sample("usher_redis_up", [:], redis.isSubscribed ? 1 : 0)
        out.family("usher_redis_notices_total", "counter", "Notices heard from Redis, from every instance.")
        out.sample("usher_redis_notices_total", [:], Double(redis.noticesHeard))
        out.family("usher_redis_resources", "gauge", "Redis-backed resources this instance knows, by kind.")
        for kind in ResourceKind.allCases {
            let shared = app.registry.list(kind).count { $0 is any SharedResource }
            out.sample("usher_redis_resources", ["kind": kind.rawValue], Double(shared))
        }
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
