import Foundation
import HTTPTestClient
import Testing

@testable import HTTPServer
@testable import UsherAPI

/// `GET /metrics` (docs/metrics.md): the text format, HTTP counts by route
/// template, histogram consistency, resource gauges against the state routes.
@Suite struct MetricsTests {
    /// One parsed sample line.
    struct Sample {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    /// Parses the sample lines of an exposition (comments skipped).
    static func parse(_ text: String) -> [Sample] {
        text.split(separator: "\n").compactMap { line -> Sample? in
            guard !line.hasPrefix("#"), let space = line.lastIndex(of: " "),
                let value = Double(line[line.index(after: space)...])
                    ?? (line.hasSuffix("+Inf") ? Double.infinity : nil)
            else { return nil }
            let head = line[..<space]
            guard let brace = head.firstIndex(of: "{") else {
                return Sample(name: String(head), labels: [:], value: value)
            }
            var labels: [String: String] = [:]
            var key = ""
            var val = ""
            var inValue = false
            var escaped = false
            for c in head[head.index(after: brace)...].dropLast() {
                if inValue {
                    if escaped {
                        val.append(c == "n" ? "\n" : c)
                        escaped = false
                    } else if c == "\\" {
                        escaped = true
                    } else if c == "\"" {
                        labels[key] = val
                        key = ""
                        val = ""
                        inValue = false
                    } else {
                        val.append(c)
                    }
                } else if c == "\"" {
                    inValue = true
                } else if c != "=" && c != "," {
                    key.append(c)
                }
            }
            return Sample(name: String(head[..<brace]), labels: labels, value: value)
        }
    }

    static let config = """
        {"queues": {"printer": {"capacity": 1}}, "windows": {"alerts": {}},
         "pools": {"gpus": {"elements": ["g0", "g1"]}}, "pipelines": {"gifts": {}},
         "machines": {"player": {"definition": "player"}}}
        """

    @Test func writerEscapesAndFormats() {
        var out = PrometheusText()
        out.family("x_total", "counter", "a \\ b\nc")
        out.sample("x_total", ["name": "a\"b\\c\nd"], 3)
        out.histogram("h", [("k", "v")], bounds: [0.5, 1], counts: [1, 0, 2], sum: 2.75)
        #expect(
            out.text == """
                # HELP x_total a \\\\ b\\nc
                # TYPE x_total counter
                x_total{name="a\\"b\\\\c\\nd"} 3
                h_bucket{k="v",le="0.5"} 1
                h_bucket{k="v",le="1"} 1
                h_bucket{k="v",le="+Inf"} 3
                h_sum{k="v"} 2.75
                h_count{k="v"} 3

                """)
        #expect(Self.parse(out.text).first?.labels["name"] == "a\"b\\c\nd")
    }

    /// Integers below 2^53 (exact in a Double) print whole, a Redis
    /// machine's µs-based version (~1.8e15) included.
    @Test func integersBelowTwoToThe53PrintWhole() {
        #expect(PrometheusText.format(1_796_142_459_963_773) == "1796142459963773")
        #expect(PrometheusText.format(1e15) == "1000000000000000")
        #expect(PrometheusText.format(9_007_199_254_740_991) == "9007199254740991")
        #expect(PrometheusText.format(-9_007_199_254_740_991) == "-9007199254740991")
        // From 2^53 on (and for fractions), the Double's own text, as before.
        #expect(PrometheusText.format(0x1p53) == "9007199254740992.0")
        #expect(PrometheusText.format(1e300) == "1e+300")
        #expect(PrometheusText.format(1_796_142_459_963_773.5) == "1796142459963773.5")
        #expect(PrometheusText.format(-0.0) == "0")
        #expect(PrometheusText.format(0.25) == "0.25")
        var out = PrometheusText()
        out.sample("usher_machine_version", ["name": "m"], 1_796_142_459_963_773)
        #expect(out.text == "usher_machine_version{name=\"m\"} 1796142459963773\n")
    }

