import RedisClient
import UsherCore

extension RedisSettings {
    /// Reads a `redis` object: `url` (required), `password_env`,
    /// `connect_timeout_seconds`, `command_timeout_seconds`, `key_prefix`, `cluster`,
    /// `metrics_timeout_seconds`. Errors name the field (`redis.url`); the URL is checked here too.
    init(json value: JSONValue?, path: String = "redis") throws(FieldError) {
        var reader = try FieldReader(value, path: path)
        guard let url = try reader.string("url") else {
            throw FieldError(field: reader.fieldPath("url"), message: "is required")
        }
        do { _ = try RedisEndpoint(url: url) } catch {
            throw FieldError(field: reader.fieldPath("url"), message: error.description)
        }
        let passwordEnv = try reader.string("password_env")
        if let passwordEnv, passwordEnv.isEmpty || passwordEnv.contains("=") {
            throw FieldError(field: reader.fieldPath("password_env"), message: "must be an environment variable name")
        }
        let connect = try reader.number("connect_timeout_seconds", in: Self.timeoutRange)
        let command = try reader.number("command_timeout_seconds", in: Self.timeoutRange)
        let prefix = try reader.string("key_prefix")
        if let prefix, prefix.utf8.count > 64 {
            throw FieldError(field: reader.fieldPath("key_prefix"), message: "must be at most 64 bytes")
        }
        let cluster = try reader.bool("cluster") ?? false
        if cluster, let problem = Self.clusterProblem(url: url) {
            throw FieldError(field: reader.fieldPath("cluster"), message: problem)
        }
        let metrics = try reader.number("metrics_timeout_seconds", in: Self.metricsTimeoutRange)
        try reader.finish()
        self.init(
            url: url, passwordEnv: passwordEnv,
            connectTimeoutSeconds: connect ?? Self.defaultConnectTimeoutSeconds,
            commandTimeoutSeconds: command ?? Self.defaultCommandTimeoutSeconds,
            keyPrefix: prefix ?? Self.defaultKeyPrefix, cluster: cluster,
            metricsTimeoutSeconds: metrics ?? Self.defaultMetricsTimeoutSeconds)
    }
}
