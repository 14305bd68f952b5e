import Foundation
import HTTPTestClient

@testable import HTTPServer
@testable import UsherAPI
@testable import UsherCore

/// The real server on port 0 with a given config, for live tests.
final class LiveServer: Sendable {
    let app: UsherApp
    let server: HTTPServer
    var port: UInt16 { server.port }

    /// Starts Usher with `config` (JSON text of a config file); port forced to 0.
    convenience init(_ configJSON: String = "{}", clock: any UsherClock = SystemClock()) throws {
        try self.init(config: try UsherConfig.parse(try JSONValue.parse(configJSON)), clock: clock)
    }

    /// Starts Usher with a loaded config; port forced to 0.
    init(config: UsherConfig, clock: any UsherClock = SystemClock()) throws {
        var config = config
        config.port = 0
        config.logLevel = .error
        app = try UsherApp(config: config, clock: clock)
        server = try Service.start(app)
    }

    /// Shuts down as on SIGTERM, so no request is left parked when the daemon stops.
    deinit { _ = Service.shutdown(app, server) }

    /// A new keep-alive client.
    func client() -> TestHTTPClient { TestHTTPClient(port: port) }

    /// One request on a fresh connection.
    func call(_ method: String, _ path: String, _ body: String? = nil, headers: [String: String] = [:]) throws
        -> TestHTTPClient.Response
    {
        try TestHTTPClient.once(port: port, method, path, body: body, headers: headers)
    }

    /// Graceful shutdown as on SIGTERM.
    func shutdown() -> Bool { Service.shutdown(app, server) }
}

/// What a test body needs of an Usher, live (`LiveServer`) or in-process
/// (`AppTester`): helpers take this, so one body runs on either.
protocol UsherUnderTest: Sendable {
    var app: UsherApp { get }
    func call(_ method: String, _ path: String, _ body: String?, headers: [String: String]) throws
        -> TestHTTPClient.Response
    func callAsync(_ method: String, _ path: String, _ body: String?) async throws -> TestHTTPClient.Response
    func inBackground(_ request: @escaping @Sendable () throws -> TestHTTPClient.Response)
        -> @Sendable () -> TestHTTPClient.Response?
    func untilParked(_ n: Int)
    func shutdown() -> Bool
}

extension UsherUnderTest {
    /// One request without headers.
    func call(_ method: String, _ path: String, _ body: String? = nil) throws -> TestHTTPClient.Response {
        try call(method, path, body, headers: [:])
    }

    /// `callAsync` without a body.
    func callAsync(_ method: String, _ path: String) async throws -> TestHTTPClient.Response {
        try await callAsync(method, path, nil)
    }
}

extension LiveServer: UsherUnderTest {}
extension AppTester: UsherUnderTest {}
