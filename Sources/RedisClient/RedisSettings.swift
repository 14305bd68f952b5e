import Foundation

/// Where a Redis server is and how to log in: the parts of a
/// `redis://[user:password@]host:port/db` URL.
package struct RedisEndpoint: Sendable, Equatable {
    var host: String
    var port: Int
    package var database: Int
    /// The ACL user; nil logs in as `default` (password only).
    package var user: String?
    package var password: String?

    package init(host: String, port: Int = 6379, database: Int = 0, user: String? = nil, password: String? = nil) {
        self.host = host
        self.port = port
        self.database = database
        self.user = user
        self.password = password
    }

    /// Parses `redis://[user:password@]host[:port][/db]`; user and password
    /// may be percent-encoded. `rediss://` is refused: hiredis 0.14 has no TLS.
    package init(url: String) throws(RedisError) {
        func invalid(_ why: String) -> RedisError {
            .invalidConfiguration("\(why) (redis://[user:password@]host:port/db)")
        }
        if url.lowercased().hasPrefix("rediss://") {
            throw .invalidConfiguration(
                "rediss:// (TLS) is not supported: this build's hiredis has no TLS; use redis://")
        }
        guard url.lowercased().hasPrefix("redis://") else { throw invalid("the URL must start with redis://") }
        var rest = Substring(url.dropFirst("redis://".count))
        var user: String?
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let userinfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            guard let colon = userinfo.firstIndex(of: ":") else {
                throw invalid("the user information must be user:password or :password")
            }
            let rawUser = userinfo[..<colon]
            let rawPassword = userinfo[userinfo.index(after: colon)...]
            guard let u = String(rawUser).removingPercentEncoding, let p = String(rawPassword).removingPercentEncoding
            else { throw invalid("bad percent-encoding in the user information") }
            user = u.isEmpty ? nil : u
            password = p.isEmpty ? nil : p
        }
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let path = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
            if !path.isEmpty {
                guard let db = Int(path), (0...65535).contains(db) else {
                    throw invalid("the database must be a number")
                }
                database = db
            }
        }
        var host: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            // An IPv6 address in brackets.
            guard let close = rest.firstIndex(of: "]") else { throw invalid("unclosed [ in the host") }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw invalid("unexpected text after the host") }
                portText = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        guard !host.isEmpty else { throw invalid("the host is missing") }
        var port = 6379
        if let portText {
            guard let p = Int(portText), (1...65535).contains(p) else { throw invalid("the port must be 1 to 65535") }
            port = p
        }
        self.init(host: String(host), port: port, database: database, user: user, password: password)
    }
}

/// The `redis` block of the configuration: the server and the client's timeouts.
/// The API's config layer reads it from JSON (`Sources/UsherAPI/Config/RedisSettings+JSON.swift`).
package struct RedisSettings: Sendable, Equatable {
    /// `redis://[user:password@]host:port/db`.
    package var url: String
    /// Overrides the URL's password; the caller reads it from `password_env`.
    package var password: String?
    /// The name of the environment variable that holds the password.
    package var passwordEnv: String?
    package var connectTimeoutSeconds: Double
    package var commandTimeoutSeconds: Double
    /// Prefixed to every key Usher writes, so several deployments can share a server.
    package var keyPrefix: String
    /// The URL names one node (the seed) of a Redis Cluster: commands go to
    /// the master of their keys' slot. Database 0 only, as Cluster has no other.
    package var cluster: Bool
    /// How long a `GET /metrics` waits for the Redis-backed resources' counts.
    package var metricsTimeoutSeconds: Double

    package static let timeoutRange: ClosedRange<Double> = 0.001...3600
    package static let defaultConnectTimeoutSeconds = 2.0
    package static let defaultCommandTimeoutSeconds = 2.0
    package static let defaultKeyPrefix = "usher:"
    package static let metricsTimeoutRange: ClosedRange<Double> = 0.001...10
    package static let defaultMetricsTimeoutSeconds = 0.25

    package init(
        url: String, password: String? = nil, passwordEnv: String? = nil,
        connectTimeoutSeconds: Double = defaultConnectTimeoutSeconds,
        commandTimeoutSeconds: Double = defaultCommandTimeoutSeconds, keyPrefix: String = defaultKeyPrefix,
        cluster: Bool = false, metricsTimeoutSeconds: Double = defaultMetricsTimeoutSeconds
    ) {
        self.url = url
        self.password = password
        self.passwordEnv = passwordEnv
        self.connectTimeoutSeconds = connectTimeoutSeconds
        self.commandTimeoutSeconds = commandTimeoutSeconds
        self.keyPrefix = keyPrefix
        self.cluster = cluster
        self.metricsTimeoutSeconds = metricsTimeoutSeconds
    }

    /// Why `url` cannot name a cluster node (a database other than 0), or nil.
    package static func clusterProblem(url: String) -> String? {
        guard let endpoint = try? RedisEndpoint(url: url), endpoint.database != 0 else { return nil }
        return "a Redis Cluster has only database 0; the URL names database \(endpoint.database)"
    }

    /// The endpoint to connect to: the URL's, with `password` in place of the URL's when set.
    package func endpoint() throws(RedisError) -> RedisEndpoint {
        var endpoint = try RedisEndpoint(url: url)
        if let password { endpoint.password = password }
        return endpoint
    }
}