    @Test func routeSlotsAndOtherSeriesAreCountedApart() {
        let metrics = HTTPMetrics(routes: [("GET", "/a/{x}"), ("POST", "/a/{x}")])
        metrics.record(slot: 0, route: "/a/{x}", method: "GET", status: 200, seconds: 0.001)
        metrics.record(slot: 0, route: "/a/{x}", method: "GET", status: 404, seconds: 0.2)
        metrics.record(slot: 0, route: "/a/{x}", method: "GET", status: 200, seconds: 0.001)
        // HEAD answered by the GET route: its own series, not the slot's.
        metrics.record(slot: 0, route: "/a/{x}", method: "HEAD", status: 200, seconds: 0.001)
        metrics.record(slot: 1, route: "/a/{x}", method: "POST", status: 201, seconds: 0.001)
        metrics.record(route: "unmatched", method: "BREW", status: 404, seconds: 0.001)
        var out = PrometheusText()
        metrics.write(to: &out)
        let samples = Self.parse(out.text)
        func total(_ method: String, _ status: String, route: String = "/a/{x}") -> Double? {
            samples.first {
                $0.name == "usher_http_requests_total" && $0.labels["route"] == route
                    && $0.labels["method"] == method && $0.labels["status"] == status
            }?.value
        }
        #expect(total("GET", "200") == 2)
        #expect(total("GET", "404") == 1)
        #expect(total("HEAD", "200") == 1)
        #expect(total("POST", "201") == 1)
        #expect(total("other", "404", route: "unmatched") == 1)
        let count = samples.first {
            $0.name == "usher_http_request_duration_seconds_count" && $0.labels["method"] == "GET"
        }
        #expect(count?.value == 3)
        // Routes never requested have no series.
        #expect(!samples.contains { $0.labels["method"] == "POST" && $0.labels["status"] == "200" })
    }

