import Foundation
import HTTPTestClient
import Testing

@testable import Locking

/// Issue 17, "Tests": three `usher` processes sharing one `redis-server`, a
/// pipeline with producers and consumers on all three for 20 s, consumers
/// missing acks at random (each missed item comes back at its ack
/// deadline): every pushed item is consumed exactly once, none is lost and
/// none is left (`PipelineHistoryChecker`). Prints what it measured (lines
/// starting `[shared-redis]`).
@Suite(.serialized, .enabled(if: FileManager.default.fileExists(atPath: CommandLineTests.binary.path)))
struct SharedPipelineDrillTests {
    static let pipeline = "work"
    /// Enough deliveries that nothing goes dead; a short ack limit so missed acks come back soon.
    static let body =
        #"{"backend": "redis", "capacity": 500, "max_in_flight": 1000, "ack_seconds": 1, "max_deliveries": 1000, "history": 100000, "dedup_seconds": 3600}"#

    /// The cluster with the pipeline created through process 0, once every process serves it.
    func start() async throws -> SharedRedisCluster {
        let cluster = try await SharedRedisCluster()
        let created = try cluster.ushers[0].call("PUT", "/v1/pipelines/\(Self.pipeline)", Self.body)
        #expect(created.status == 201, "\(created.text)")
        for usher in cluster.ushers {
            let seen = await poll(5) { (try? usher.call("GET", "/v1/pipelines/\(Self.pipeline)").status) == 200 }
            #expect(seen, "usher \(usher.index) does not see the pipeline")
        }
        return cluster
    }

    /// Checks the run's history against the pipeline's end state; the report.
    func verify(_ load: SharedPipelineLoad, _ cluster: SharedRedisCluster, label: String) throws
        -> PipelineHistoryChecker.Report
    {
        let state = try cluster.ushers[1].call("GET", "/v1/pipelines/\(Self.pipeline)?limit=0").json
        var left: [String: Int] = [:]
        for part in ["ready", "delayed", "in_flight", "dead"] { left[part] = state[part] as? Int ?? -1 }
        let counts = (state["counts"] as? [String: Any] ?? [:]).compactMapValues { $0 as? Int }
        let report = PipelineHistoryChecker().check(load.history(left: left, counts: counts))
        #expect(report.violations.isEmpty, "\(label): \(report.violations.prefix(10))")
        #expect(cluster.deaths().isEmpty, "\(cluster.deaths())")
        SharedQueueDrillTests.note("pipeline \(label): \(report.summary); \(load.failures) requests failed")
        return report
    }

    @Test func subscribersKilledOrRedisPausedLoseNothing() async throws {
        let cluster = try await start()
        defer { cluster.stop() }
        let seed = UInt64(Date().timeIntervalSince1970)
        let load = SharedPipelineLoad(cluster: cluster, pipeline: Self.pipeline)
        let started = Date()
        async let run: Void = load.run(producers: 6, consumers: 6, seconds: 12, seed: seed)
        // Subscribers killed twice (wake-ups fall back to the re-check), then Redis paused 5 s.
        for _ in 0..<2 {
            try await Task.sleep(for: .seconds(1.5))
            _ = try await cluster.redisCommand(["CLIENT", "KILL", "TYPE", "pubsub"])
        }
        try await Task.sleep(for: .seconds(1))
        cluster.redis.signal(SIGSTOP)
        try await Task.sleep(for: .seconds(5))
        cluster.redis.signal(SIGCONT)
        await run
        let report = try verify(load, cluster, label: "subscribers killed, Redis paused 5 s (seed \(seed))")
        #expect(report.acked > 100, "\(report.summary)")
        SharedQueueDrillTests.note(
            "pipeline drill: \(String(format: "%.1f", Date().timeIntervalSince(started))) s, "
                + "\(load.resolvedConsumes) consumes answered 503 found applied")
    }

    @Test func twentySecondsOnThreeProcesses() async throws {
        let cluster = try await start()
        defer { cluster.stop() }
        let environment = ProcessInfo.processInfo.environment
        let seconds = environment["USHER_SOAK_SECONDS"].flatMap(Double.init) ?? 20
        let seed = environment["USHER_SOAK_SEED"].flatMap(UInt64.init) ?? UInt64(Date().timeIntervalSince1970)
        SharedQueueDrillTests.note("pipeline: \(seconds) s run, seed \(seed)")
        let load = SharedPipelineLoad(cluster: cluster, pipeline: Self.pipeline)
        let started = Date()
        await load.run(producers: 6, consumers: 6, seconds: seconds, seed: seed)
        let elapsed = Date().timeIntervalSince(started)
        let report = try verify(load, cluster, label: "\(seconds) s run")
        // The run did what it is for.
        #expect(report.acked > Int(seconds * 20), "\(report.summary)")
        #expect(report.redelivered > 0 && report.staleAcks >= 0, "\(report.summary)")
        #expect(Set(load.consumedOn).count == 3, "consumes on \(Set(load.consumedOn))")
        SharedQueueDrillTests.note(
            "pipeline: \(report.summary); \(load.failures) requests failed; "
                + "\(String(format: "%.1f", Double(report.acked) / elapsed)) items/s over \(String(format: "%.1f", elapsed)) s"
        )
    }
}

