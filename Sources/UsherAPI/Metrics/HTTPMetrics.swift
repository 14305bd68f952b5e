import Foundation
import HTTPServer
import Locking
import Synchronization

/// Request counts and latency by route template, method and status.
///
/// One mutex around fixed slots, one per route (its template and method known
/// when the app is built): a routed request costs one lock and an in-place
/// bucket increment, with no hashing. Requests that match no route, and HEAD
/// on a GET route, go to a small dictionary keyed by (route, method); its key
/// space is bounded too (the templates, "unmatched", a fixed set of methods).
final class HTTPMetrics: Sendable {
    /// Bucket upper bounds in seconds (long polls wait up to minutes).
    static let bounds: [Double] = [
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
    ]

    struct Key: Hashable {
        var route: String
        var method: String
    }

    struct Stats {
        /// Per-bucket (not cumulative) counts; the last is above every bound.
        var buckets = [Int](repeating: 0, count: HTTPMetrics.bounds.count + 1)
        var sum = 0.0
        /// Requests by status code, in the order first seen (a route answers
        /// a handful of statuses: a list beats hashing).
        var statuses: [(status: Int, count: Int)] = []

        var isEmpty: Bool { statuses.isEmpty }

        mutating func observe(status: Int, seconds: Double) {
            var i = 0
            while i < HTTPMetrics.bounds.count, seconds > HTTPMetrics.bounds[i] { i += 1 }
            buckets[i] += 1
            sum += seconds
            add(status: status, count: 1)
        }

        mutating func merge(_ other: Stats) {
            for i in buckets.indices { buckets[i] += other.buckets[i] }
            sum += other.sum
            for (status, count) in other.statuses { add(status: status, count: count) }
        }

        private mutating func add(status: Int, count: Int) {
            if let j = statuses.firstIndex(where: { $0.status == status }) {
                statuses[j].count += count
            } else {
                statuses.append((status, count))
            }
        }
    }

    private struct State {
        /// `slots[i]`: route `i` of the router, with its own method.
        var slots: [Stats]
        var others: [Key: Stats] = [:]
    }

    /// The (template, method label) of each slot.
    private let slotKeys: [Key]
    private let state: Locked<State>
    /// Requests handed to the app and not yet answered (parked long-polls too).
    private let inFlight = Atomic<Int>(0)

    /// Slots for `routes`, in router order (`Route.slot` indexes them).
    init(routes: [(method: String, template: String)] = []) {
        slotKeys = routes.map { Key(route: $0.template, method: Self.methodLabel($0.method)) }
        state = Locked(State(slots: [Stats](repeating: Stats(), count: routes.count)))
    }

    /// The label for the method: one of a fixed set, so an odd method cannot
    /// create new series.
    static func methodLabel(_ method: String) -> String {
        switch method {
        case "GET": "GET"
        case "HEAD": "HEAD"
        case "POST": "POST"
        case "PUT": "PUT"
        case "PATCH": "PATCH"
        case "DELETE": "DELETE"
        case "OPTIONS": "OPTIONS"
        default: "other"
        }
    }

    /// Records one answered request. `slot` is the matched route's slot, if
    /// any; it is used when the method is the route's own.
    func record(slot: Int? = nil, route: String, method: String, status: Int, seconds: Double) {
        if let slot, slotKeys.indices.contains(slot), slotKeys[slot].method == method {
            state.withLock { $0.slots[slot].observe(status: status, seconds: seconds) }
            return
        }
        let key = Key(route: route, method: Self.methodLabel(method))
        state.withLock { $0.others[key, default: Stats()].observe(status: status, seconds: seconds) }
    }

    /// Wraps a handler result so that it is recorded when its answer is ready
    /// (at once for a ready answer and a stream, when the work ends for one that comes later).
    func measure(
        _ result: HTTPHandlerResult, slot: Int? = nil, route: String, method: String, since start: UInt64
    ) -> HTTPHandlerResult {
        if let response = result.immediate {
            record(
                slot: slot, route: route, method: method, status: response.status, seconds: Self.seconds(since: start))
            return result
        }
        if case .stream(let stream) = result {
            // A stream (e.g. Server-Sent Events) is counted when it opens; its
            // duration is the time to open it, not how long it stays open.
            record(slot: slot, route: route, method: method, status: stream.status, seconds: Self.seconds(since: start))
            return result
        }
        guard result.isDeferred else { return result }
        inFlight.add(1, ordering: .relaxed)
        return result.observingDeferred { [self] response in
            inFlight.subtract(1, ordering: .relaxed)
            record(
                slot: slot, route: route, method: method, status: response.status, seconds: Self.seconds(since: start))
        }
    }

    /// Monotonic nanoseconds: a request's start for `seconds(since:)`
    /// (`clock_gettime` straight: `ContinuousClock.now` costs a generic
    /// metadata lookup per call).
    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    static func seconds(since start: UInt64) -> Double {
        Double(now() &- start) / 1e9
    }

    /// A copy of every series, for a scrape.
    func snapshot() -> [(key: Key, stats: Stats)] {
        var (series, slots) = state.withLock { s in (s.others, s.slots) }
        for (key, stats) in zip(slotKeys, slots) where !stats.isEmpty {
            series[key, default: Stats()].merge(stats)
        }
        return series.map { ($0.key, $0.value) }
            .sorted { ($0.key.route, $0.key.method) < ($1.key.route, $1.key.method) }
    }

    /// Writes `usher_http_requests_total` and `usher_http_request_duration_seconds`.
    func write(to out: inout PrometheusText) {
        let series = snapshot()
        out.family(
            "usher_http_requests_in_flight", "gauge", "Deferred requests (long-polls and waits) not yet answered.")
        out.sample("usher_http_requests_in_flight", [:], Double(inFlight.load(ordering: .relaxed)))
        out.family(
            "usher_http_requests_total", "counter",
            "HTTP requests answered, by route template (\"unmatched\" when no route matched), method and status.")
        for (key, stats) in series {
            for (status, count) in stats.statuses.sorted(by: { $0.status < $1.status }) {
                out.sample(
                    "usher_http_requests_total",
                    [("route", key.route), ("method", key.method), ("status", String(status))], Double(count))
            }
        }
        out.family(
            "usher_http_request_duration_seconds", "histogram",
            "Time from the handler call to the response being ready (deferred answers: when the deferred work ends).")
        for (key, stats) in series {
            out.histogram(
                "usher_http_request_duration_seconds", [("route", key.route), ("method", key.method)],
                bounds: Self.bounds, counts: stats.buckets, sum: stats.sum)
        }
    }
}
