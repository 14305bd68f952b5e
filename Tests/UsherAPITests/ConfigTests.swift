import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import RedisClient
@testable import UsherAPI
@testable import UsherCore

@Suite struct ConfigTests {
    private func parse(_ text: String) throws -> UsherConfig {
        try UsherConfig.parse(try JSONValue.parse(text))
    }

    /// The error a config gives at start-up (file parsing, then creating the
    /// declared resources), as a field error; nil when it is valid.
    private func error(_ text: String) -> FieldError? {
        do {
            _ = try UsherApp(config: try parse(text), logger: Logger(level: .error))
            return nil
        } catch let e as FieldError {
            return e
        } catch let e as APIError {
            let field: String? = e.extra.first { $0.0 == "field" }.flatMap {
                if case .string(let f) = $0.1 { f } else { nil }
            }
            return FieldError(field: field ?? "?", message: e.detail)
        } catch {
            return FieldError(field: "?", message: "\(error)")
        }
    }

    @Test func defaults() throws {
        let c = try parse("{}")
        #expect(c.host == "127.0.0.1")
        #expect(c.port == 8080)
        #expect(c.maxBodyBytes == 65_536)
        #expect(c.maxWaitSeconds == 30)
        #expect(c.maxResources == 1000)
        #expect(c.maxConnections == 10_000)
        #expect(c.idleTimeoutSeconds == 90)
        #expect(c.connectionMemoryBytes == 8192)
        #expect(c.shutdownGraceSeconds == 10)
        #expect(c.dataDir == "data")
        #expect(c.allowRemoteSources == false)
        #expect(c.authToken == nil)
    }

    @Test func errorsNameTheField() {
        #expect(error(#"{"prot": 1}"#)?.field == "prot")
        #expect(error(#"{"port": "80"}"#)?.field == "port")
        #expect(error(#"{"port": 70000}"#)?.field == "port")
        #expect(error(#"{"max_body_bytes": 0}"#)?.field == "max_body_bytes")
        #expect(error(#"{"connection_memory_bytes": 1024}"#)?.field == "connection_memory_bytes")
        #expect(error(#"{"connection_memory_bytes": 2097152}"#)?.field == "connection_memory_bytes")
        #expect(error(#"{"queues": {"q": {"capactiy": 1}}}"#)?.field == "queues.q.capactiy")
        #expect(error(#"{"queues": {"q": {"capacity": -1}}}"#)?.field == "queues.q.capacity")
        #expect(error(#"{"queues": {"bad name": {}}}"#)?.field == "queues.bad name")
        #expect(error(#"{"queues": []}"#)?.field == "queues")
        #expect(error("[]")?.message.contains("object") == true)
    }

    @Test func environmentOverrides() throws {
        var c = try parse(#"{"host": "0.0.0.0", "port": 1}"#)
        try c.applyEnvironment([
            "USHER_HOST": "127.0.0.2", "USHER_PORT": "9090", "USHER_TOKEN": "t",
            "USHER_LOG_LEVEL": "debug",
        ])
        #expect(c.host == "127.0.0.2")
        #expect(c.port == 9090)
        #expect(c.authToken == "t")
        #expect(c.logLevel == .debug)
        #expect(throws: FieldError.self) { try c.applyEnvironment(["USHER_PORT": "eighty"]) }
        #expect(throws: FieldError.self) { try c.applyEnvironment(["USHER_LOG_LEVEL": "loud"]) }
    }

    @Test func connectionMemoryReachesTheServer() throws {
        var c = try parse(#"{"connection_memory_bytes": 16384}"#)
        #expect(Service.serverConfiguration(for: c).connectionMemoryLimit == 16384)
        try c.applyEnvironment(["USHER_CONNECTION_MEMORY_BYTES": "4096"])
        #expect(c.connectionMemoryBytes == 4096)
        #expect(Service.serverConfiguration(for: c).connectionMemoryLimit == 4096)
        #expect(throws: FieldError.self) { try c.applyEnvironment(["USHER_CONNECTION_MEMORY_BYTES": "100"]) }
        #expect(throws: FieldError.self) { try c.applyEnvironment(["USHER_CONNECTION_MEMORY_BYTES": "lots"]) }
    }

    /// A config as `load` reads it: the file's object, then the environment.
    private func load(_ text: String, environment: [String: String] = [:]) throws(FieldError) -> UsherConfig {
        var config: UsherConfig
        do { config = try parse(text) } catch let e as FieldError { throw e } catch {
            throw FieldError(field: "?", message: "\(error)")
        }
        try config.applyEnvironment(environment)
        return config
    }

    /// The error `load` gives, or nil.
    private func loadError(_ text: String, environment: [String: String] = [:]) -> FieldError? {
        do throws(FieldError) { _ = try load(text, environment: environment) } catch { return error }
        return nil
    }

    @Test func redisBlockIsReadWithItsDefaults() throws {
        #expect(try load("{}").redis == nil)
        let full = try #require(
            try load(
                #"{"redis": {"url": "redis://cache:6380/2", "connect_timeout_seconds": 0.5, "command_timeout_seconds": 1, "key_prefix": "app1:"}}"#
            ).redis)
        #expect(
            full
                == RedisSettings(
                    url: "redis://cache:6380/2", connectTimeoutSeconds: 0.5, commandTimeoutSeconds: 1,
                    keyPrefix: "app1:"))
        let least = try #require(try load(#"{"redis": {"url": "redis://cache"}}"#).redis)
        #expect(least.connectTimeoutSeconds == 2)
        #expect(least.commandTimeoutSeconds == 2)
        #expect(least.keyPrefix == "usher:")
        #expect(least.password == nil)
        #expect(try least.endpoint() == RedisEndpoint(host: "cache", port: 6379))
        // A redis block alone changes no backend.
        #expect(
            try load(#"{"redis": {"url": "redis://cache"}, "queues": {"q": {}}}"#).declared[.queues]?[0].backend
                == .memory)
    }

