import Foundation
import HTTPServer
import RedisClient
import UsherCore

/// The whole configuration: the config file's keys (docs/configuration.md),
/// then the environment's overrides. Every field has its documented default.
package struct UsherConfig: Sendable {
    /// Address to listen on (`USHER_HOST` overrides). Default `127.0.0.1`.
    package var host = "127.0.0.1"
    /// Port to listen on, 0 for any free one (`USHER_PORT` overrides). Default 8080.
    package var port = 8080
    /// Bearer token required on `/v1` (and `/metrics` with
    /// `metricsRequireToken`) when set (`USHER_TOKEN` overrides). Default none.
    var authToken: String?
    /// Whether `GET /metrics` requires the token too. Default false.
    var metricsRequireToken = false
    /// Origins, besides the server's own, whose pages may send requests
    /// (`"*"`: any). Default none.
    var allowedOrigins: [String] = []
    /// Host names accepted in `Host` besides loopback ones (`"*"`: any).
    /// Default none: loopback names only when bound to loopback, any otherwise.
    var allowedHosts: [String] = []
    /// Larger request bodies are answered 413. Default 65536.
    package var maxBodyBytes = 65_536
    /// Cap on every `wait` query parameter, in seconds. Default 30.
    var maxWaitSeconds = 30.0
    /// Cap on resources of all kinds together. Default 1000.
    var maxResources = 1000
    /// Most open HTTP connections. Default 10000.
    var maxConnections = 10_000
    /// Idle HTTP connections are closed after this many seconds. Default 90.
    package var idleTimeoutSeconds = 90
    /// A request head not complete this long after the connection opened
    /// (or its request line arrived) closes the connection. Default 10.
    package var requestHeadTimeoutSeconds = 10.0
    /// A request body not complete this long after its head closes the
    /// connection. Default 30.
    package var requestBodyTimeoutSeconds = 30.0
    /// Most open connections from one client address; 0: no limit. Default 0.
    var maxConnectionsPerIP = 0
    /// Memory libmicrohttpd reserves per connection for the request line,
    /// headers and the response headers (`USHER_CONNECTION_MEMORY_BYTES`
    /// overrides). Requests whose headers do not fit are answered 431.
    /// Default 8192 (libmicrohttpd's own is 32768, nearly all of it resident
    /// once a connection has answered: the cost of a parked long-poll).
    var connectionMemoryBytes = 8192
    /// Most header lines in a request head; more are answered 431. Default 100.
    var maxRequestHeaders = 100
    /// Most query parameters in a request target; more are answered 414. Default 100.
    var maxQueryParameters = 100
    /// Longest time from SIGTERM/SIGINT to exit, in seconds. Default 10.
    var shutdownGraceSeconds = 10.0
    /// Root directory for pipeline file sources. Default `data`; relative to
    /// the config file's folder when one is loaded, else to the working directory.
    var dataDir = "data"
    /// Whether pipeline HTTP sources may reach beyond loopback. Default false.
    var allowRemoteSources = false
    /// `max_json_depth` (500) and `max_pointer_segments` (32): how deep request
    /// bodies and source items may nest, how long a filter's JSON Pointer may be.
    var jsonLimits = JSONLimits()
    /// A machine transaction's timeout when the request gives none, in seconds. Default 30.
    var machineTransactionSeconds = 30.0
    /// The longest timeout a machine transaction may ask for, in seconds. Default 3600.
    var maxMachineTransactionSeconds = 3600.0
    /// Machine definitions by name; `player` is built in (the config may replace it).
    var definitions: [String: MachineDefinition] = ["player": .player]
    /// Resources created at start-up: per kind, `(name, config, backend)` by
    /// name; `config` is the declaration without its `backend`
    /// member, `backend` that member or `defaultBackend`. Each kind's routes
    /// read its config (`ResourceAPI.createDeclared`), so a bad one still
    /// stops start-up before the port is bound.
    var declared: [ResourceKind: [(name: String, config: JSONValue, backend: Backend)]] = [:]
    /// The Redis server shared state lives in (`redis`; `USHER_REDIS_URL`
    /// overrides its URL, or alone makes one with the defaults), with the
    /// password read from `password_env`. Default none.
    var redis: RedisSettings?
    /// The backend of resources that name none, declared or PUT. Default memory.
    var defaultBackend = Backend.memory
    // Memory budget (docs/operations.md "Memory budget").
    /// Most bytes clients may store in all resources together (payloads,
    /// ids, keys, items, history, buffered events); a write beyond it is
    /// answered 507 `storage_full`. Default 268435456 (256 MiB).
    var maxStoredBytes = 256 << 20
    /// Largest answer body: lists end their page early and return
    /// `next_cursor`. Default 8388608 (8 MiB).
    var maxResponseBytes = 8 << 20
    /// Most `GET /v1/events` streams open at once; one more is answered 503
    /// `too_many_subscribers`. Default 1000.
    var maxEventSubscribers = EventLog.defaultMaxSubscribers
    /// Bytes of live events (priced as the storage budget prices them) an
    /// event stream may fall behind before it ends with `event: dropped`.
    /// Default 1048576 (1 MiB).
    var maxEventLagBytes = EventLog.defaultLagLimit
    /// The accepted `max_event_lag_bytes`.
    static let maxEventLagBytesRange = (64 << 10)...(1 << 30)
    /// The accepted `max_stored_bytes`.
    static let maxStoredBytesRange = (1 << 20)...(1 << 40)
    /// The accepted `max_response_bytes`: at least a full request body's worth.
    static let maxResponseBytesRange = (64 << 10)...(1 << 30)

    /// Log level (`USHER_LOG_LEVEL`): debug, info, warn or error. Default info.
    package var logLevel = LogLevel.info
    /// The file's members other than resources, as written: a reload
    /// (SIGHUP) compares them to name the keys that need a restart (`redis`
    /// and `default_backend` among them). Only keys are reported, never values.
    var fileSettings: [(String, JSONValue)] = []

    package init() {}

    /// Reads a config object (usually the file's contents). Unknown keys and
    /// bad values are errors naming the field. What depends on the environment
    /// (the Redis password, whether a `redis` backend has a server) is read
    /// and checked by `applyEnvironment`.
    package static func parse(_ value: JSONValue) throws(FieldError) -> UsherConfig {
        var config = UsherConfig()
        guard case .object(let members) = value else {
            throw FieldError(field: "", message: "the config must be a JSON object")
        }
        config.fileSettings = members.filter { ResourceKind(rawValue: $0.0) == nil }
        var r = try FieldReader(value)
        if let host = try r.string("host") {
            try checkHost(host, field: "host")
            config.host = host
        }
        if let port = try r.int("port", in: 0...65_535) { config.port = port }
        if let token = try r.string("auth_token") {
            config.authToken = try checkedToken(token, field: "auth_token")
        }
        if let v = try r.bool("metrics_require_token") { config.metricsRequireToken = v }
        if let v = try r.array("allowed_origins") { config.allowedOrigins = try strings(v, field: "allowed_origins") }
        if let v = try r.array("allowed_hosts") {
            config.allowedHosts = try strings(v, field: "allowed_hosts").map { $0.lowercased() }
        }
        if let v = try r.int("max_body_bytes", in: 1...(64 << 20)) { config.maxBodyBytes = v }
        if let v = try r.number("max_wait_seconds", in: 0...3600) { config.maxWaitSeconds = v }
        if let v = try r.int("max_resources", in: 1...1_000_000) { config.maxResources = v }
        if let v = try r.int("max_connections", in: 1...1_000_000) { config.maxConnections = v }
        if let v = try r.int("idle_timeout_seconds", in: 1...86_400) { config.idleTimeoutSeconds = v }
        if let v = try r.number("request_head_timeout_seconds", in: 0.5...3600) { config.requestHeadTimeoutSeconds = v }
        if let v = try r.number("request_body_timeout_seconds", in: 0.5...3600) { config.requestBodyTimeoutSeconds = v }
        if let v = try r.int("max_connections_per_ip", in: 0...1_000_000) { config.maxConnectionsPerIP = v }
        if let v = try r.int("connection_memory_bytes", in: connectionMemoryRange) { config.connectionMemoryBytes = v }
        if let v = try r.int("max_request_headers", in: 1...10_000) { config.maxRequestHeaders = v }
        if let v = try r.int("max_query_parameters", in: 1...10_000) { config.maxQueryParameters = v }
        if let v = try r.number("shutdown_grace_seconds", in: 0...3600) { config.shutdownGraceSeconds = v }
        if let v = try r.string("data_dir") {
            guard !v.isEmpty else { throw FieldError(field: "data_dir", message: "must not be empty") }
            config.dataDir = v
        }
        if let v = try r.bool("allow_remote_sources") { config.allowRemoteSources = v }
        if let v = try r.int("max_json_depth", in: JSONLimits.maxDepthRange) { config.jsonLimits.maxDepth = v }
        if let v = try r.int("max_pointer_segments", in: JSONLimits.maxPointerSegmentsRange) {
            config.jsonLimits.maxPointerSegments = v
        }
        if let v = try r.int("max_stored_bytes", in: maxStoredBytesRange) { config.maxStoredBytes = v }
        if let v = try r.int("max_response_bytes", in: maxResponseBytesRange) { config.maxResponseBytes = v }
        if let v = try r.int("max_event_subscribers", in: 1...1_000_000) { config.maxEventSubscribers = v }
        if let v = try r.int("max_event_lag_bytes", in: maxEventLagBytesRange) { config.maxEventLagBytes = v }
        if let v = try r.number("machine_transaction_seconds", in: transactionSecondsRange) {
            config.machineTransactionSeconds = v
        }
        if let v = try r.number("max_machine_transaction_seconds", in: transactionSecondsRange) {
            config.maxMachineTransactionSeconds = v
        }
        if config.machineTransactionSeconds > config.maxMachineTransactionSeconds {
            throw FieldError(
                field: "machine_transaction_seconds",
                message: "must be at most max_machine_transaction_seconds (\(config.maxMachineTransactionSeconds))")
        }
        if let v = r.value("default_backend") { config.defaultBackend = try Backend.parse(v, field: "default_backend") }
        if let v = r.value("redis") { config.redis = try RedisSettings(json: v, path: "redis") }
        if var definitions = try r.object("definitions") {
            for name in definitions.keys {
                let path = definitions.fieldPath(name)
                guard Names.isValid(name) else {
                    throw FieldError(field: path, message: "is not a valid name (^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$)")
                }
                guard let value = definitions.value(name) else {
                    throw FieldError(field: path, message: "must be an object")
                }
                config.definitions[name] = try MachineDefinition.parse(value, path: path)
            }
            try definitions.finish()
        }
        for kind in ResourceKind.allCases {
            guard var resources = try r.object(kind.rawValue) else { continue }
            for name in resources.keys {
                let path = resources.fieldPath(name)
                guard Names.isValid(name) else {
                    throw FieldError(field: path, message: "is not a valid name (^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$)")
                }
                let (resource, backend) = try Backend.split(
                    resources.value(name) ?? .object([]), path: path, otherwise: config.defaultBackend)
                config.declared[kind, default: []].append((name, resource, backend))
            }
            try resources.finish()
        }
        try r.finish()
        if config.declared.values.map(\.count).reduce(0, +) > config.maxResources {
            throw FieldError(
                field: "max_resources",
                message: "the config declares more resources than max_resources (\(config.maxResources))")
        }
        return config
    }

    /// A token is sent in a header: 1–256 visible ASCII characters. An empty
    /// one is refused rather than read as "no token".
    static func checkedToken(_ token: String, field: String) throws(FieldError) -> String {
        guard !token.isEmpty else {
            throw FieldError(field: field, message: "must not be empty (leave it out to run without a token)")
        }
        guard token.utf8.count <= 256, token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw FieldError(field: field, message: "must be 1-256 visible ASCII characters (no spaces)")
        }
        return token
    }

    /// A list of 1–253 character strings without spaces or control characters.
    private static func strings(_ values: [JSONValue], field: String) throws(FieldError) -> [String] {
        var out: [String] = []
        for (i, value) in values.enumerated() {
            guard case .string(let text) = value, !text.isEmpty, text.utf8.count <= 253,
                text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
            else { throw FieldError(field: "\(field)[\(i)]", message: "must be a non-empty string of visible ASCII") }
            out.append(text)
        }
        return out
    }

    /// The accepted `machine_transaction_seconds` and `max_machine_transaction_seconds`.
    static let transactionSecondsRange = Durations.minimumSeconds...Durations.maximumSeconds

    /// The accepted `connection_memory_bytes`: below 4 KiB a request with a
    /// few ordinary headers would not fit.
    static let connectionMemoryRange = 4096...(1 << 20)

    /// Applies `USHER_HOST`, `USHER_PORT`, `USHER_TOKEN`, `USHER_LOG_LEVEL`,
    /// `USHER_CONNECTION_MEMORY_BYTES` and `USHER_REDIS_URL`, reads the Redis
    /// password from `password_env`, then checks that a `redis` backend has a
    /// server to use.
    mutating func applyEnvironment(_ environment: [String: String]) throws(FieldError) {
        if let host = environment["USHER_HOST"], !host.isEmpty {
            try Self.checkHost(host, field: "USHER_HOST")
            self.host = host
        }
        if let port = environment["USHER_PORT"], !port.isEmpty {
            guard let p = Int(port), (0...65_535).contains(p) else {
                throw FieldError(field: "USHER_PORT", message: "must be a port number (0-65535)")
            }
            self.port = p
        }
        if let token = environment["USHER_TOKEN"] { authToken = try Self.checkedToken(token, field: "USHER_TOKEN") }
        if let bytes = environment["USHER_CONNECTION_MEMORY_BYTES"], !bytes.isEmpty {
            guard let b = Int(bytes), Self.connectionMemoryRange.contains(b) else {
                throw FieldError(
                    field: "USHER_CONNECTION_MEMORY_BYTES", message: "must be a number of bytes (4096-1048576)")
            }
            connectionMemoryBytes = b
        }
        if let level = environment["USHER_LOG_LEVEL"], !level.isEmpty {
            guard let l = LogLevel(rawValue: level.lowercased()) else {
                throw FieldError(field: "USHER_LOG_LEVEL", message: "must be debug, info, warn or error")
            }
            logLevel = l
        }
        try applyRedisEnvironment(environment)
        try checkBackends()
    }

    /// `USHER_REDIS_URL` replaces `redis.url`, or alone makes a `redis` block
    /// with the defaults; `password_env` names the variable that holds the
    /// password. Messages never hold the URL or the password.
    private mutating func applyRedisEnvironment(_ environment: [String: String]) throws(FieldError) {
        if let url = environment["USHER_REDIS_URL"], !url.isEmpty {
            do { _ = try RedisEndpoint(url: url) } catch {
                throw FieldError(field: "USHER_REDIS_URL", message: error.description)
            }
            if redis == nil { redis = RedisSettings(url: url) } else { redis?.url = url }
            if redis?.cluster == true, let problem = RedisSettings.clusterProblem(url: url) {
                throw FieldError(field: "USHER_REDIS_URL", message: problem)
            }
        }
        if let name = redis?.passwordEnv {
            guard let password = environment[name], !password.isEmpty else {
                throw FieldError(
                    field: "redis.password_env",
                    message: "names the environment variable \(name), which is not set or empty")
            }
            redis?.password = password
        }
    }

    /// A `redis` backend, by default or for a declared resource, needs a
    /// `redis` block (or `USHER_REDIS_URL`); the error names the field.
    private func checkBackends() throws(FieldError) {
        guard redis == nil else { return }
        let message = "\"redis\" needs a top-level redis block (or USHER_REDIS_URL)"
        if defaultBackend == .redis { throw FieldError(field: "default_backend", message: message) }
        for kind in ResourceKind.allCases {
            for resource in declared[kind] ?? [] where resource.backend == .redis {
                throw FieldError(field: "\(kind.rawValue).\(resource.name).backend", message: message)
            }
        }
    }

    /// Reads the file at `path` (or no file: defaults) and the environment.
    /// Start-up, `check-config` and SIGHUP all read the config through this.
    package static func load(path: String?, environment: [String: String]) throws(FieldError) -> UsherConfig {
        var config = UsherConfig()
        if let path {
            let data = try readFile(path)
            let value: JSONValue
            do { value = try JSONValue.parse(data) } catch {
                throw FieldError(field: "", message: "config file \(path): \(error.message)")
            }
            guard case .object = value else {
                throw FieldError(field: "", message: "config file \(path): must hold a JSON object")
            }
            config = try parse(value)
            config.dataDir = resolved(config.dataDir, besideFile: path)
        }
        try config.applyEnvironment(environment)
        return config
    }

    /// A relative `data_dir` (the default `data` included) is found in the
    /// config file's folder, whatever the working directory.
    private static func resolved(_ dataDir: String, besideFile path: String) -> String {
        if dataDir.hasPrefix("/") { return dataDir }
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent()
        return folder.appendingPathComponent(dataDir).standardizedFileURL.path
    }

    /// The file's bytes, or why they cannot be read (not found, permission denied…).
    private static func readFile(_ path: String) throws(FieldError) -> Data {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw FieldError(field: "", message: "cannot read config file \(path): \(reason(errno))") }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        do { return try handle.readToEnd() ?? Data() } catch {
            let ns = error as NSError
            let code =
                ns.domain == NSPOSIXErrorDomain
                ? Int32(ns.code)
                : (ns.userInfo[NSUnderlyingErrorKey] as? NSError).map { Int32($0.code) } ?? EIO
            throw FieldError(field: "", message: "cannot read config file \(path): \(reason(code))")
        }
    }

    private static func reason(_ code: Int32) -> String {
        let text = String(cString: strerror(code))
        return text.prefix(1).lowercased() + text.dropFirst()
    }

    /// `host` must be what the server can bind: an IPv4 or IPv6 literal, or
    /// `localhost` (the server's own check, so start-up and check-config agree).
    private static func checkHost(_ host: String, field: String) throws(FieldError) {
        do throws(HTTPServer.StartError) { try HTTPServer.checkHost(host) } catch {
            throw FieldError(
                field: field, message: "must be an IPv4 or IPv6 address, or localhost (not a host name): \(host)")
        }
    }
}
