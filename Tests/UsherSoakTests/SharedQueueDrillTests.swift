import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import Locking

/// Issue 17, "Tests": three `usher` processes sharing one `redis-server`,
/// clients on all three. The queue scenario for 20 s, then fault drills
/// under load: Redis paused (SIGSTOP) for 5 s, Redis restarted empty, the
/// subscriber connections killed. Each checks the queue's invariants
/// (`QueueHistoryChecker`) on what survived, and prints what it measured
/// (lines starting `[shared-redis]`).
///
/// The other kinds' scenarios start the same `SharedRedisCluster` and drive
/// it likewise (`SharedMachineDrillTests`, …).
@Suite(.serialized, .enabled(if: FileManager.default.fileExists(atPath: usherBinary.path)))
struct SharedQueueDrillTests {
    static let queue = "shared"
    static let queueBody =
        #"{"backend": "redis", "capacity": 3, "hold_seconds": 1, "dedup": "key", "opposites": [["like", "unlike"]], "history": 100000}"#

    static func note(_ text: String) { print("[shared-redis] \(text)") }

    /// The cluster with the queue created through process 0, once every process serves it.
    func start() async throws -> SharedRedisCluster {
        let cluster = try await SharedRedisCluster()
        let created = try cluster.ushers[0].call("PUT", "/v1/queues/\(Self.queue)", Self.queueBody)
        #expect(created.status == 201, "\(created.text)")
        for usher in cluster.ushers {
            let seen = await poll(5) { (try? usher.call("GET", "/v1/queues/\(Self.queue)").status) == 200 }
            #expect(seen, "usher \(usher.index) does not see the queue")
        }
        return cluster
    }

    /// Empties the queue, reads every visitor and checks them all; the report.
    func verify(
        _ load: SharedQueueLoad, _ cluster: SharedRedisCluster, allowed: Set<Int>, lostBefore: Double = 0,
        label: String
    ) async throws -> QueueHistoryChecker.Report {
        let drained = try await load.drain(timeout: 10)
        #expect(drained != nil, "\(label): the queue did not empty")
        let (outcomes, missing, failures) = await load.finalStates()
        let allRead = failures.isEmpty
        #expect(allRead, "\(label): \(failures.count) not read: \(failures.prefix(5))")
        let report = QueueHistoryChecker(capacity: 3).check(outcomes)
        let valid = report.violations.isEmpty
        #expect(valid, "\(label): \(report.violations.count) violations: \(report.violations.prefix(10))")
        let cross = load.crossCheck(outcomes, missing: missing, allowed: allowed, lostBefore: lostBefore)
        let consistent = cross.isEmpty
        #expect(consistent, "\(label): \(cross.count) answers disagree: \(cross.prefix(10))")
        let counts = try await load.counts()
        if lostBefore == 0 {
            let countErrors = SharedQueueLoad.countCheck(counts, outcomes)
            #expect(countErrors.isEmpty, "\(label): \(countErrors)")
        }
        #expect(cluster.deaths().isEmpty, "\(cluster.deaths())")
        Self.note("\(label): \(load.summary())")
        Self.note(
            "\(label): \(outcomes.count) visitors, \(missing.count) never created; \(report.summary); "
                + "drained in \(String(format: "%.2f", drained ?? -1)) s")
        return report
    }

    @Test func twentySecondsOnThreeProcesses() async throws {
        let cluster = try await start()
        defer { cluster.stop() }
        // Longer soaks and repeats: Benchmarks/shared-queue-soak sets these.
        let environment = ProcessInfo.processInfo.environment
        let seconds = environment["USHER_SOAK_SECONDS"].flatMap(Double.init) ?? 20
        let seed = environment["USHER_SOAK_SEED"].flatMap(UInt64.init) ?? UInt64(Date().timeIntervalSince1970)
        Self.note("\(seconds) s run, seed \(seed)")
        let load = SharedQueueLoad(cluster: cluster, queue: Self.queue)
        await load.run(workers: 12, seconds: seconds, seed: seed)
        let report = try await verify(load, cluster, allowed: [200, 201, 409], label: "\(seconds) s run")
        // The mix did what it is for.
        #expect(report.maxHolders == 3)
        #expect(report.grants > Int(seconds * 5))
        for status in ["expired", "merged", "released", "completed"] {
            #expect(report.byStatus[status, default: 0] > 0, "no \(status)")
        }
        for reason in ["opposite", "client", "timeout"] {
            #expect(report.byReason[reason, default: 0] > 0, "no cancel for \(reason)")
        }
        #expect(report.fifoPairs > Int(seconds * 5))
        #expect(report.priorityPairs > 0)
    }

