import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import Locking

/// Issue 17, "Tests": three `usher` processes sharing one `redis-server`, a
/// pipeline with producers and consumers on all three for 20 s, consumers
/// missing acks at random (each missed item comes back at its ack
/// deadline): every pushed item is consumed exactly once, none is lost and
/// none is left (`PipelineHistoryChecker`). Prints what it measured (lines
/// starting `[shared-redis]`).
@Suite(.serialized, .enabled(if: FileManager.default.fileExists(atPath: usherBinary.path)))
struct SharedPipelineDrillTests {
    static let pipeline = "work"
    /// Enough deliveries that nothing goes dead; a short ack limit so missed acks come back soon.
    static let body =
        #"{"backend": "redis", "capacity": 500, "max_in_flight": 1000, "ack_seconds": 1, "max_deliveries": 1000, "history": 100000, "dedup_seconds": 3600}"#

    /// The cluster (`extra` in every process's config) with the pipeline
    /// created through process 0, once every process serves it.
    func start(extra: [String: Any] = [:]) async throws -> SharedRedisCluster {
        let cluster = try await SharedRedisCluster(extra: extra)
        let created = try cluster.ushers[0].call("PUT", "/v1/pipelines/\(Self.pipeline)", Self.body)
        #expect(created.status == 201, "\(created.text)")
        for usher in cluster.ushers {
            let seen = await poll(5) { (try? usher.call("GET", "/v1/pipelines/\(Self.pipeline)").status) == 200 }
            #expect(seen, "usher \(usher.index) does not see the pipeline")
        }
        return cluster
    }

