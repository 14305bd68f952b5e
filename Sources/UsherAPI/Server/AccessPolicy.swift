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
        // Captured header names are lower-case already.
        let host = request.headers["host"]
        if let allowedHosts, let host, !Self.isLoopbackHost(host) {
            guard allowedHosts.contains(Self.hostName(host)) else { return .hostNotAllowed(host) }
        }
        if let origin = request.headers["origin"], !allowedOrigins.contains("*"), !allowedOrigins.contains(origin) {
            let own = host.map { ["http://\($0)", "https://\($0)"] } ?? []
            guard own.contains(where: { $0.lowercased() == origin.lowercased() }) else {
                return .originNotAllowed(origin)
            }
        }
        if let token, access == .token || access == .metrics && metricsRequireToken,
            !Self.authorized(request.headers["authorization"], token: token)
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
        var name = name
        return name.withUTF8 { isLoopbackName($0[...]) }
    }

    /// `isLoopback` of a `Host` value's name, over its bytes (every request
    /// asks, so no string is made).
    static func isLoopbackHost(_ host: String) -> Bool {
        var host = host
        return host.withUTF8 { bytes in
            if bytes.first == UInt8(ascii: "[") {
                guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { return false }
                return isLoopbackName(bytes[1..<close])
            }
            let end = bytes.firstIndex(of: UInt8(ascii: ":")) ?? bytes.endIndex
            return isLoopbackName(bytes[..<end])
        }
    }

    private static func isLoopbackName(_ name: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        func equalsIgnoringCase(_ bytes: Slice<UnsafeBufferPointer<UInt8>>, _ literal: StaticString) -> Bool {
            guard bytes.count == literal.utf8CodeUnitCount else { return false }
            return zip(bytes, UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
                .allSatisfy { ($0 | 0x20) == $1 }
        }
        if equalsIgnoringCase(name, "localhost") || equalsIgnoringCase(name, "::1") { return true }
        if name.count > 10, equalsIgnoringCase(name[(name.endIndex - 10)...], ".localhost") { return true }
        // 127.a.b.c, each part 0-255
        var parts = 0
        var value = 0
        var digits = 0
        var first = -1
        for byte in name {
            if byte == UInt8(ascii: ".") {
                guard digits > 0, value <= 255 else { return false }
                if parts == 0 { first = value }
                parts += 1
                value = 0
                digits = 0
            } else if byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"), digits < 3 {
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
                digits += 1
            } else {
                return false
            }
        }
        return parts == 3 && digits > 0 && value <= 255 && first == 127
    }
}
