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

extension TestHTTPClient.Response {
    /// `code` of a problem document.
    var code: String? { json["code"] as? String }
}