/// Producers and consumers on every process of a `SharedRedisCluster`, on one
/// Redis-backed pipeline. Producers push ids of their own, retrying the same
/// id until it is answered (dedup makes a retry safe); consumers take with a
/// wait, and consume each item with its fence or, at random, never (a
/// consumer that died): the item comes back at its ack deadline. When the
/// producers stop, the consumers stop missing and drain the pipeline.
final class SharedPipelineLoad: Sendable {
    let ports: [UInt16]
    let pipeline: String
    private let pushed = Locked<Set<String>>([])
    private let deliveries = Locked<[PipelineHistory.Delivery]>([])
    private let acks = Locked<[PipelineHistory.Ack]>([])
    private let failed = Locked(0)
    private let resolved = Locked(0)
    private let consumers = Locked<[Int]>([])
    /// Set when the producers are done: consumers ack everything and stop once it is empty.
    private let draining = Locked(false)
    private let drained = Locked(false)

    init(cluster: SharedRedisCluster, pipeline: String) {
        ports = cluster.ushers.map(\.port)
        self.pipeline = pipeline
    }

    var failures: Int { failed.withLock { $0 } }
    /// Consumes whose answer was lost (503, no answer) that the item shows applied.
    var resolvedConsumes: Int { resolved.withLock { $0 } }
    /// The process of every acknowledged consume.
    var consumedOn: [Int] { consumers.withLock { $0 } }

    func history(left: [String: Int], counts: [String: Int]) -> PipelineHistory {
        PipelineHistory(
            pushed: pushed.withLock { $0 }, deliveries: deliveries.withLock { $0 }, acks: acks.withLock { $0 },
            left: left, counts: counts)
    }

    /// Producers for `seconds`, consumers until the pipeline is empty after them (at most 30 s more).
    func run(producers: Int, consumers: Int, seconds: Double, seed: UInt64) async {
        let end = Date().addingTimeInterval(seconds)
        async let produced: Void = onThreads(producers) { [self] i in
            produce(worker: i, until: end)
        }
        async let consumed: Void = onThreads(consumers) { [self] i in
            var random = SplitMix64(seed: seed &+ UInt64(i))
            consume(worker: i, random: &random)
        }
        await produced
        draining.withLock { $0 = true }
        let port = ports[0]
        let path = "/v1/pipelines/\(pipeline)?limit=0"
        let empty = await poll(30) {
            guard let state = try? TestHTTPClient(port: port, timeoutSeconds: 5).request("GET", path).json else {
                return false
            }
            return ["ready", "delayed", "in_flight"].allSatisfy { state[$0] as? Int == 0 }
        }
        if !empty { failed.withLock { $0 += 1 } }
        drained.withLock { $0 = true }
        await consumed
    }

    private func produce(worker: Int, until end: Date) {
        let port = ports[worker % ports.count]
        var n = 0
        while Date() < end {
            let id = "p\(worker)-\(n)"
            // The same id until it is answered: a lost answer's retry finds the item.
            while Date() < end.addingTimeInterval(10) {
                let status = (try? request(port, "POST", "/items", #"{"id": "\#(id)", "payload": {"n": \#(n)}}"#))?
                    .status
                if status == 201 || status == 200 {
                    pushed.withLock { _ = $0.insert(id) }
                    break
                }
                if status != 429 { failed.withLock { $0 += 1 } }
                Thread.sleep(forTimeInterval: 0.02)
            }
            n += 1
        }
    }

    private func consume(worker: Int, random: inout SplitMix64) {
        let process = worker % ports.count
        let port = ports[process]
        while !drained.withLock({ $0 }) {
            guard let taken = try? request(port, "POST", "/take?wait=0.5&max=5") else {
                failed.withLock { $0 += 1 }
                continue
            }
            guard taken.status == 200 else {
                if taken.status != 204 { failed.withLock { $0 += 1 } }
                continue
            }
            let items = taken.json["items"] as? [[String: Any]] ?? []
            for item in items {
                guard let id = item["id"] as? String, let fence = (item["fence"] as? NSNumber)?.int64Value else {
                    failed.withLock { $0 += 1 }
                    continue
                }
                deliveries.withLock { $0.append(.init(id: id, fence: fence, process: process)) }
                // A consumer that died with the item: it comes back at its ack deadline.
                if !draining.withLock({ $0 }), random.chance(0.1) { continue }
                let done = try? request(port, "POST", "/items/\(id)/consume", #"{"fence": \#(fence)}"#)
                var status = done?.status ?? 0
                if status != 200 && status != 409 {
                    // The answer was lost (Redis paused): the item says whether this consume happened.
                    failed.withLock { $0 += 1 }
                    status = consumed(id, fence: fence, port: port) ? 200 : status
                    if status == 200 { resolved.withLock { $0 += 1 } }
                }
                acks.withLock { $0.append(.init(id: id, fence: fence, status: status)) }
                if status == 200 { consumers.withLock { $0.append(process) } }
            }
        }
    }

    /// Whether `id` was consumed under `fence` (a finished item keeps its last
    /// hand-out's fence); asks until Redis answers (at most 20 s).
    private func consumed(_ id: String, fence: Int64, port: UInt16) -> Bool {
        let end = Date().addingTimeInterval(20)
        while Date() < end {
            if let item = try? request(port, "GET", "/items/\(id)"), item.status == 200 {
                return item.json["status"] as? String == "consumed"
                    && (item.json["fence"] as? NSNumber)?.int64Value == fence
            }
            Thread.sleep(forTimeInterval: 0.2)
        }
        return false
    }

    private func request(_ port: UInt16, _ method: String, _ suffix: String, _ body: String? = nil) throws
        -> TestHTTPClient.Response
    {
        try TestHTTPClient(port: port, timeoutSeconds: 10).request(
            method, "/v1/pipelines/\(pipeline)\(suffix)", body: body)
    }
}
