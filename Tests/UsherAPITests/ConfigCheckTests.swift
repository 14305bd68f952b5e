import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import UsherAPI
@testable import UsherCore

/// `usher check-config` runs what start-up runs short of binding: the same bad
/// configs fail both, with the same message.
@Suite struct ConfigCheckTests {
    static var binary: URL { CommandLineTests.binary }
    static var built: Bool { FileManager.default.fileExists(atPath: binary.path) }

    private func run(_ arguments: [String], environment: [String: String] = [:]) throws -> (Int32, String) {
        let p = Process()
        p.executableURL = Self.binary
        p.arguments = arguments
        p.environment = ["USHER_PORT": "0"].merging(environment) { _, new in new }
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        // A config that start-up accepts would serve for ever: stop it.
        let watchdog = DispatchWorkItem { if p.isRunning { p.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 10, execute: watchdog)
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        watchdog.cancel()
        return (p.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// The message of a config, read as start-up reads it: the file, then
    /// the resources it declares.
    private func loadError(_ path: String, environment: [String: String] = [:]) -> String? {
        let config: UsherConfig
        do throws(FieldError) { config = try UsherConfig.load(path: path, environment: environment) } catch {
            return error.description
        }
        do throws(APIError) { _ = try UsherApp(config: config, logger: Logger(level: .error)) } catch {
            return error.detail
        }
        return nil
    }

    static let badConfigs: [(name: String, text: String, mention: String)] = [
        ("host", #"{"host": "myhost.local"}"#, "host: must be an IPv4 or IPv6 address"),
        ("comma", "{\n  \"queues\": {\"q\": {\"capacity\": 1,}}\n}", "line 2, column 33: trailing comma"),
        ("duplicate", #"{"port": 1, "port": 2}"#, #"member "port" given twice"#),
        ("array", "[1]", "must hold a JSON object"),
        ("syntax", "{\n \"port\": 80\n \"host\": \"::1\"}", "line 3, column 2"),
        ("tiny", #"{"queues": {"q": {"hold_seconds": 1e-9}}}"#, "queues.q.hold_seconds"),
        (
            "redis", #"{"queues": {"deploys": {"capacity": 1, "backend": "redis"}}}"#,
            #"queues.deploys.backend: "redis" needs a top-level redis block (or USHER_REDIS_URL)"#
        ),
        ("backend", #"{"machines": {"m": {"backend": "disk"}}}"#, #"machines.m.backend: must be "memory" or "redis""#),
        (
            "rediss", #"{"redis": {"url": "rediss://cache:6379"}}"#,
            "redis.url: invalid Redis configuration: rediss:// (TLS) is not supported"
        ),
        (
            "cluster", #"{"redis": {"url": "redis://node-1:7000/2", "cluster": true}}"#,
            "redis.cluster: a Redis Cluster has only database 0; the URL names database 2"
        ),
    ]

    @Test func sharedLoadRejectsWhatStartUpRejects() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        for bad in Self.badConfigs {
            let file = dir.appendingPathComponent("\(bad.name).json")
            try Data(bad.text.utf8).write(to: file)
            let message = loadError(file.path)
            #expect(message?.contains(bad.mention) == true, "\(bad.name): \(message ?? "accepted")")
        }
        #expect(
            loadError(dir.appendingPathComponent("absent.json").path)
                == "cannot read config file \(dir.path)/absent.json: no such file or directory")
        #expect(loadError(dir.path)?.hasSuffix(": is a directory") == true)
        let good = dir.appendingPathComponent("good.json")
        try Data("{}".utf8).write(to: good)
        #expect(loadError(good.path, environment: ["USHER_HOST": "example.org"])?.hasPrefix("USHER_HOST:") == true)
        #expect(loadError(good.path, environment: ["USHER_HOST": "::1"]) == nil)
        #expect(loadError(good.path, environment: ["USHER_HOST": "localhost"]) == nil)
    }

    @Test(.enabled(if: ConfigCheckTests.built))
    func checkConfigAndStartUpFailAlike() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        for bad in Self.badConfigs {
            let file = dir.appendingPathComponent("\(bad.name).json")
            try Data(bad.text.utf8).write(to: file)
            let (checkStatus, checkOutput) = try run(["check-config", file.path])
            let (startStatus, startOutput) = try run(["serve", "--config", file.path])
            #expect(checkStatus == 2, "\(bad.name): \(checkOutput)")
            #expect(startStatus == 2, "\(bad.name): \(startOutput)")
            #expect(checkOutput.contains(bad.mention), "\(bad.name): \(checkOutput)")
            #expect(checkOutput == startOutput)
        }
        let good = dir.appendingPathComponent("good.json")
        try Data(#"{"queues": {"q": {}}}"#.utf8).write(to: good)
        let (status, output) = try run(["check-config", good.path])
        #expect(status == 0)
        #expect(output == "config ok: \(good.path)\n")
        #expect(try run(["--help"]).1.contains("usher [serve]"))
    }

    /// A loopback port that listens and never accepts: any connection made
    /// to it waits in the backlog, where `connected()` finds it.
    private final class Listener {
        let fd: Int32
        let port: Int
        init() throws {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
                }
            }
            guard bound, listen(fd, 16) == 0, fcntl(fd, F_SETFL, O_NONBLOCK) == 0 else {
                close(fd)
                throw CocoaError(.fileReadUnknown)
            }
            self.fd = fd
            port = Int(UInt16(bigEndian: address.sin_port))
        }
        deinit { close(fd) }

        /// Whether anybody has connected.
        func connected() -> Bool {
            let client = accept(fd, nil, nil)
            if client >= 0 { close(client) }
            return client >= 0
        }
    }

    @Test(.enabled(if: ConfigCheckTests.built))
    func checkConfigChecksRedisWithoutConnecting() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let redis = try Listener()
        let url = "redis://:url-secret@127.0.0.1:\(redis.port)/1"
        func check(_ text: String, _ environment: [String: String] = [:]) throws -> (Int32, String) {
            let file = dir.appendingPathComponent("usher.json")
            try Data(text.utf8).write(to: file)
            return try run(["check-config", file.path], environment: environment)
        }
        let good = """
            {"redis": {"url": "\(url)", "password_env": "REDIS_PW", "key_prefix": "app:"},
             "default_backend": "redis", "queues": {"deploys": {"capacity": 1}, "local": {"backend": "memory"}},
             "machines": {"m": {"definition": "player"}}}
            """
        let (status, output) = try check(good, ["REDIS_PW": "env-secret"])
        #expect(status == 0, "\(output)")
        #expect(output.hasPrefix("config ok: "))
        // The environment's URL alone will do.
        let (envStatus, envOutput) = try check(
            #"{"queues": {"deploys": {"backend": "redis"}}}"#, ["USHER_REDIS_URL": url])
        #expect(envStatus == 0, "\(envOutput)")
        // Without the block, the error names the field; without the password, the variable.
        let (bareStatus, bareOutput) = try check(#"{"queues": {"deploys": {"capacity": 1, "backend": "redis"}}}"#)
        #expect(bareStatus == 2)
        #expect(
            bareOutput
                == "usher: config error: queues.deploys.backend: \"redis\" needs a top-level redis block (or USHER_REDIS_URL)\n"
        )
        let (noPasswordStatus, noPasswordOutput) = try check(good)
        #expect(noPasswordStatus == 2)
        #expect(
            noPasswordOutput.contains(
                "redis.password_env: names the environment variable REDIS_PW, which is not set or empty"))
        let (badURLStatus, badURLOutput) = try check(
            good, ["REDIS_PW": "env-secret", "USHER_REDIS_URL": "rediss://:url-secret@h"])
        #expect(badURLStatus == 2)
        #expect(badURLOutput.contains("USHER_REDIS_URL: invalid Redis configuration: rediss://"))
        #expect(!(output + envOutput + bareOutput + noPasswordOutput + badURLOutput).contains("secret"))
        // Nothing above connected to the server the config names.
        #expect(!redis.connected())
    }

    @Test func strictJSONInBodiesStoresNothing() throws {
        let s = try AppTester(#"{"queues": {"q": {}}}"#)
        let cases: [(String, String, String, String)] = [
            ("PUT", "/v1/queues/new", #"{"capacity": 2,}"#, "line 1, column 15: trailing comma"),
            ("PUT", "/v1/queues/new", #"{"capacity": 2, "capacity": 3}"#, #"member "capacity" given twice"#),
            ("POST", "/v1/queues/q/visitors", #"{"id": "a", "id": "b"}"#, "given twice"),
            ("POST", "/v1/queues/q/visitors", "{\"key\": \"k\",\n}", "line 1, column 12: trailing comma"),
            ("PATCH", "/v1/queues/q", #"{"opposites": [["a", "b"],]}"#, "trailing comma"),
        ]
        for (method, path, body, mention) in cases {
            let r = try s.call(method, path, body)
            #expect(r.status == 400, "\(method) \(path) \(body)")
            #expect(r.code == "bad_request")
            #expect((r.json["detail"] as? String)?.contains(mention) == true, "\(r.json)")
        }
        #expect(try s.call("GET", "/v1/queues/new").status == 404)
        let list = try s.call("GET", "/v1/queues").json["queues"] as? [[String: Any]]
        #expect(list?.count == 1)
        #expect(list?.first?["holding"] as? Int == 0)
        #expect(list?.first?["waiting"] as? Int == 0)
        let q = try s.call("GET", "/v1/queues/q")
        #expect(((q.json["config"] as? [String: Any])?["opposites"] as? [Any])?.isEmpty == true)
    }

    @Test func durationsUnderTenMillisecondsAre400NamingTheField() throws {
        let s = try AppTester(
            """
            {"queues": {"q": {}}, "windows": {"w": {}}, "pools": {"p": {"elements": [{"id": "e"}]}},
             "pipelines": {"l": {}}}
            """)
        let machine =
            #"{"initial": "A", "transitions": [{"event": "go", "from": "A", "to": "A"}], "timeouts": [{"state": "A", "after_seconds": 1e-9, "event": "go"}]}"#
        let cases: [(String, String, String, String)] = [
            ("PUT", "/v1/queues/new", #"{"hold_seconds": 1e-9}"#, "hold_seconds"),
            ("PATCH", "/v1/queues/q", #"{"hold_seconds": 0.005}"#, "hold_seconds"),
            ("POST", "/v1/queues/q/visitors", #"{"delay_seconds": 0.001}"#, "delay_seconds"),
            ("POST", "/v1/queues/q/visitors", #"{"hold_seconds": 0.009}"#, "hold_seconds"),
            ("PUT", "/v1/windows/new", #"{"display_seconds": 1e-9}"#, "display_seconds"),
            ("POST", "/v1/windows/w/show", #"{"display_seconds": 0.001}"#, "display_seconds"),
            ("PUT", "/v1/pools/new", #"{"elements": [{"id": "e"}], "lease_seconds": 1e-9}"#, "lease_seconds"),
            ("POST", "/v1/pools/p/fetch", #"{"lease_seconds": 0.001}"#, "lease_seconds"),
            ("PUT", "/v1/pipelines/new", #"{"ack_seconds": 1e-9}"#, "ack_seconds"),
            ("POST", "/v1/pipelines/l/items", #"{"payload": 1, "delay_seconds": 0.001}"#, "delay_seconds"),
            ("PUT", "/v1/machines/new", machine, "timeouts[0].after_seconds"),
        ]
        for (method, path, body, field) in cases {
            let r = try s.call(method, path, body)
            #expect(r.status == 400, "\(method) \(path) \(body): \(r.status)")
            #expect(r.json["field"] as? String == field, "\(method) \(path): \(r.json)")
            #expect((r.json["detail"] as? String)?.contains("0.01") == true, "\(r.json)")
        }
        #expect(try s.call("GET", "/v1/queues/new").status == 404)
        #expect(try s.call("GET", "/v1/machines/new").status == 404)
        // 10 ms itself, and 0 where it means none, are accepted.
        #expect(try s.call("PUT", "/v1/queues/new", #"{"hold_seconds": 0.01}"#).status == 201)
        #expect(try s.call("PUT", "/v1/windows/new", #"{"display_seconds": 0}"#).status == 201)
    }

}
