import Foundation
import HTTPTestClient
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

    @Test func strictJSONInBodiesStoresNothing() throws {
        let s = try LiveServer(#"{"queues": {"q": {}}}"#)
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
        let s = try LiveServer(
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
