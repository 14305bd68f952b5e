import HTTPServer

/// Who may use a route: decided by the route that matched (or, for a path no
/// route has, by its first segment), never by a prefix of the raw path.
enum RouteAccess: Sendable {
    /// Probes, the dashboard page, the OpenAPI document.
    case open
    /// `GET /metrics`: open unless `metrics_require_token` is set.
    case metrics
    /// Everything under `/v1`: the token when one is set.
    case token

    /// The access of the route at `template` (or of an unmatched canonical path).
    init(path: String) {
        if path == "/v1" || path.hasPrefix("/v1/") {
            self = .token
        } else if path == "/metrics" {
            self = .metrics
        } else {
            self = .open
        }
    }
}

/// The checks every request passes before its route runs: `Host` (against
/// DNS rebinding), `Origin` (against cross-site requests from a browser), and
/// the bearer token.
struct AccessPolicy: Sendable {
    private let token: String?
    private let metricsRequireToken: Bool
    private let allowedOrigins: Set<String>
    /// Nil: any host is accepted.
    private let allowedHosts: Set<String>?

    init(config: UsherConfig) {
        token = config.authToken
        metricsRequireToken = config.metricsRequireToken
        allowedOrigins = Set(config.allowedOrigins)
        if config.allowedHosts.contains("*") {
            allowedHosts = nil
        } else if Self.isLoopback(config.host) || !config.allowedHosts.isEmpty {
            allowedHosts = Set(config.allowedHosts + [config.host.lowercased()])
        } else {
            allowedHosts = nil
        }
    }

    /// The refusal for `request` at a route of `access`, or nil to go on.
    func refusal(for request: HTTPRequest, access: RouteAccess) -> APIError? {
        let host = request.header("host")
        if let allowedHosts, let host {
            let name = Self.hostName(host)
            guard Self.isLoopback(name) || allowedHosts.contains(name) else {
                return .hostNotAllowed(host)
            }
        }
        if let origin = request.header("origin"), !allowedOrigins.contains("*"), !allowedOrigins.contains(origin) {
            let own = host.map { ["http://\($0)", "https://\($0)"] } ?? []
            guard own.contains(where: { $0.lowercased() == origin.lowercased() }) else {
                return .originNotAllowed(origin)
            }
        }
        if let token, access == .token || access == .metrics && metricsRequireToken,
           !Self.authorized(request.header("authorization"), token: token)
        {
            return .unauthorized()
        }
        return nil
    }

    /// Compares a bearer token in constant time (for equal lengths).
    static func authorized(_ header: String?, token: String) -> Bool {
        guard let header, header.hasPrefix("Bearer ") else { return false }
        let given = Array(header.utf8.dropFirst(7))
        let expected = Array(token.utf8)
        var difference = UInt8(given.count == expected.count ? 0 : 1)
        for i in 0..<expected.count {
            difference |= expected[i] ^ (i < given.count ? given[i] : 0)
        }
        return difference == 0
    }

    /// The name in a `Host` value, lower-cased, without its port (and an
    /// IPv6 literal without its brackets).
    static func hostName(_ host: String) -> String {
        let lower = host.lowercased()
        if lower.hasPrefix("[") {
            return String(lower.dropFirst().prefix { $0 != "]" })
        }
        return String(lower.prefix { $0 != ":" })
    }

    /// `localhost` (and its subdomains, RFC 6761), 127.0.0.0/8 and `::1`.
    static func isLoopback(_ name: String) -> Bool {
        let name = name.lowercased()
        if name == "localhost" || name.hasSuffix(".localhost") || name == "::1" { return true }
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }
}
