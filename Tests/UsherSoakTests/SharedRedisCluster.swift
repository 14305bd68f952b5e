import Foundation
import HTTPTestClient
import RedisTestServer
import TestSupport
import Testing

@testable import Locking
@testable import RedisClient

/// One `usher` process (the binary `swift build` made), serving a config
/// file on a port of its own choosing, learnt from its "listening" log line.
/// Its log is read all along (a full pipe would stop it) and kept for the
/// messages of a failed test.
final class UsherProcess: Sendable {
    let index: Int
    let port: UInt16
    private let process: Process
    private let output: Output

    /// What the reader thread learns from the log.
    private final class Output: Sendable {
        let lines = Locked<[String]>([])
        let port = Locked<UInt16?>(nil)
    }

    /// Starts `usher --config <file>` with `config` written to `directory`.
    init(index: Int, config: [String: Any], directory: URL) throws {
        self.index = index
        let file = directory.appendingPathComponent("usher-\(index).json")
        try JSONSerialization.data(withJSONObject: config, options: [.sortedKeys]).write(to: file)
        let process = Process()
        process.executableURL = usherBinary
        process.arguments = ["--config", file.path]
        process.environment = ["USHER_LOG_LEVEL": "info"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        let output = Output()
        let started = DispatchSemaphore(value: 0)
        try process.run()
        // Reads the log until the process ends; the "listening" line names the port.
        Thread {
            let handle = out.fileHandleForReading
            var pending = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: 0x0A) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending = Data(pending[pending.index(after: newline)...])
                    output.lines.withLock { $0.append(line) }
                    if output.port.withLock({ $0 }) == nil, let port = Self.listeningPort(line) {
                        output.port.withLock { $0 = port }
                        started.signal()
                    }
                }
            }
            started.signal()
        }.start()
        _ = started.wait(timeout: .now() + 20)
        guard let port = output.port.withLock({ $0 }) else {
            if process.isRunning { process.terminate() }
            let log = output.lines.withLock { $0.joined(separator: "\n") }
            throw StartFailure(description: "usher \(index) did not start:\n\(log)")
        }
        self.port = port
        self.process = process
        self.output = output
    }

    struct StartFailure: Error, CustomStringConvertible {
        let description: String
    }

    /// The port of a `{"msg":"listening","address":"http://127.0.0.1:PORT",…}` line.
    static func listeningPort(_ line: String) -> UInt16? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
            object["msg"] as? String == "listening", let address = object["address"] as? String
        else { return nil }
        return UInt16(address.split(separator: ":").last ?? "")
    }

    var isRunning: Bool { process.isRunning }
    var pid: Int32 { process.processIdentifier }

    /// The last `count` log lines.
    func log(last count: Int = 30) -> String {
        output.lines.withLock { $0.suffix(count).joined(separator: "\n") }
    }

    /// SIGTERM, then waits for the exit; the exit status (nil when it had died before).
    @discardableResult
    func stop() -> Int32? {
        guard process.isRunning else { return nil }
        process.terminate()
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// SIGKILL, as when the process or its pod dies: nothing it parks is withdrawn.
    func kill() {
        guard process.isRunning else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// One request on a fresh connection.
    func call(_ method: String, _ path: String, _ body: String? = nil, timeoutSeconds: Int = 15) throws
        -> TestHTTPClient.Response
    {
        try TestHTTPClient(port: port, timeoutSeconds: timeoutSeconds).request(method, path, body: body)
    }
}

/// A `redis-server` and `count` Usher processes sharing it, for the tests of
/// issue 17 ("three Usher processes sharing one Redis"). Scenarios for each
/// kind drive it through HTTP; the queue one is `SharedQueueLoad`.
final class SharedRedisCluster: Sendable {
    let redis: RedisServer
    let ushers: [UsherProcess]
    private let directory: URL

    /// `extra` is merged into every process's config (beside `redis` and `port`).
    init(count: Int = 3, extra: [String: Any] = [:]) async throws {
        redis = try await RedisServer()
        directory = try temporaryDirectory("shared-redis")
        var config = extra
        config["redis"] = ["url": "redis://127.0.0.1:\(redis.port)"]
        config["port"] = 0
        var made: [UsherProcess] = []
        for index in 0..<count {
            made.append(try UsherProcess(index: index, config: config, directory: directory))
        }
        ushers = made
    }

    /// Stops every process (SIGTERM) and Redis; the exit statuses, nil for one
    /// that had already died.
    @discardableResult
    func stop() -> [Int32?] {
        let statuses = ushers.map { $0.stop() }
        redis.stop()
        try? FileManager.default.removeItem(at: directory)
        return statuses
    }

    /// Which processes have died (crashed), with their last log lines.
    func deaths() -> [String] {
        ushers.filter { !$0.isRunning }.map { "usher \($0.index) died:\n\($0.log())" }
    }

    /// A command on a fresh connection to Redis (`CLIENT KILL`, `ACL SETUSER`, …).
    func redisCommand(_ arguments: [String]) async throws -> RedisReply {
        let connection = redis.connection()
        let reply: Result<RedisReply, RedisError>
        do throws(RedisError) { reply = .success(try await connection.command(arguments)) } catch {
            reply = .failure(error)
        }
        await connection.close()
        return try reply.get()
    }
}

/// Runs `body(i)` for `i` in `0..<count`, each on a thread of its own (the
/// test client blocks), and returns once all have returned.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let group = DispatchGroup()
        for i in 0..<count {
            group.enter()
            Thread {
                body(i)
                group.leave()
            }.start()
        }
        group.notify(queue: .global()) { continuation.resume() }
    }
}