    @Test func redisURLFromTheEnvironment() throws {
        let file = #"{"redis": {"url": "redis://file-host:6379", "key_prefix": "k:"}}"#
        let overridden = try #require(try load(file, environment: ["USHER_REDIS_URL": "redis://env-host:7000/3"]).redis)
        #expect(overridden.url == "redis://env-host:7000/3")
        #expect(overridden.keyPrefix == "k:")
        // Alone, it makes a redis block with the defaults.
        let alone = try #require(try load("{}", environment: ["USHER_REDIS_URL": "redis://env-host"]).redis)
        #expect(alone == RedisSettings(url: "redis://env-host"))
        // Set but empty: as if unset.
        #expect(try load(file, environment: ["USHER_REDIS_URL": ""]).redis?.url == "redis://file-host:6379")
        #expect(try load("{}", environment: ["USHER_REDIS_URL": ""]).redis == nil)
        let bad = loadError(file, environment: ["USHER_REDIS_URL": "rediss://user:hunter2@env-host"])
        #expect(bad?.field == "USHER_REDIS_URL")
        #expect(bad?.message.contains("rediss://") == true)
        #expect(loadError("{}", environment: ["USHER_REDIS_URL": "http://env-host"])?.field == "USHER_REDIS_URL")
    }

    @Test func passwordComesFromPasswordEnv() throws {
        let file = #"{"redis": {"url": "redis://:in-url@cache", "password_env": "CACHE_PASSWORD"}}"#
        let redis = try #require(try load(file, environment: ["CACHE_PASSWORD": "from-env"]).redis)
        #expect(redis.passwordEnv == "CACHE_PASSWORD")
        #expect(redis.password == "from-env")
        #expect(try redis.endpoint().password == "from-env")
        for environment in [[:], ["CACHE_PASSWORD": ""], ["OTHER": "x"]] {
            let missing = try #require(loadError(file, environment: environment))
            #expect(missing.field == "redis.password_env")
            #expect(missing.message.contains("CACHE_PASSWORD"))
            #expect(
                missing.description
                    == "redis.password_env: names the environment variable CACHE_PASSWORD, which is not set or empty")
        }
        // With USHER_REDIS_URL in place of the file's URL, the password is still read.
        let both = try load(
            file, environment: ["CACHE_PASSWORD": "from-env", "USHER_REDIS_URL": "redis://other"])
        #expect(try both.redis?.endpoint() == RedisEndpoint(host: "other", password: "from-env"))
        #expect(try load(#"{"redis": {"url": "redis://:in-url@cache"}}"#).redis?.endpoint().password == "in-url")
    }

    @Test func backendsAreTakenOutOfTheDeclarations() throws {
        let text = """
            {"redis": {"url": "redis://cache"},
             "queues": {"mem": {"capacity": 1, "backend": "memory"}, "shared": {"capacity": 2, "backend": "redis"},
                        "plain": {"capacity": 3}, "empty": null},
             "machines": {"m": {"definition": "player", "backend": "redis"}, "n": {"definition": "player"}},
             "pools": {"p": {"backend": "redis", "elements": ["a"]}, "o": {"elements": ["b"]}},
             "pipelines": {"pl": {"backend": "redis"}}}
            """
        let c = try load(text)
        #expect(c.defaultBackend == .memory)
        let queues = try #require(c.declared[.queues])
        // By name: Foundation's parser hands members over sorted.
        #expect(queues.map(\.name) == ["empty", "mem", "plain", "shared"])
        #expect(queues.map(\.backend) == [.memory, .memory, .memory, .redis])
        #expect(
            queues.map(\.config) == [
                .object([]), try JSONValue.parse(#"{"capacity": 1}"#), try JSONValue.parse(#"{"capacity": 3}"#),
                try JSONValue.parse(#"{"capacity": 2}"#),
            ])
        #expect(c.declared[.machines]?.map(\.backend) == [.redis, .memory])
        #expect(c.declared[.machines]?[0].config == (try JSONValue.parse(#"{"definition": "player"}"#)))
        #expect(c.declared[.pools]?.map(\.backend) == [.memory, .redis])
        #expect(c.declared[.pools]?[1].config == (try JSONValue.parse(#"{"elements": ["a"]}"#)))
        #expect(c.declared[.pipelines]?.map(\.backend) == [.redis])
        // Each kind's reader, which refuses unknown members, accepts what is handed on. The Redis-backed
        // queue, machine, pool and pipeline are created once Redis answers (serving), not here.
        let app = try UsherApp(config: c, logger: Logger(level: .error))
        #expect(app.registry.list(.queues).count == 3)
        #expect(app.registry.list(.machines).map(\.name) == ["n"])
        #expect(app.registry.list(.pools).map(\.name) == ["o"])
    }

    @Test func defaultBackendFillsInWhatIsNotNamed() throws {
        let c = try load(
            """
            {"redis": {"url": "redis://cache"}, "default_backend": "redis",
             "queues": {"a": {}, "b": {"backend": "memory"}, "c": {"backend": null}},
             "windows": {"w": {}}, "pipelines": {"l": {}}, "machines": {"m": {}}}
            """)
        #expect(c.defaultBackend == .redis)
        #expect(c.declared[.queues]?.map(\.backend) == [.redis, .memory, .redis])
        #expect(c.declared[.windows]?[0].backend == .redis)
        #expect(c.declared[.pipelines]?[0].backend == .redis)
        #expect(c.declared[.machines]?[0].backend == .redis)
        #expect(try load(#"{"default_backend": "memory"}"#).defaultBackend == .memory)
    }

    @Test func redisBackendNeedsARedisBlock() throws {
        let suffix = #": "redis" needs a top-level redis block (or USHER_REDIS_URL)"#
        #expect(
            loadError(#"{"queues": {"deploys": {"capacity": 1, "backend": "redis"}}}"#)?.description
                == "queues.deploys.backend" + suffix)
        #expect(loadError(#"{"default_backend": "redis"}"#)?.description == "default_backend" + suffix)
        #expect(
            loadError(#"{"default_backend": "redis", "queues": {"q": {}}}"#)?.description == "default_backend" + suffix)
        #expect(loadError(#"{"machines": {"m": {"backend": "redis"}}}"#)?.field == "machines.m.backend")
        #expect(loadError(#"{"pipelines": {"a": {}, "b": {"backend": "redis"}}}"#)?.field == "pipelines.b.backend")
        // USHER_REDIS_URL is as good as a block.
        let env = ["USHER_REDIS_URL": "redis://127.0.0.1:6390"]
        #expect(loadError(#"{"default_backend": "redis", "queues": {"q": {}}}"#, environment: env) == nil)
        #expect(loadError(#"{"queues": {"q": {"backend": "redis"}}}"#, environment: env) == nil)
        // Memory everywhere needs no block.
        #expect(loadError(#"{"default_backend": "memory", "queues": {"q": {"backend": "memory"}}}"#) == nil)
    }

    @Test func badBackendAndRedisValuesNameTheField() {
        let allowed = #"must be "memory" or "redis""#
        #expect(loadError(#"{"queues": {"q": {"backend": "disk"}}}"#)?.description == "queues.q.backend: " + allowed)
        #expect(loadError(#"{"windows": {"w": {"backend": 1}}}"#)?.description == "windows.w.backend: " + allowed)
        #expect(loadError(#"{"machines": {"m": {"backend": "Redis"}}}"#)?.field == "machines.m.backend")
        #expect(loadError(#"{"default_backend": "disk"}"#)?.description == "default_backend: " + allowed)
        #expect(loadError(#"{"redis": "redis://cache"}"#)?.field == "redis")
        #expect(loadError(#"{"redis": {}}"#)?.description == "redis.url: is required")
        #expect(loadError(#"{"redis": {"url": "rediss://cache"}}"#)?.field == "redis.url")
        #expect(loadError(#"{"redis": {"url": "redis://cache:0"}}"#)?.field == "redis.url")
        #expect(loadError(#"{"redis": {"url": "redis://cache", "pasword_env": "X"}}"#)?.field == "redis.pasword_env")
        #expect(loadError(#"{"redis": {"url": "redis://c", "password_env": ""}}"#)?.field == "redis.password_env")
        #expect(loadError(#"{"redis": {"url": "redis://c", "key_prefix": 5}}"#)?.field == "redis.key_prefix")
        #expect(
            loadError(#"{"redis": {"url": "redis://c", "command_timeout_seconds": 0}}"#)?.field
                == "redis.command_timeout_seconds")
        #expect(
            loadError(#"{"redis": {"url": "redis://c", "connect_timeout_seconds": "2"}}"#)?.field
                == "redis.connect_timeout_seconds")
    }

    @Test func thePasswordIsNeverInAnError() {
        let secret = "s3cr3t-Pa55"
        let env = ["CACHE_PASSWORD": secret]
        let cases: [(text: String, environment: [String: String])] = [
            (#"{"redis": {"url": "redis://u:\#(secret)@cache:99999"}}"#, [:]),
            (#"{"redis": {"url": "rediss://u:\#(secret)@cache"}}"#, [:]),
            (#"{"redis": {"url": "redis://u:\#(secret)@cache/db"}}"#, [:]),
            (#"{"redis": {"url": "redis://u:\#(secret)"}}"#, [:]),
            (#"{"redis": {"url": "redis://u:\#(secret)@[::1"}}"#, [:]),
            (#"{"redis": {"url": "redis://\#(secret)@cache"}}"#, [:]),
            ("{}", ["USHER_REDIS_URL": "rediss://:\(secret)@cache"]),
            ("{}", ["USHER_REDIS_URL": "redis://:\(secret)@cache:port"]),
            ("{}", ["USHER_REDIS_URL": "http://:\(secret)@cache"]),
            (
                #"{"redis": {"url": "redis://c", "password_env": "CACHE_PASSWORD"}, "queues": {"q": {"backend": "x"}}}"#,
                env
            ),
            (#"{"redis": {"url": "redis://c", "password_env": "CACHE_PASSWORD"}, "port": -1}"#, env),
            (
                #"{"redis": {"url": "redis://c", "password_env": "CACHE_PASSWORD"}}"#,
                ["USHER_PORT": "x"].merging(env) { a, _ in a }
            ),
        ]
        for (text, environment) in cases {
            let error = loadError(text, environment: environment)
            #expect(error != nil, "\(text) \(environment)")
            #expect(error?.description.contains(secret) == false, "\(error?.description ?? "")")
            #expect(error?.description.contains("Pa55") == false)
        }
    }

    @Test func shippedConfigIsValid() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let c = try UsherConfig.load(path: root.appendingPathComponent("Config/usher.json").path, environment: [:])
        #expect(c.host == "127.0.0.1")
        #expect(c.port == 8080)
        #expect(c.declared[.queues]?.isEmpty == false)
    }
}

/// The built `usher` binary: a bad config exits 2 before binding, naming the field.
@Suite struct CommandLineTests {
    static let binary = usherBinary

    private func run(_ arguments: [String], environment: [String: String] = [:]) throws -> (Int32, String) {
        let p = Process()
        p.executableURL = Self.binary
        p.arguments = arguments
        p.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: CommandLineTests.binary.path)))
    func badConfigExitsTwoNamingTheField() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("usher-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let bad = dir.appendingPathComponent("bad.json")
        try Data(#"{"queues": {"q": {"capactiy": 2}}}"#.utf8).write(to: bad)
        let (status, output) = try run(["--config", bad.path])
        #expect(status == 2)
        #expect(output.contains("queues.q.capactiy"))
        let (checkStatus, _) = try run(["check-config", bad.path])
        #expect(checkStatus == 2)
        let good = dir.appendingPathComponent("good.json")
        try Data(#"{"queues": {"q": {"capacity": 2}}}"#.utf8).write(to: good)
        #expect(try run(["check-config", good.path]).0 == 0)
        let (envStatus, envOutput) = try run(["check-config", good.path], environment: ["USHER_PORT": "x"])
        #expect(envStatus == 2)
        #expect(envOutput.contains("USHER_PORT"))
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: CommandLineTests.binary.path)))
    func sigtermStopsGracefullyWithExitZero() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("usher-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let config = dir.appendingPathComponent("usher.json")
        try Data(#"{"queues": {"q": {"capacity": 0}}, "shutdown_grace_seconds": 5}"#.utf8).write(to: config)
        let p = Process()
        p.executableURL = Self.binary
        p.arguments = ["--config", config.path]
        p.environment = ["USHER_PORT": "0", "USHER_LOG_LEVEL": "debug"]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        // The first log line says where it listens.
        var line = Data()
        while !line.contains(0x0A) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        let first = try #require(String(decoding: line, as: UTF8.self).split(separator: "\n").first)
        let log = try #require(try JSONSerialization.jsonObject(with: Data(first.utf8)) as? [String: Any])
        #expect(log["msg"] as? String == "listening")
        let address = try #require(log["address"] as? String)
        let port = try #require(UInt16(address.split(separator: ":").last ?? ""))
        #expect(try TestHTTPClient.once(port: port, "GET", "/readyz").status == 200)
        // A parked long-poll is answered 503 when the signal comes.
        let parked = TestHTTPClient(port: port)
        try parked.sendRaw(
            Data("POST /v1/queues/q/visitors?wait=30 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}".utf8))
        usleep(200_000)
        let started = Date()
        p.terminate()  // SIGTERM
        #expect(try parked.readResponse().status == 503)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
        #expect(p.terminationReason == .exit)
        #expect(Date().timeIntervalSince(started) < 5)
        let rest = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(rest.contains("\"msg\":\"shutting down\""))
        #expect(rest.contains("\"msg\":\"stopped\""))
        // At debug, every answered request has an access-log line, a long-poll once it ends.
        #expect(rest.contains(#""method":"GET","msg":"request","path":"/readyz","route":"/readyz","seconds":"#))
        #expect(rest.contains(#""path":"/v1/queues/q/visitors","route":"/v1/queues/{name}/visitors","seconds":"#))
        #expect(rest.contains(#""status":503"#))
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: CommandLineTests.binary.path)))
    func versionAndHelpExitZero() throws {
        let (versionStatus, version) = try run(["--version"])
        #expect(versionStatus == 0)
        #expect(version.hasPrefix("usher "))
        let (helpStatus, help) = try run(["--help"])
        #expect(helpStatus == 0)
        #expect(help.contains("usher health URL"))
        #expect(help.contains("check-config"))
        #expect(try run(["--bogus"]).0 == 2)
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: CommandLineTests.binary.path)))
    func healthExitsZeroWhenReadyAndOneOtherwise() throws {
        let p = Process()
        p.executableURL = Self.binary
        // No config file: the probe must not need one either.
        p.arguments = []
        p.currentDirectoryURL = FileManager.default.temporaryDirectory
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
        var line = Data()
        while !line.contains(0x0A) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        let first = try #require(String(decoding: line, as: UTF8.self).split(separator: "\n").first)
        let log = try #require(try JSONSerialization.jsonObject(with: Data(first.utf8)) as? [String: Any])
        let address = try #require(log["address"] as? String)
        let port = try #require(UInt16(address.split(separator: ":").last ?? ""))

        // Ready: the base URL, with a trailing slash, or naming /readyz itself.
        for url in ["http://127.0.0.1:\(port)", "http://127.0.0.1:\(port)/", "http://localhost:\(port)/readyz"] {
            let (status, output) = try run(["health", url])
            #expect(status == 0, "\(url): \(output)")
            #expect(output.contains("ready: "))
        }
        // A server that answers, but not 200 (no such route): not ready.
        let (notFound, notFoundOutput) = try run(["health", "http://127.0.0.1:\(port)/nope"])
        #expect(notFound == 1)
        #expect(notFoundOutput.contains("answered 404"))

        // A closed port: the server's own, once it has stopped.
        p.terminate()
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
        let (closed, closedOutput) = try run(["health", "http://127.0.0.1:\(port)"])
        #expect(closed == 1)
        #expect(closedOutput.contains("not ready"))
        // A URL it cannot use; no URL at all is a usage error.
        #expect(try run(["health", "https://127.0.0.1:\(port)"]).0 == 1)
        #expect(try run(["health"]).0 == 2)
    }
}