    /// Checks the run's history against the pipeline's end state; the
    /// report. What was answered before `lostBefore` (Redis lost it) is left out.
    func verify(_ load: SharedPipelineLoad, _ cluster: SharedRedisCluster, lostBefore: Double = 0, label: String)
        throws -> PipelineHistoryChecker.Report
    {
        let state = try cluster.ushers[1].call("GET", "/v1/pipelines/\(Self.pipeline)?limit=0").json
        let counts = (state["counts"] as? [String: Any] ?? [:]).compactMapValues { $0 as? Int }
        var left: [String: Int] = [:]
        for part in ["ready", "delayed", "in_flight", "dead"] { left[part] = counts[part] ?? -1 }
        let report = PipelineHistoryChecker().check(load.history(left: left, counts: counts, lostBefore: lostBefore))
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

    /// Redis restarted empty under the load: the items pushed before are
    /// lost with the pipeline made by `PUT`, which answers 404 on every
    /// process until a `PUT` makes it anew; a pipeline the config declares
    /// comes back by itself. Every item pushed after the restart is consumed
    /// exactly once, none is left, and no lost item comes back.
    @Test func redisRestartedEmpty() async throws {
        let declared = "declared"
        let cluster = try await start(extra: ["pipelines": [declared: ["backend": "redis"]]])
        defer { cluster.stop() }
        let path = "/v1/pipelines/\(Self.pipeline)"
        let seed = UInt64(Date().timeIntervalSince1970)
        let load = SharedPipelineLoad(cluster: cluster, pipeline: Self.pipeline)
        let started = Date()
        async let run: Void = load.run(producers: 6, consumers: 6, seconds: 7, seed: seed)
        let (killed, restarted) = try await cluster.restartRedisEmpty(
            shared: path, declared: "/v1/pipelines/\(declared)", what: "pipeline")
        // The declared pipeline works across processes: pushed on one, taken on another.
        let pushed = try await onThread {
            try cluster.ushers[0].call("POST", "/v1/pipelines/\(declared)/items", #"{"id": "after", "payload": {}}"#)
        }
        #expect(pushed.status == 201, "\(pushed.text)")
        let taken = try await onThread { try cluster.ushers[2].call("POST", "/v1/pipelines/\(declared)/take?wait=1") }
        let takenIDs = (taken.json["items"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
        #expect(takenIDs == ["after"], "\(taken.text)")
        let recreate = try await onThread { try cluster.ushers[1].call("PUT", path, Self.body) }
        #expect(recreate.status == 201, "\(recreate.text)")
        let serving = await cluster.recovery(path, since: Date(), timeout: 5)
        SharedQueueDrillTests.note(
            "pipeline restart: Redis down \(String(format: "%.2f", restarted.timeIntervalSince(killed))) s; "
                + "after the PUT, serving in \(secondsList(serving))")
        #expect(serving.allSatisfy { $0 != nil }, "\(serving)")
        await run
        let lostBefore = restarted.timeIntervalSince1970
        let report = try verify(load, cluster, lostBefore: lostBefore, label: "restart (seed \(seed))")
        #expect(report.acked > 100, "too few after the restart: \(report.summary)")
        // What was pushed before and not yet consumed is gone, on every process.
        let lost = load.unconsumed(pushedBefore: lostBefore)
        for (i, id) in lost.prefix(30).enumerated() {
            let item = try await onThread { try cluster.ushers[i % 3].call("GET", "\(path)/items/\(id)") }
            #expect(item.status == 404, "\(id) pushed before the restart: \(item.text)")
        }
        SharedQueueDrillTests.note(
            "pipeline restart drill: \(load.pushedCount(before: lostBefore)) items pushed before the restart, "
                + "\(lost.count) of them not yet consumed and lost; "
                + "\(String(format: "%.1f", Date().timeIntervalSince(started))) s")
    }

    /// The restart drill's cut can fail: what was answered before the loss
    /// is left out, but an item pushed after it must be consumed, and a lost
    /// item handed out or consumed after it is caught.
    @Test func theCutAtTheLossKeepsItsChecks() {
        let old = PipelineHistory.Delivery(id: "old", fence: 1, process: 0)
        let new = PipelineHistory.Delivery(id: "new", fence: 5, process: 1)
        func check(
            _ deliveries: [(at: Double, delivery: PipelineHistory.Delivery)],
            acks: [(at: Double, ack: PipelineHistory.Ack)]
        )
            -> [String]
        {
            let history = SharedPipelineLoad.history(
                pushed: ["old": 1, "new": 20], deliveries: deliveries, acks: acks, left: [:], counts: [:],
                lostBefore: 10)
            return PipelineHistoryChecker().check(history).violations
        }
        let newAck = (at: 22.0, ack: PipelineHistory.Ack(id: "new", fence: 5, status: 200))
        #expect(check([(2, old), (21, new)], acks: [newAck]).isEmpty)
        #expect(!check([(2, old), (21, new)], acks: []).isEmpty, "an item pushed after the loss never consumed")
        let resurrected = PipelineHistory.Delivery(id: "old", fence: 6, process: 2)
        #expect(!check([(2, old), (21, new), (23, resurrected)], acks: [newAck]).isEmpty, "a lost item handed out")
        let lateAck = (at: 24.0, ack: PipelineHistory.Ack(id: "old", fence: 1, status: 200))
        #expect(!check([(2, old), (21, new)], acks: [newAck, lateAck]).isEmpty, "a lost item consumed")
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
    /// Each id pushed, when its push was answered (seconds since the epoch).
    private let pushed = Locked<[String: Double]>([:])
    /// Each hand-out and consume, when it was answered.
    private let deliveries = Locked<[(at: Double, delivery: PipelineHistory.Delivery)]>([])
    private let acks = Locked<[(at: Double, ack: PipelineHistory.Ack)]>([])
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

    func history(left: [String: Int], counts: [String: Int], lostBefore: Double = 0) -> PipelineHistory {
        Self.history(
            pushed: pushed.withLock { $0 }, deliveries: deliveries.withLock { $0 }, acks: acks.withLock { $0 },
            left: left, counts: counts, lostBefore: lostBefore)
    }

    /// The history of what was answered at or after `lostBefore` (seconds
    /// since the epoch): a lost item handed out or consumed later is then
    /// one never pushed.
    static func history(
        pushed: [String: Double], deliveries: [(at: Double, delivery: PipelineHistory.Delivery)],
        acks: [(at: Double, ack: PipelineHistory.Ack)], left: [String: Int], counts: [String: Int], lostBefore: Double
    ) -> PipelineHistory {
        PipelineHistory(
            pushed: Set(pushed.filter { $0.value >= lostBefore }.keys),
            deliveries: deliveries.filter { $0.at >= lostBefore }.map(\.delivery),
            acks: acks.filter { $0.at >= lostBefore }.map(\.ack), left: left, counts: counts)
    }

    /// How many ids were pushed (answered) before `time`.
    func pushedCount(before time: Double) -> Int { pushed.withLock { $0.values.count { $0 < time } } }

    /// The ids pushed before `time` that no consume acknowledged.
    func unconsumed(pushedBefore time: Double) -> [String] {
        let consumed = Set(acks.withLock { $0.filter { $0.ack.status == 200 }.map(\.ack.id) })
        return pushed.withLock { $0.filter { $0.value < time && !consumed.contains($0.key) }.keys.sorted() }
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
            let counts = state["counts"] as? [String: Any] ?? [:]
            return ["ready", "delayed", "in_flight"].allSatisfy { counts[$0] as? Int == 0 }
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
                    pushed.withLock { $0[id] = Date().timeIntervalSince1970 }
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
                if taken.status != 204 {
                    failed.withLock { $0 += 1 }
                    // Refused at once (the pipeline gone): a moment before the next try.
                    Thread.sleep(forTimeInterval: 0.05)
                }
                continue
            }
            let answered = Date().timeIntervalSince1970
            let items = taken.json["items"] as? [[String: Any]] ?? []
            for item in items {
                guard let id = item["id"] as? String, let fence = (item["fence"] as? NSNumber)?.int64Value else {
                    failed.withLock { $0 += 1 }
                    continue
                }
                deliveries.withLock { $0.append((answered, .init(id: id, fence: fence, process: process))) }
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
                acks.withLock { $0.append((Date().timeIntervalSince1970, .init(id: id, fence: fence, status: status))) }
                if status == 200 { consumers.withLock { $0.append(process) } }
            }
        }
    }

    /// Whether `id` was consumed under `fence` (a finished item keeps its last
    /// hand-out's fence); asks until Redis answers (at most 20 s). An item
    /// that is gone (Redis lost it) was not.
    private func consumed(_ id: String, fence: Int64, port: UInt16) -> Bool {
        let end = Date().addingTimeInterval(20)
        while Date() < end {
            if let item = try? request(port, "GET", "/items/\(id)"), item.status == 200 || item.status == 404 {
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
