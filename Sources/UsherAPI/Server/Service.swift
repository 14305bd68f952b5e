import Foundation
import HTTPServer
import UsherCore

/// Runs Usher: binds, serves until SIGTERM/SIGINT, then shuts down gracefully.
package enum Service {
    /// Blocks SIGINT, SIGTERM and SIGHUP in this thread and every thread
    /// started after, so that only `run` sees them. Call first thing in `main`.
    package static func blockSignals() {
        var set = signalSet()
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    private static func signalSet() -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGHUP)
        return set
    }

    /// The server settings that follow from the config.
    static func serverConfiguration(for config: UsherConfig) -> HTTPServer.Configuration {
        var http = HTTPServer.Configuration()
        http.host = config.host
        http.port = UInt16(config.port)
        http.maxBodyBytes = config.maxBodyBytes
        http.connectionLimit = config.maxConnections
        http.idleTimeoutSeconds = config.idleTimeoutSeconds
        http.requestHeadTimeoutSeconds = config.requestHeadTimeoutSeconds
        http.requestBodyTimeoutSeconds = config.requestBodyTimeoutSeconds
        http.maxConnectionsPerAddress = config.maxConnectionsPerIP
        http.connectionMemoryLimit = config.connectionMemoryBytes
        http.capturedHeaders = UsherApp.capturedHeaders
        http.maxHeaders = config.maxRequestHeaders
        http.maxQueryArguments = config.maxQueryParameters
        return http
    }

    /// Starts the app's server. Throws when the address cannot be bound.
    package static func start(_ app: UsherApp) throws(HTTPServer.StartError) -> HTTPServer {
        let server = HTTPServer(configuration: serverConfiguration(for: app.config), handler: app)
        try server.start()
        app.startRedis()
        return server
    }

    /// Shuts down within the grace period: readiness 503, parked long-polls
    /// answered 503, no new connections, in-flight requests finished, then
    /// the daemon stopped. True when everything drained in time.
    @discardableResult
    package static func shutdown(_ app: UsherApp, _ server: HTTPServer) -> Bool {
        let deadline = Date().addingTimeInterval(app.config.shutdownGraceSeconds)
        app.beginShutdown()
        server.quiesce()
        let drained = server.waitUntilIdle(deadline: deadline)
        // Stopping with suspended connections is not allowed; if some are still
        // parked when the grace period ends, the process exits without it.
        if server.suspendedRequests == 0 { server.stop() }
        stopRedis(app)
        return drained
    }

    /// Stops the Redis subscriber now and closes the command connections in
    /// the background (this may run on a cooperative thread: no waiting on one).
    private static func stopRedis(_ app: UsherApp) {
        guard let redis = app.redis else { return }
        redis.stopSubscriber()
        Task { await redis.stop() }
    }

    /// Serves `app` until SIGTERM or SIGINT, then shuts down; on SIGHUP,
    /// applies the config `reload` reads (`ConfigReloader`). Returns the exit
    /// status (1 when the address cannot be bound).
    package static func run(_ app: UsherApp, reload: (() throws(FieldError) -> UsherConfig)? = nil) -> Int32 {
        let config = app.config
        let logger = app.logger
        let server: HTTPServer
        do throws(HTTPServer.StartError) { server = try start(app) } catch {
            logger.error("cannot start", [("detail", .string(error.description))])
            return 1
        }
        let resources = ResourceKind.allCases.compactMap { kind -> (String, JSONValue)? in
            let names = app.registry.list(kind).map { JSONValue.string($0.name) }
            return names.isEmpty ? nil : (kind.rawValue, .array(names))
        }
        logger.info(
            "listening",
            [
                (
                    "address",
                    .string("http://\(config.host.contains(":") ? "[\(config.host)]" : config.host):\(server.port)")
                ),
                ("resources", .object(resources)),
            ])
        var set = signalSet()
        var signal: Int32 = 0
        let reloader = ConfigReloader(app: app)
        while true {
            sigwait(&set, &signal)
            guard signal == SIGHUP else { break }
            if let reload {
                logger.info("reloading config", [("signal", .string("SIGHUP"))])
                reloader.reload(reload)
            } else {
                logger.info("SIGHUP ignored: no config file to reload", [])
            }
        }
        logger.info(
            "shutting down",
            [
                ("signal", .string(signal == SIGTERM ? "SIGTERM" : "SIGINT")),
                ("grace_seconds", .double(config.shutdownGraceSeconds)),
            ])
        let drained = shutdown(app, server)
        logger.info("stopped", [("drained", .bool(drained))])
        return 0
    }
}