/// What the fault drills of every kind measure on the three processes.
extension SharedRedisCluster {
    /// Seconds from `since` until `GET path` answers 200 on every process
    /// (probing each every 20 ms for at most `timeout`); nil for one that did not.
    func recovery(_ path: String, since: Date, timeout: Double = 15) async -> [Double?] {
        let times = Locked<[Double?]>(Array(repeating: nil, count: ushers.count))
        await onThreads(ushers.count) { [ushers] i in
            let usher = ushers[i]
            while Date().timeIntervalSince(since) < timeout {
                if (try? usher.call("GET", path, timeoutSeconds: 5).status) == 200 {
                    times.withLock { $0[i] = Date().timeIntervalSince(since) }
                    return
                }
                usleep(20_000)
            }
        }
        return times.withLock { $0 }
    }

    /// What one process answered (and how fast) while Redis was paused.
    struct PausedAnswers: Sendable {
        typealias Timed = (status: Int, code: String?, retryAfter: String?, seconds: Double)
        var health: Timed
        var memory: Timed
        var shared: Timed
        var ready: Timed
    }

    /// With Redis paused: `/healthz`, `GET memoryPath` (a memory resource),
    /// `GET sharedPath` (a Redis one) and `/readyz` on every process at once.
    func answersWhilePaused(shared sharedPath: String, memory memoryPath: String) async -> [PausedAnswers] {
        let found = Locked<[Int: PausedAnswers]>([:])
        await onThreads(ushers.count) { [ushers] i in
            func timed(_ path: String) -> PausedAnswers.Timed {
                let started = Date()
                let r = try? ushers[i].call("GET", path, timeoutSeconds: 10)
                return (r?.status ?? 0, r?.code, r?.headers["retry-after"], Date().timeIntervalSince(started))
            }
            let answers = PausedAnswers(
                health: timed("/healthz"), memory: timed(memoryPath), shared: timed(sharedPath), ready: timed("/readyz")
            )
            found.withLock { $0[i] = answers }
        }
        return found.withLock { found in ushers.indices.compactMap { found[$0] } }
    }

    /// Every change of `GET path`'s answer on each process from `since` (as
    /// "usher i, 0.25 s: 404 not_found") until `done` holds for it or `timeout` passes.
    func answersUntil(
        _ path: String, since: Date, timeout: Double = 10, _ done: @escaping @Sendable (Int) -> Bool
    ) async -> [String] {
        let changes = Locked<[String]>([])
        await onThreads(ushers.count) { [ushers] i in
            var last: String?
            while Date().timeIntervalSince(since) < timeout {
                let r = try? ushers[i].call("GET", path, timeoutSeconds: 5)
                let answer = "\(r?.status ?? 0) \(r?.code ?? "")"
                if last != answer {
                    last = answer
                    let at = String(format: "%.2f s: ", Date().timeIntervalSince(since))
                    changes.withLock { $0.append("usher \(i), \(at)\(answer)") }
                }
                if done(r?.status ?? 0) { return }
                usleep(20_000)
            }
        }
        return changes.withLock { $0 }
    }
}

