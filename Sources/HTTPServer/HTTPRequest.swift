import Foundation

/// A request as the application sees it: plain Swift values copied out of
/// libmicrohttpd inside its callback, so nothing unsafe leaves this target.
public struct HTTPRequest: Sendable {
    /// The method, e.g. `GET`.
    public var method: String
    /// The path without the query string, percent-decoded by libmicrohttpd.
    public var path: String
    /// Query arguments in the order given.
    public var query: [(name: String, value: String)]
    /// The headers named in `HTTPServer.Configuration.capturedHeaders`,
    /// keyed by lower-cased name.
    public var headers: [String: String]
    /// The whole request body (at most `maxBodyBytes`).
    public var body: Data

    public init(
        method: String, path: String, query: [(name: String, value: String)] = [],
        headers: [String: String] = [:], body: Data = Data()
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
    }

    /// The value of a header captured by the server (name in any case).
    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}
