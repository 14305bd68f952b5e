import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import UsherAPI
@testable import UsherCore

/// Pipelines' file sources: where `data_dir` is, what creation refuses, and
/// when `last_error` clears.
@Suite struct FileSourceLiveTests {
    /// A relative `data_dir` is found next to the config file, not in the working directory.
    @Test func aRelativeDataDirIsResolvedAgainstTheConfigFilesFolder() async throws {
        let dir = try temporaryDirectory("filesource")
        defer { try? FileManager.default.removeItem(at: dir) }
        try FileManager.default.createDirectory(
            at: dir.appendingPathComponent("feeds"), withIntermediateDirectories: true)
        try #"{"n": 1}"#.write(to: dir.appendingPathComponent("feeds/in.ndjson"), atomically: true, encoding: .utf8)
        let file = dir.appendingPathComponent("usher.json")
        try #"""
        {"data_dir": "feeds", "pipelines": {"p": {"source": {"kind": "file", "path": "in.ndjson"}}}}
        """#.write(to: file, atomically: true, encoding: .utf8)
        let config = try UsherConfig.load(path: file.path, environment: [:])
        #expect(config.dataDir == dir.appendingPathComponent("feeds").path)
        let s = try AppTester(config: config)
        var taken: TestHTTPClient.Response?
        let deadline = Date().addingTimeInterval(30)
        while taken?.status != 200 && Date() < deadline {
            taken = try await s.callAsync("POST", "/v1/pipelines/p/take?wait=5")
        }
        let item = (taken?.json["items"] as? [[String: Any]])?.first
        #expect((item?["payload"] as? [String: Any])?["n"] as? Int == 1)
    }

    /// An absolute `data_dir` is kept as written; no file: the working directory.
    @Test func anAbsoluteDataDirIsKept() throws {
        let dir = try temporaryDirectory("filesource")
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("usher.json")
        try #"{"data_dir": "/srv/usher-data"}"#.write(to: file, atomically: true, encoding: .utf8)
        #expect(try UsherConfig.load(path: file.path, environment: [:]).dataDir == "/srv/usher-data")
        #expect(try UsherConfig.load(path: nil, environment: [:]).dataDir == "data")
    }

    /// A file source whose `data_dir` does not exist is refused at creation.
    @Test func aMissingDataDirIsRefusedAtCreation() async throws {
        let dir = try temporaryDirectory("filesource")
        defer { try? FileManager.default.removeItem(at: dir) }
        let missing = dir.appendingPathComponent("nope").path
        let s = try AppTester(#"{"data_dir": "\#(missing)"}"#)
        let r = try await s.callAsync("PUT", "/v1/pipelines/p", #"{"source": {"kind": "file", "path": "in.ndjson"}}"#)
        #expect(r.status == 400)
        #expect(r.json["code"] as? String == "bad_request")
        #expect(r.json["field"] as? String == "source.path")
        #expect((r.json["detail"] as? String)?.contains("data_dir") == true)
        #expect(try await s.callAsync("GET", "/v1/pipelines/p").status == 404)
        // Without a source the pipeline does not need data_dir.
        #expect(try await s.callAsync("PUT", "/v1/pipelines/q", "{}").status == 201)
        // Declared in the config file, it stops start-up.
        #expect(throws: (any Error).self) {
            _ = try AppTester(
                #"""
                {"data_dir": "\#(missing)", "pipelines": {"p": {"source": {"kind": "file", "path": "in.ndjson"}}}}
                """#)
        }
    }

    /// `last_error` says why the file cannot be read until a pull succeeds.
    @Test func lastErrorClearsOnceAPullSucceeds() async throws {
        let dir = try temporaryDirectory("filesource")
        defer { try? FileManager.default.removeItem(at: dir) }
        let s = try AppTester(#"{"data_dir": "\#(dir.path)"}"#)
        #expect(
            try await s.callAsync("PUT", "/v1/pipelines/p", #"{"source": {"kind": "file", "path": "later.ndjson"}}"#)
                .status
                == 201)
        #expect(try await poll { try await source(s)["last_error"] is String })
        try #"{"n": 1}"#.write(to: dir.appendingPathComponent("later.ndjson"), atomically: true, encoding: .utf8)
        #expect(try await poll { try await source(s)["pulled_total"] as? Int == 1 })
        let after = try await source(s)
        #expect(after["last_error"] == nil || after["last_error"] is NSNull)
        #expect((after["errors_total"] as? Int ?? 0) >= 1)
    }

    // MARK: - Helpers

    private func source(_ s: any UsherUnderTest) async throws -> [String: Any] {
        try await s.callAsync("GET", "/v1/pipelines/p").json["source"] as? [String: Any] ?? [:]
    }

}