    @Test func streamsAreCountedWhenTheyOpen() {
        let metrics = HTTPMetrics()
        let stream = HTTPStream(status: 200)
        guard
            case .stream = metrics.measure(
                .stream(stream), route: "/v1/events", method: "GET", since: HTTPMetrics.now())
        else {
            Issue.record("not a stream")
            return
        }
        stream.finish()
        var out = PrometheusText()
        metrics.write(to: &out)
        let samples = Self.parse(out.text)
        #expect(
            samples.first { $0.name == "usher_http_requests_total" && $0.labels["route"] == "/v1/events" }?.value == 1)
        #expect(
            samples.first {
                $0.name == "usher_http_request_duration_seconds_count" && $0.labels["route"] == "/v1/events"
            }?.value == 1)
    }

    @Test func httpCountsByTemplateAndHistogramConsistency() throws {
        let s = try LiveServer(Self.config)
        let c = s.client()
        #expect(try c.request("POST", "/v1/queues/printer/visitors", body: #"{"id": "a"}"#).status == 201)
        #expect(try c.request("POST", "/v1/queues/printer/visitors", body: #"{"id": "b"}"#).status == 201)
        #expect(try c.request("GET", "/v1/queues/printer/visitors/b?wait=0.05").status == 200)
        #expect(try c.request("GET", "/v1/queues/printer").status == 200)
        #expect(try c.request("GET", "/v1/queues/nosuch").status == 404)
        #expect(try c.request("GET", "/no/such/path/123").status == 404)
        #expect(try c.request("BREW", "/healthz").status == 405)

        let response = try c.request("GET", "/metrics")
        #expect(response.status == 200)
        #expect(response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8")
        let samples = Self.parse(response.text)
        func total(_ route: String, _ method: String, _ status: String) -> Double? {
            samples.first {
                $0.name == "usher_http_requests_total"
                    && $0.labels == ["route": route, "method": method, "status": status]
            }?.value
        }
        #expect(total("/v1/queues/{name}/visitors", "POST", "201") == 2)
        #expect(total("/v1/queues/{name}/visitors/{id}", "GET", "200") == 1)
        #expect(total("/v1/queues/{name}", "GET", "200") == 1)
        #expect(total("/v1/queues/{name}", "GET", "404") == 1)
        #expect(total("unmatched", "GET", "404") == 1)
        #expect(total("unmatched", "other", "405") == 1)
        // Never a raw path.
        let routes = Set(samples.compactMap { $0.labels["route"] })
        #expect(!routes.contains { $0.contains("printer") || $0.contains("nosuch") || $0.contains("/no/") })

        // Histograms: per (route, method), buckets cumulative, +Inf == _count == the requests counted.
        for key in Set(samples.filter { $0.name == "usher_http_request_duration_seconds_count" }.map { $0.labels }) {
            let buckets = samples.filter {
                $0.name == "usher_http_request_duration_seconds_bucket" && $0.labels.filter { $0.key != "le" } == key
            }
            #expect(zip(buckets, buckets.dropFirst()).allSatisfy { $0.value <= $1.value })
            #expect(buckets.last?.labels["le"] == "+Inf")
            let count = samples.first { $0.name == "usher_http_request_duration_seconds_count" && $0.labels == key }?
                .value
            let requests = samples.filter {
                $0.name == "usher_http_requests_total" && $0.labels.filter { $0.key != "status" } == key
            }
            .reduce(0) { $0 + $1.value }
            #expect(buckets.last?.value == count && count == requests, "\(key)")
        }
        // The scrape itself is counted after it is answered: the next one sees it.
        let again = Self.parse(try c.request("GET", "/metrics").text)
        #expect(again.first { $0.name == "usher_http_requests_total" && $0.labels["route"] == "/metrics" }?.value == 1)
    }

    @Test func resourceGaugesMatchTheStateRoutes() throws {
        let s = try LiveServer(Self.config)
        let c = s.client()
        for id in ["a", "b", "c"] {
            _ = try c.request("POST", "/v1/queues/printer/visitors", body: #"{"id": "\#(id)"}"#)
        }
        _ = try c.request("POST", "/v1/queues/printer/visitors/a/complete", body: "{}")
        _ = try c.request("POST", "/v1/windows/alerts/show", body: #"{"id": "x"}"#)
        _ = try c.request("POST", "/v1/windows/alerts/show", body: #"{"id": "y"}"#)
        _ = try c.request("POST", "/v1/pools/gpus/fetch", body: "{}")
        _ = try c.request("POST", "/v1/pipelines/gifts/items", body: #"{"id": "t1", "payload": 1}"#)
        _ = try c.request("POST", "/v1/pipelines/gifts/items", body: #"{"id": "t2", "payload": 2}"#)
        _ = try c.request("POST", "/v1/pipelines/gifts/take", body: "{}")

        let samples = Self.parse(try c.request("GET", "/metrics").text)
        func value(_ name: String, _ kind: String, _ resource: String, _ extra: [String: String] = [:]) -> Double? {
            samples.first { $0.name == name && $0.labels == ["kind": kind, "name": resource].merging(extra) { $1 } }?
                .value
        }
        let queue = try c.request("GET", "/v1/queues/printer").json["counts"] as? [String: Int] ?? [:]
        #expect(queue["waiting"] == 1 && queue["holding"] == 1)
        for (field, n) in queue {
            if field.hasSuffix("_total") {
                #expect(
                    value("usher_resource_events_total", "queues", "printer", ["event": String(field.dropLast(6))])
                        == Double(n), "\(field)")
            } else {
                #expect(value("usher_queue_\(field)", "queues", "printer") == Double(n), "\(field)")
            }
        }
        // Two grants (a at once, b after a completed): two waits observed.
        #expect(value("usher_resource_wait_seconds_count", "queues", "printer") == 2)
        #expect((value("usher_resource_oldest_waiting_age_seconds", "queues", "printer") ?? -1) >= 0)

        let window = try c.request("GET", "/v1/windows/alerts").json["counts"] as? [String: Int] ?? [:]
        #expect(value("usher_window_showing", "windows", "alerts") == Double(window["showing"] ?? -1))
        #expect(value("usher_window_queued", "windows", "alerts") == 1)
        #expect(value("usher_resource_events_total", "windows", "alerts", ["event": "received"]) == 2)

        let pool = try c.request("GET", "/v1/pools/gpus")
        #expect(value("usher_pool_size", "pools", "gpus") == Double(pool.json["size"] as? Int ?? -1))
        for field in ["available", "leased", "waiting"] {
            #expect(
                value("usher_pool_\(field)", "pools", "gpus") == Double(pool.counts[field] as? Int ?? -1), "\(field)")
        }
        #expect(value("usher_pool_leased", "pools", "gpus") == 1)

        let pipeline = try c.request("GET", "/v1/pipelines/gifts").counts
        for field in ["ready", "in_flight", "delayed", "dead"] {
            #expect(
                value("usher_pipeline_\(field)", "pipelines", "gifts") == Double(pipeline[field] as? Int ?? -1),
                "\(field)")
        }
        #expect(value("usher_resource_events_total", "pipelines", "gifts", ["event": "delivered"]) == 1)
        #expect(value("usher_resource_wait_seconds_count", "pipelines", "gifts") == 1)

        let machine = try c.request("GET", "/v1/machines/player").json
        let state = try #require(machine["state"] as? String)
        #expect(value("usher_machine_state", "machines", "player", ["state": state]) == 1)
        #expect(value("usher_machine_version", "machines", "player") == Double(machine["version"] as? Int ?? -1))
        #expect(samples.first { $0.name == "usher_resources" && $0.labels == ["kind": "queues"] }?.value == 1)
    }

    /// A parked push is a waiting producer, not a waiting consumer, and the
    /// help texts say so.
    @Test func parkedPushCountsAsAWaitingProducerOnly() throws {
        let s = try AppTester(#"{"pipelines": {"p": {"capacity": 1}}}"#)
        #expect(try s.call("POST", "/v1/pipelines/p/items", #"{"payload": 1}"#).status == 201)
        let push = s.inBackground { try s.call("POST", "/v1/pipelines/p/items?wait=10", #"{"payload": 2}"#) }
        s.untilParked(1)
        // The connection parks before the push's task reaches the pipeline: scrape until it has.
        var text = ""
        var samples: [Sample] = []
        func value(_ name: String) -> Double? {
            samples.first { $0.name == name && $0.labels == ["kind": "pipelines", "name": "p"] }?.value
        }
        let deadline = Date().addingTimeInterval(5)
        repeat {
            text = try s.call("GET", "/metrics").text
            samples = Self.parse(text)
        } while value("usher_pipeline_waiting_producers") != 1 && Date() < deadline
        #expect(value("usher_pipeline_waiting_consumers") == 0)
        #expect(value("usher_pipeline_waiting_producers") == 1)
        let help = text.split(separator: "\n").first { $0.hasPrefix("# HELP usher_pipeline_waiting_consumers ") }
        #expect(help?.contains("take") == true)
        #expect(help?.contains("push") == false)
        #expect(try s.call("DELETE", "/v1/pipelines/p").status == 204)
        #expect(push()?.status == 410)
    }

    /// `promtool check metrics` accepts a scrape (skipped without promtool;
    /// `scripts/metrics-check` installs it and runs the same check in CI).
    @Test func promtoolAcceptsTheOutput() throws {
        guard
            let promtool = ["/usr/bin/promtool", "/usr/local/bin/promtool"].first(
                where: FileManager.default.isExecutableFile)
        else { return }
        let s = try LiveServer(Self.config)
        let c = s.client()
        _ = try c.request("POST", "/v1/queues/printer/visitors", body: #"{"id": "a"}"#)
        _ = try c.request("GET", "/no/such")
        let text = try c.request("GET", "/metrics").body
        let process = Process()
        process.executableURL = URL(fileURLWithPath: promtool)
        process.arguments = ["check", "metrics"]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = output
        try process.run()
        input.fileHandleForWriting.write(text)
        try input.fileHandleForWriting.close()
        let complaints = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0 && complaints.isEmpty, "\(complaints)")
    }
}
