import Foundation

/// A request as the application sees it: plain Swift values copied out of
/// libmicrohttpd inside its callback, so nothing unsafe leaves this target.
package struct HTTPRequest: Sendable {
    /// The method, e.g. `GET`.
    package var method: String
    /// The path without the query string, percent-decoded by libmicrohttpd.
    package var path: String
    /// Query arguments in the order given.
    package var query: [(name: String, value: String)]
    /// The headers named in `HTTPServer.Configuration.capturedHeaders`,
    /// by lower-cased name.
    package var headers: CapturedHeaders
    /// The whole request body (at most `maxBodyBytes`).
    package var body: Data

    init(
        method: String, path: String, query: [(name: String, value: String)] = [],
        headers: CapturedHeaders = [:], body: Data = Data()
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
    }

    /// The value of a header captured by the server (name in any case).
    package func header(_ name: String) -> String? { headers[name] }
}

/// The few headers the server captures, in a short list: a request has a
/// handful, so a scan beats building and hashing a dictionary per request.
package struct CapturedHeaders: Sendable, ExpressibleByDictionaryLiteral {
    private var entries: [(name: String, value: String)] = []

    init() {}

    package init(dictionaryLiteral elements: (String, String)...) {
        for (name, value) in elements { add(name.lowercased(), value) }
    }

    /// Adds a header; `name` must be lower-case (`RequestHead` refuses repeated ones).
    mutating func add(_ name: String, _ value: String) {
        guard self[name] == nil else { return }
        entries.append((name, value))
    }

    /// The value of the header `name` (in any case).
    package subscript(name: String) -> String? {
        for entry in entries where entry.name.utf8.count == name.utf8.count {
            let same = entry.name.utf8.elementsEqual(name.utf8) { $0 == ($1 >= 0x41 && $1 <= 0x5A ? $1 | 0x20 : $1) }
            if same { return entry.value }
        }
        return nil
    }

    /// How many headers were captured.
    var count: Int { entries.count }
}
