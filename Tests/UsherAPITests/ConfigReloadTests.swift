import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import UsherAPI
@testable import UsherCore

/// SIGHUP re-reads the config file: declared resources follow the file,
/// resources created through the API are left alone, a bad file changes nothing.
@Suite struct ConfigReloadTests {
    private final class ConfigFile {
        let directory: URL
        let url: URL
        init() throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("usher-test-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            url = directory.appendingPathComponent("usher.json")
        }
        deinit { try? FileManager.default.removeItem(at: directory) }
        func write(_ text: String) throws { try Data(text.utf8).write(to: url) }
        func load() throws(FieldError) -> UsherConfig { try UsherConfig.load(path: url.path, environment: [:]) }
    }

    private func names(_ app: UsherApp, _ kind: ResourceKind) -> [String] { app.registry.list(kind).map(\.name) }

    @Test func declaredResourcesFollowTheFile() throws {
        let file = try ConfigFile()
        try file.write(
            """
            {"port": 8080,
             "queues": {"same": {"capacity": 1}, "grows": {"capacity": 1}, "goes": {}},
             "pools": {"p": {"elements": ["a"], "lease_seconds": 60}},
             "machines": {"m": {"definition": "player"}}}
            """)
        let app = try UsherApp(config: try file.load(), logger: Logger(level: .error))
        let reloader = ConfigReloader(app: app)
        // Made through the API: never touched by a reload.
        _ = try QueueRoutes.creating(name: "api", config: QueueConfig(capacity: 7), backend: .memory, in: app)
            .readyValue()
        // A visitor in the queue that changes survives the change.
        let grows = try app.registry.lookup(.queues, "grows", as: VisitorQueue.self)
        _ = try grows.withIsolation { q throws(QueueError) in try q.enqueue(VisitorRequest(id: "v")) }

        try file.write(
            """
            {"port": 9090,
             "queues": {"same": {"capacity": 1}, "grows": {"capacity": 3}, "new": {"hold_seconds": 5}},
             "windows": {"w": {}},
             "pools": {"p": {"elements": ["a", "b"], "lease_seconds": 30}},
             "machines": {"m": {"initial": "A", "transitions": [{"event": "go", "from": "A", "to": "A"}]}}}
            """)
        let report = reloader.reload(file.load)
        #expect(report.error == nil)
        #expect(report.created == ["queues/new", "windows/w"])
        #expect(report.changed == ["queues/grows"])
        #expect(report.deleted == ["queues/goes"])
        #expect(report.partlyChanged == ["pools/p", "machines/m"])
        #expect(report.failed == [])
        #expect(report.needsRestart == ["port"])
        #expect(names(app, .queues) == ["api", "grows", "new", "same"])
        #expect(names(app, .windows) == ["w"])
        #expect(grows.withIsolation { $0.config.capacity } == 3)
        #expect(try grows.withIsolation { q throws(QueueError) in try q.visitor(id: "v") }.status == .granted)
        #expect(
            try app.registry.lookup(.queues, "new", as: VisitorQueue.self).withIsolation { $0.config.holdSeconds } == 5)
        #expect(
            try app.registry.lookup(.queues, "api", as: VisitorQueue.self).withIsolation { $0.config.capacity } == 7)
        // What a PATCH can change changed; the elements did not.
        let pool = try app.registry.lookup(.pools, "p", as: LeasePool.self)
        #expect(pool.withIsolation { $0.config.leaseSeconds } == 30)
        #expect(pool.withIsolation { $0.config.elements.map(\.id) } == ["a"])
        #expect(try app.registry.lookup(.machines, "m", as: StateMachine.self).definitionName == "player")

        // The same file again changes nothing (the port still needs a restart).
        let again = reloader.reload(file.load)
        #expect(again.created + again.changed + again.deleted + again.partlyChanged == [])
        #expect(again.needsRestart == ["port"])

        // Declared later, an API-made resource is taken over; removed, it goes.
        try file.write(
            """
            {"queues": {"same": {"capacity": 1}, "grows": {"capacity": 3}, "new": {"hold_seconds": 5}, "api": {"capacity": 2}},
             "windows": {"w": {}}}
            """)
        let adopted = reloader.reload(file.load)
        #expect(adopted.changed == ["queues/api"])
        #expect(adopted.deleted == ["pools/p", "machines/m"])
        #expect(adopted.needsRestart == ["port"])  // removed: its text changed, though 8080 is the default
        #expect(
            try app.registry.lookup(.queues, "api", as: VisitorQueue.self).withIsolation { $0.config.capacity } == 2)
        try app.registry.remove(.windows, "w")
        try file.write(#"{"queues": {"same": {"capacity": 1}}}"#)
        let removed = reloader.reload(file.load)
        #expect(removed.deleted == ["queues/api", "queues/grows", "queues/new"])
        #expect(names(app, .queues) == ["same"])
    }

    @Test func aPipelinesHistoryChangesInPlace() throws {
        let file = try ConfigFile()
        try file.write(#"{"pipelines": {"p": {"capacity": 5}}}"#)
        let app = try UsherApp(config: try file.load(), logger: Logger(level: .error))
        let reloader = ConfigReloader(app: app)
        try file.write(#"{"pipelines": {"p": {"capacity": 5, "history": 10}}}"#)
        let report = reloader.reload(file.load)
        #expect(report.changed == ["pipelines/p"])
        #expect(report.partlyChanged == [] && report.failed == [])
        #expect(try app.registry.lookup(.pipelines, "p", as: Pipeline.self).withIsolation { $0.config.history } == 10)
    }

    @Test func aPipelinesDedupSecondsChangesInPlaceAndAPauseStays() throws {
        let file = try ConfigFile()
        try file.write(#"{"pipelines": {"p": {}}}"#)
        let app = try UsherApp(config: try file.load(), logger: Logger(level: .error))
        let pipeline = try app.registry.lookup(.pipelines, "p", as: Pipeline.self)
        _ = try pipeline.withIsolation { p throws(PipelineError) in try p.apply(PipelinePatch(paused: true)) }
        try file.write(#"{"pipelines": {"p": {"dedup_seconds": 60}}}"#)
        let report = ConfigReloader(app: app).reload(file.load)
        #expect(report.changed == ["pipelines/p"] && report.failed == [])
        #expect(pipeline.withIsolation { $0.config.dedupSeconds } == 60)
        // `paused` is state, not config: a reload leaves it.
        #expect(pipeline.withIsolation { $0.state(limit: 0).paused })
    }

    @Test func aFileThatDoesNotValidateChangesNothing() throws {
        let file = try ConfigFile()
        try file.write(#"{"queues": {"q": {"capacity": 1}}}"#)
        let app = try UsherApp(config: try file.load(), logger: Logger(level: .error))
        let reloader = ConfigReloader(app: app)
        let bad = [
            #"{"queues": {"q": {"capacity": 2}, "r": {"capactiy": 1}}}"#,
            #"{"queues": {"q": {"capacity": 2},}}"#,
            #"{"queues": {"q": {"capacity": 2}}, "machines": {"m": {"definition": "nope"}}}"#,
            #"{"queues": {"q": {"hold_seconds": 0.001}}}"#,
        ]
        for text in bad {
            try file.write(text)
            let report = reloader.reload(file.load)
            #expect(report.error != nil, "\(text)")
            #expect(report.created + report.changed + report.deleted == [])
        }
        try FileManager.default.removeItem(at: file.url)
        #expect(reloader.reload(file.load).error?.contains("no such file") == true)
        #expect(names(app, .queues) == ["q"])
        #expect(try app.registry.lookup(.queues, "q", as: VisitorQueue.self).withIsolation { $0.config.capacity } == 1)
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: CommandLineTests.binary.path)))
    func sighupReloadsTheRunningServer() throws {
        let file = try ConfigFile()
        try file.write(#"{"queues": {"a": {"capacity": 1}, "b": {}}}"#)
        let p = Process()
        p.executableURL = CommandLineTests.binary
        p.arguments = ["--config", file.url.path]
        p.environment = ["USHER_PORT": "0", "USHER_LOG_LEVEL": "info"]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        defer {
            if p.isRunning {
                p.terminate()
                p.waitUntilExit()
            }
        }
        let log = LogReader(out.fileHandleForReading)
        let listening = try #require(log.next { $0["msg"] as? String == "listening" })
        let port = try #require(UInt16((listening["address"] as? String)?.split(separator: ":").last ?? ""))
        func queues() throws -> [String: Int] {
            let list = try TestHTTPClient.once(port: port, "GET", "/v1/queues").json["queues"] as? [[String: Any]] ?? []
            return Dictionary(
                uniqueKeysWithValues: list.map { ($0["name"] as? String ?? "", $0["capacity"] as? Int ?? -1) })
        }
        #expect(try TestHTTPClient.once(port: port, "PUT", "/v1/queues/api", body: "{}").status == 201)

        try file.write(#"{"queues": {"a": {"capacity": 4}, "c": {}}}"#)
        kill(p.processIdentifier, SIGHUP)
        #expect(log.next { $0["msg"] as? String == "config reloaded" } != nil)
        #expect(try queues() == ["a": 4, "c": 1, "api": 1])

        // A bad file: logged, and the server keeps serving its config.
        try file.write(#"{"queues": {"a": {"capacity": 9},}}"#)
        kill(p.processIdentifier, SIGHUP)
        let refused = try #require(
            log.next { $0["msg"] as? String == "config reload refused; the running config is kept" })
        #expect((refused["detail"] as? String)?.contains("trailing comma") == true)
        #expect(p.isRunning)
        #expect(try queues() == ["a": 4, "c": 1, "api": 1])

        p.terminate()
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
    }

    @Test func redisNeedsARestartAndABackendDoesNotChangeInPlace() throws {
        let file = try ConfigFile()
        try file.write(
            #"{"redis": {"url": "redis://:first-secret@127.0.0.1:1"}, "queues": {"q": {"capacity": 1}, "r": {}}}"#)
        let app = try UsherApp(config: try file.load(), logger: Logger(level: .error))
        let reloader = ConfigReloader(app: app)
        // r would move to redis (the new default): refused, and again on the next reload; q changes.
        try file.write(
            """
            {"redis": {"url": "redis://:second-secret@127.0.0.1:1"}, "default_backend": "redis",
             "queues": {"q": {"capacity": 2, "backend": "memory"}, "r": {}}}
            """)
        for round in 0..<2 {
            let report = reloader.reload(file.load)
            #expect(report.error == nil)
            #expect(report.needsRestart == ["default_backend", "redis"])
            #expect(report.failed == ["queues/r"])
            #expect(report.changed == (round == 0 ? ["queues/q"] : []))
        }
        #expect(try app.registry.lookup(.queues, "q", as: VisitorQueue.self).withIsolation { $0.config.capacity } == 2)
        // Back to memory: r is as it was, so nothing to do.
        try file.write(
            #"{"redis": {"url": "redis://:first-secret@127.0.0.1:1"}, "queues": {"q": {"capacity": 2}, "r": {}}}"#)
        let back = reloader.reload(file.load)
        #expect(back.failed + back.changed + back.created + back.deleted + back.needsRestart == [])
        // Once deleted, a resource may come back with another backend (created anew).
        try app.registry.remove(.queues, "r")
        try file.write(
            #"{"redis": {"url": "redis://:first-secret@127.0.0.1:1"}, "queues": {"q": {"capacity": 2}, "r": {"backend": "redis"}}}"#
        )
        let recreated = reloader.reload(file.load)
        #expect(recreated.failed == [] && recreated.inRedis == ["queues/r"])
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: CommandLineTests.binary.path)))
    func sighupNamesARedisChangeWithoutItsPassword() throws {
        let file = try ConfigFile()
        try file.write(
            #"{"redis": {"url": "redis://:url-secret-1@127.0.0.1:1", "password_env": "PW"}, "queues": {"q": {}}}"#)
        let p = Process()
        p.executableURL = CommandLineTests.binary
        p.arguments = ["--config", file.url.path]
        p.environment = ["USHER_PORT": "0", "USHER_LOG_LEVEL": "debug", "PW": "env-secret-0"]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        defer {
            if p.isRunning {
                p.terminate()
                p.waitUntilExit()
            }
        }
        let log = LogReader(out.fileHandleForReading)
        #expect(log.next { $0["msg"] as? String == "listening" } != nil)
        try file.write(
            #"{"redis": {"url": "redis://:url-secret-2@127.0.0.1:1", "password_env": "PW"}, "queues": {"q": {}}}"#)
        kill(p.processIdentifier, SIGHUP)
        let restart = try #require(
            log.next { $0["msg"] as? String == "config keys changed that need a restart; not applied" })
        #expect(restart["keys"] as? [String] == ["redis"])
        // A bad one: refused, naming the field, not the URL.
        try file.write(#"{"redis": {"url": "redis://:url-secret-3@127.0.0.1:0"}}"#)
        kill(p.processIdentifier, SIGHUP)
        let refused = try #require(
            log.next { $0["msg"] as? String == "config reload refused; the running config is kept" })
        #expect((refused["detail"] as? String)?.hasPrefix("redis.url: ") == true)
        p.terminate()
        p.waitUntilExit()
        let all = log.rest()
        #expect(!all.contains("secret"), "\(all)")
        #expect(p.terminationStatus == 0)
    }

    @Test func aReloadKeepsAnOpenTransactionOrEndsItWithTheMachine() throws {
        let file = try ConfigFile()
        try file.write(#"{"machines": {"m": {"definition": "player"}, "n": {"definition": "player"}}}"#)
        let app = try UsherApp(config: try file.load(), logger: Logger(level: .error))
        let reloader = ConfigReloader(app: app)
        let m = try app.registry.lookup(.machines, "m", as: StateMachine.self)
        let n = try app.registry.lookup(.machines, "n", as: StateMachine.self)
        let open = { (machine: StateMachine) throws(MachineError) -> MachineTransaction in
            try machine.withIsolation { m throws(MachineError) in try m.open(event: "prepare", seconds: 30) }
        }
        let kept = try open(m)
        let dropped = try open(n)
        // m's definition changes (which cannot happen in place), n is no longer declared.
        try file.write(#"{"machines": {"m": {"initial": "A", "transitions": []}}}"#)
        let report = reloader.reload(file.load)
        #expect(report.partlyChanged == ["machines/m"])
        #expect(report.deleted == ["machines/n"])
        #expect(m.withIsolation { $0.snapshot().transaction } == kept)
        let committed = try m.withIsolation { m throws(MachineError) in try m.commit(transaction: kept.id) }
        #expect(committed.state == "Ready")
        #expect(throws: MachineError.gone) {
            try n.withIsolation { n throws(MachineError) in try n.commit(transaction: dropped.id) }
        }
    }
}

/// Reads JSON log lines from a child's standard output.
private final class LogReader {
    private let handle: FileHandle
    private var buffer = Data()
    init(_ handle: FileHandle) { self.handle = handle }

    /// Every line read so far, those skipped included.
    private(set) var seen = Data()

    /// The next line that `matches`, skipping others; nil at end of output.
    func next(_ matches: ([String: Any]) -> Bool) -> [String: Any]? {
        while true {
            while let newline = buffer.firstIndex(of: 0x0A) {
                let line = buffer[buffer.startIndex..<newline]
                seen.append(buffer[buffer.startIndex...newline])
                buffer = Data(buffer[(newline + 1)...])
                if let object = try? JSONSerialization.jsonObject(with: line) as? [String: Any], matches(object) {
                    return object
                }
            }
            let chunk = handle.availableData
            if chunk.isEmpty { return nil }
            buffer.append(chunk)
        }
    }

    /// Everything written: the lines read so far and the rest, to the end of output.
    func rest() -> String {
        var all = seen + buffer
        all.append(handle.readDataToEndOfFile())
        return String(decoding: all, as: UTF8.self)
    }
}