/// The two fault drills every kind runs under its load, with the checks
/// they share; each kind then checks its own invariants on what survived.
extension SharedRedisCluster {
    /// The subscriber connections killed twice (1.5 s apart), then Redis
    /// paused (SIGSTOP) for 5 s: meanwhile every process answers `/healthz`
    /// and `GET memory` (a memory resource) at once, `GET shared` 503
    /// `backend_unavailable` with `Retry-After` within 3.5 s, `/readyz` 503;
    /// after SIGCONT each serves `shared` again within 5 s. `what` names the
    /// resource in notes and failures ("pool").
    func killSubscribersThenPause(shared: String, memory: String, what: String) async throws {
        for _ in 0..<2 {
            try await Task.sleep(for: .seconds(1.5))
            let killed = try await redisCommand(["CLIENT", "KILL", "TYPE", "pubsub"]).int
            #expect(killed == 3, "\(String(describing: killed)) subscribers killed")
        }
        try await Task.sleep(for: .seconds(1))
        let paused = Date()
        redis.signal(SIGSTOP)
        try await Task.sleep(for: .milliseconds(300))
        let during = await answersWhilePaused(shared: shared, memory: memory)
        try await Task.sleep(until: .now + .seconds(5 - Date().timeIntervalSince(paused)))
        let resumed = Date()
        redis.signal(SIGCONT)
        let serving = await recovery(shared, since: resumed)
        for (i, a) in during.enumerated() {
            #expect(a.health.status == 200 && a.health.seconds < 1, "usher \(i) /healthz: \(a.health)")
            #expect(a.memory.status == 200 && a.memory.seconds < 1, "usher \(i) memory \(what): \(a.memory)")
            #expect(
                a.shared.status == 503 && a.shared.code == "backend_unavailable" && a.shared.retryAfter != nil
                    && a.shared.seconds < 3.5, "usher \(i) Redis \(what): \(a.shared)")
            #expect(a.ready.status == 503, "usher \(i) /readyz: \(a.ready)")
        }
        SharedQueueDrillTests.note(
            "\(what) pause: Redis \(what) answered "
                + during.map { "\($0.shared.status) in \(String(format: "%.2f", $0.shared.seconds)) s" }
                .joined(separator: ", ") + "; memory \(what) and /healthz within "
                + String(format: "%.3f s", during.map { max($0.memory.seconds, $0.health.seconds) }.max() ?? -1)
                + "; serving again after SIGCONT in \(secondsList(serving))")
        #expect(serving.allSatisfy { ($0 ?? 99) < 5 }, "\(serving)")
    }

    /// Redis stopped 2 s into the load (`GET shared` answers 503
    /// `backend_unavailable` meanwhile) and started again empty: every
    /// process comes to answer 404 for `shared` (made by PUT, so lost) and
    /// serves `declared` (in the config file, so made again). Answers when
    /// Redis was stopped and when it was started.
    func restartRedisEmpty(shared: String, declared: String, what: String) async throws -> (
        stopped: Date, restarted: Date
    ) {
        try await Task.sleep(for: .seconds(2))
        let stopped = Date()
        redis.stop()
        try await Task.sleep(for: .milliseconds(500))
        let down = try await onThread { [ushers] in try ushers[2].call("GET", shared) }
        #expect(down.status == 503 && down.code == "backend_unavailable", "\(down.text)")
        try await redis.start()
        let restarted = Date()
        async let declaredBack = recovery(declared, since: restarted, timeout: 10)
        let gone = await answersUntil(shared, since: restarted) { $0 == 404 }
        SharedQueueDrillTests.note("\(what) restart: answers after the restart, \(gone)")
        #expect(gone.filter { $0.hasSuffix("404 not_found") }.count == 3, "\(gone)")
        let back = await declaredBack
        SharedQueueDrillTests.note("\(what) restart: the declared \(what) served again in \(secondsList(back))")
        #expect(back.allSatisfy { $0 != nil }, "\(back)")
        return (stopped, restarted)
    }
}

/// "0.02 s, 0.03 s, never" for what `recovery` measured.
func secondsList(_ times: [Double?]) -> String {
    times.map { $0.map { String(format: "%.2f s", $0) } ?? "never" }.joined(separator: ", ")
}

/// What is wrong with an answer that says Redis is unavailable: a 503 must
/// be `backend_unavailable` with `Retry-After`. Nil for a good one, or another status.
func refusalProblem(status: Int, code: String?, retryAfter: String?) -> String? {
    guard status == 503, code != "backend_unavailable" || retryAfter == nil else { return nil }
    return "503 \(code ?? "without a code"), Retry-After \(retryAfter ?? "missing")"
}