    @Test func redisPausedForFiveSeconds() async throws {
        let cluster = try await start()
        defer { cluster.stop() }
        let load = SharedQueueLoad(cluster: cluster, queue: Self.queue)
        let seed = UInt64(Date().timeIntervalSince1970)
        async let running: Void = load.run(workers: 6, seconds: 11, seed: seed)
        // 30 more long-polls parked on process 0 (behind a holder that stays): each
        // re-reads once a second, so the stall piles commands on its connections.
        let a = cluster.ushers[0]
        _ = try a.call("PUT", "/v1/queues/parked", #"{"backend": "redis", "capacity": 1}"#)
        _ = try a.call("POST", "/v1/queues/parked/visitors", #"{"id": "holder"}"#)
        let parkedAnswers = Locked<[Int]>([])
        async let parked: Void = onThreads(30) { i in
            let r = try? a.call("POST", "/v1/queues/parked/visitors?wait=6", #"{"id": "p\#(i)"}"#)
            parkedAnswers.withLock { $0.append(r?.status ?? 0) }
        }
        try await Task.sleep(for: .seconds(2))
        let paused = Date()
        cluster.redis.signal(SIGSTOP)
        // Memory routes and health answer at once; /readyz names the cause.
        try await Task.sleep(for: .milliseconds(500))
        for usher in cluster.ushers {
            let started = Date()
            let health = try await onThread { try usher.call("GET", "/healthz") }
            #expect(health.status == 200)
            #expect(Date().timeIntervalSince(started) < 1)
        }
        let ready = try await onThread { try cluster.ushers[1].call("GET", "/readyz") }
        #expect(ready.status == 503, "\(ready.text)")
        Self.note("pause: /readyz \(ready.status) \(ready.json["detail"] as? String ?? ready.text)")
        // A request on the process with the parked long-polls: 503 within about the
        // command timeout (2 s), not held for the whole pause.
        let asked = Date()
        let stalled = try await onThread { try a.call("GET", "/v1/queues/\(Self.queue)") }
        let stalledSeconds = Date().timeIntervalSince(asked)
        Self.note(
            String(format: "pause: GET beside 30 parked long-polls: %d in %.2f s", stalled.status, stalledSeconds))
        #expect(stalled.status == 503)
        #expect(stalledSeconds < 3.5)
        try await Task.sleep(until: .now + .seconds(5) - .seconds(Date().timeIntervalSince(paused)))
        let resumed = Date()
        cluster.redis.signal(SIGCONT)
        let serving = await cluster.recovery("/v1/queues/\(Self.queue)", since: resumed)
        let readyAgain = await cluster.recovery("/readyz", since: resumed)
        await running
        await parked
        let parkedStatuses = parkedAnswers.withLock { $0 }
        Self.note(
            "pause: the 30 parked long-polls ended \(Dictionary(grouping: parkedStatuses, by: { $0 }).mapValues(\.count))"
        )
        #expect(parkedStatuses.allSatisfy { $0 == 200 || $0 == 201 || $0 == 503 }, "\(parkedStatuses)")
        Self.note(
            "pause: serving again after SIGCONT in \(secondsList(serving)); /readyz 200 in \(secondsList(readyAgain))"
        )
        #expect(serving.allSatisfy { ($0 ?? 99) < 5 }, "\(serving)")
        #expect(readyAgain.allSatisfy { ($0 ?? 99) < 5 }, "\(readyAgain)")
        let answers = load.allAnswers
        let during = answers.filter {
            $0.received > paused.timeIntervalSince1970 && $0.sent < resumed.timeIntervalSince1970
        }
        let unavailable = answers.filter { $0.status == 503 }
        Self.note(
            "pause: \(during.count) answers overlapped the pause, \(unavailable.count) were 503 "
                + "(\(during.filter(\.longPoll).count) long-polls: "
                + "\(Dictionary(grouping: during.filter(\.longPoll), by: \.status).mapValues(\.count)))")
        let slowest = during.map { $0.received - $0.sent }.max() ?? 0
        Self.note(String(format: "pause: the slowest of them took %.2f s", slowest))
        #expect(!unavailable.isEmpty)
        // Every request got an answer: parked long-polls too, an answer or a 503.
        #expect(answers.allSatisfy { $0.status != 0 }, "\(answers.filter { $0.status == 0 }.prefix(3))")
        _ = try await verify(load, cluster, allowed: [200, 201, 409, 503], label: "pause")
    }

    @Test func redisRestartedEmpty() async throws {
        let cluster = try await start()
        defer { cluster.stop() }
        let load = SharedQueueLoad(cluster: cluster, queue: Self.queue)
        let seed = UInt64(Date().timeIntervalSince1970)
        async let running: Void = load.run(workers: 6, seconds: 8, seed: seed)
        try await Task.sleep(for: .seconds(2))
        let killed = Date()
        cluster.redis.stop()
        try await Task.sleep(for: .milliseconds(500))
        let down = try await onThread { try cluster.ushers[2].call("GET", "/v1/queues/\(Self.queue)") }
        #expect(down.status == 503, "\(down.text)")
        #expect(down.code == "backend_unavailable")
        try await cluster.redis.start()
        let restarted = Date()
        // The queue is gone with the data: each process says so, soon with 404.
        let gone = Locked<[String]>([])
        await onThreads(cluster.ushers.count) { i in
            let usher = cluster.ushers[i]
            var seen: [String] = []
            while Date().timeIntervalSince(restarted) < 10 {
                let r = try? usher.call("GET", "/v1/queues/\(Self.queue)")
                let answer = "\(r?.status ?? 0) \(r?.code ?? "")"
                if seen.last != answer {
                    seen.append(answer)
                    gone.withLock {
                        $0.append(
                            "usher \(i) " + String(format: "%.2f s: ", Date().timeIntervalSince(restarted)) + answer)
                    }
                }
                if r?.status == 404 { return }
                usleep(20_000)
            }
        }
        let goneAnswers = gone.withLock { $0 }
        Self.note("restart: answers after the restart, \(goneAnswers)")
        #expect(goneAnswers.filter { $0.hasSuffix("404 not_found") }.count == 3, "\(goneAnswers)")
        // Created again through another process, it serves on all three.
        let recreate = try await onThread {
            try cluster.ushers[1].call("PUT", "/v1/queues/\(Self.queue)", Self.queueBody)
        }
        #expect(recreate.status == 201, "\(recreate.text)")
        let recreated = Date()
        let serving = await cluster.recovery("/v1/queues/\(Self.queue)", since: recreated, timeout: 5)
        Self.note(
            "restart: Redis down \(String(format: "%.2f", restarted.timeIntervalSince(killed))) s; "
                + "after re-create, serving in \(secondsList(serving))")
        #expect(serving.allSatisfy { $0 != nil }, "\(serving)")
        await running
        let answers = load.allAnswers
        Self.note(
            "restart: answers by status \(Dictionary(grouping: answers, by: \.status).mapValues(\.count)), "
                + "codes \(Dictionary(grouping: answers.compactMap(\.code), by: { $0 }).mapValues(\.count))")
        let report = try await verify(
            load, cluster, allowed: [200, 201, 404, 409, 410, 503], lostBefore: recreated.timeIntervalSince1970,
            label: "restart")
        #expect(report.grants > 0, "nothing granted after the re-create")
        // Fences keep growing across the loss: the new queue's are above every old one.
        let before = answers.filter { $0.received < killed.timeIntervalSince1970 }.compactMap(\.fence).max() ?? 0
        let after = answers.filter { $0.sent > recreated.timeIntervalSince1970 }.compactMap(\.fence).min() ?? .max
        #expect(before < after, "fence \(after) after the restart, \(before) before")
        // Emptied without a restart (no resync): a PUT through any process makes it again.
        _ = try await cluster.redisCommand(["FLUSHALL"])
        let flushed = try await onThread { try cluster.ushers[2].call("GET", "/v1/queues/\(Self.queue)") }
        #expect(flushed.status == 410 || flushed.status == 404, "\(flushed.text)")
        let again = try await onThread { try cluster.ushers[2].call("PUT", "/v1/queues/\(Self.queue)", Self.queueBody) }
        #expect(again.status == 201, "\(again.text)")
        let enqueued = try await onThread {
            try cluster.ushers[0].call("POST", "/v1/queues/\(Self.queue)/visitors", "{}")
        }
        #expect(enqueued.json["status"] as? String == "granted", "\(enqueued.text)")
    }

    /// A queue of capacity 1: `holder` granted through process 1, `waiter`
    /// parked on process 0, then `between` runs, then process 2 completes the
    /// holder. The seconds from that complete's answer to the waiter's grant.
    func handOver(_ cluster: SharedRedisCluster, queue: String, round: Int, between: () async throws -> Void)
        async throws -> Double
    {
        let (holder, waiter) = ("h\(round)", "w\(round)")
        let (a, b, c) = (cluster.ushers[0], cluster.ushers[1], cluster.ushers[2])
        let held = try await onThread { try b.call("POST", "/v1/queues/\(queue)/visitors", #"{"id": "\#(holder)"}"#) }
        #expect(held.json["status"] as? String == "granted", "\(held.text)")
        let answer = Locked<(TestHTTPClient.Response?, Date)>((nil, Date()))
        async let parked: Void = onThreads(1) { _ in
            let r = try? a.call("POST", "/v1/queues/\(queue)/visitors?wait=10", #"{"id": "\#(waiter)"}"#)
            answer.withLock { $0 = (r, Date()) }
        }
        let waiting = await poll(5) {
            (try? c.call("GET", "/v1/queues/\(queue)/visitors/\(waiter)"))?.json["status"] as? String == "waiting"
        }
        #expect(waiting)
        try await Task.sleep(for: .milliseconds(100))  // parked on process 0
        try await between()
        let done = try await onThread { try c.call("POST", "/v1/queues/\(queue)/visitors/\(holder)/complete") }
        let completed = Date()
        #expect(done.status == 200, "\(done.text)")
        await parked
        let (response, at) = answer.withLock { $0 }
        #expect(response?.json["status"] as? String == "granted", "\(response?.text ?? "no answer")")
        _ = try await onThread { try c.call("POST", "/v1/queues/\(queue)/visitors/\(waiter)/complete") }
        return at.timeIntervalSince(completed)
    }

    @Test func subscriberConnectionsKilled() async throws {
        let cluster = try await start()
        defer { cluster.stop() }
        let queue = "lock"
        let created = try cluster.ushers[0].call(
            "PUT", "/v1/queues/\(queue)", #"{"backend": "redis", "capacity": 1, "hold_seconds": 10}"#)
        #expect(created.status == 201)
        _ = await poll(5) { cluster.ushers.allSatisfy { (try? $0.call("GET", "/v1/queues/\(queue)").status) == 200 } }
        func killSubscribers() async throws -> Int {
            Int(try await cluster.redisCommand(["CLIENT", "KILL", "TYPE", "pubsub"]).int ?? -1)
        }
        // Notices as usual.
        var latencies: [String: [Double]] = [:]
        for round in 0..<2 {
            latencies["notice", default: []].append(try await handOver(cluster, queue: queue, round: round) {})
        }
        // The subscribers killed just before the complete: they reconnect and re-read.
        for round in 2..<5 {
            latencies["killed", default: []].append(
                try await handOver(cluster, queue: queue, round: round) {
                    let killed = try await killSubscribers()
                    #expect(killed == 3)
                })
        }
        // Subscribing refused for a while (ACL): only the ≤ 1 s polling fallback finds the grant.
        _ = try await cluster.redisCommand(["ACL", "SETUSER", "default", "-subscribe"])
        for round in 5..<8 {
            latencies["fallback", default: []].append(
                try await handOver(cluster, queue: queue, round: round) {
                    _ = try await killSubscribers()
                    try await Task.sleep(for: .milliseconds(200))  // reconnected, refused
                })
        }
        let deaf = try await onThread { try cluster.ushers[0].call("GET", "/readyz") }
        #expect(deaf.status == 503, "\(deaf.text)")
        Self.note(
            "subscribers: /readyz while SUBSCRIBE is refused: \(deaf.status) \(deaf.json["detail"] as? String ?? "")")
        _ = try await cluster.redisCommand(["ACL", "SETUSER", "default", "+subscribe"])
        let restored = Date()
        let ready = await cluster.recovery("/readyz", since: restored, timeout: 5)
        for round in 8..<10 {
            latencies["restored", default: []].append(try await handOver(cluster, queue: queue, round: round) {})
        }
        Self.note(
            "subscribers: wake-up after the complete, s: "
                + latencies.sorted { $0.key < $1.key }.map {
                    "\($0.key) \($0.value.map { String(format: "%.3f", $0) })"
                }
                .joined(separator: "; ") + "; /readyz after ACL restored: \(secondsList(ready))")
        #expect(ready.allSatisfy { ($0 ?? 99) < 5 }, "\(ready)")
        for (label, values) in latencies {
            #expect(values.allSatisfy { $0 < 1.5 }, "\(label): \(values)")
        }
        #expect(cluster.deaths().isEmpty, "\(cluster.deaths())")
    }
}
