import Foundation
import HTTPServer
import Locking
import RedisClient
import Synchronization
import UsherCore
import UsherRedis

/// The application: the registry of resources and the shared settings.
/// Every request passes the steps of `handle` (`RequestSteps.swift`), in
/// order; the Redis side (membership, re-sync) is in `RedisMembership.swift`.
package final class UsherApp: Sendable {
    /// The settings in force.
    package let config: UsherConfig
    /// Every resource.
    let registry: Registry
    /// The source of time for every manager.
    let clock: any UsherClock
    /// The structured logger.
    let logger: Logger
    /// Every state change, for `GET /v1/events`; injected into each manager.
    package let events: EventLog
    /// State reads parked until their resource changes.
    let changes: ChangeWatch
    /// Keeps idle event streams alive (one timer for all of them).
    private let eventHeartbeat: EventHeartbeat
    /// What clients store, against `max_stored_bytes`; injected into each manager.
    let storage: StorageBudget
    /// The Redis side, when the config has a `redis` block (connects once serving starts).
    package let redis: RedisBackend?
    /// What this process keeps about the Redis-backed resources.
    let redisState: RedisState
    /// Returns freed memory to the system after a resource is deleted.
    let trimmer = MemoryTrimmer()
    private let stopping = Atomic<Bool>(false)
    /// Host, Origin and token checks.
    let access: AccessPolicy
    /// Request counts and latency by route template, for `GET /metrics`.
    let httpMetrics: HTTPMetrics
    /// Samples the Redis-backed resources for `GET /metrics` (with a `redis` block).
    let redisScrape: RedisScrape?
    /// The routes (internal: `OpenAPITests` compares them with the document).
    let router: Router<Route>

    /// Every resource kind's routes, in the order of `GET /v1`.
    static let kinds: [any BackedKind.Type] = [
        QueueRoutes.self, WindowRoutes.self, PoolRoutes.self, PipelineRoutes.self, MachineRoutes.self,
    ]

    /// Headers the server must copy out for the routes.
    package static let capturedHeaders = [
        "authorization", "if-match", "if-none-match", "last-event-id", "host", "origin", "prefer",
    ]

    /// Builds the app and creates the resources the config declares in memory
    /// (those in Redis are made once serving starts: `startRedis`).
    package init(config: UsherConfig, clock: any UsherClock = SystemClock(), logger: Logger? = nil) throws(APIError) {
        self.config = config
        self.clock = clock
        self.logger = logger ?? Logger(level: config.logLevel)
        self.storage = StorageBudget(limit: config.maxStoredBytes)
        let events = EventLog(
            clock: clock, budget: storage, maxSubscribers: config.maxEventSubscribers,
            lagLimit: config.maxEventLagBytes,
            encode: EventRoutes.frame)
        self.events = events
        self.changes = ChangeWatch(events: events, clock: clock)
        self.eventHeartbeat = EventHeartbeat(every: EventRoutes.heartbeatSeconds, events)
        self.access = AccessPolicy(config: config)
        self.registry = Registry(maxResources: config.maxResources, events: events, storage: storage)
        if let settings = config.redis {
            do throws(RedisError) { self.redis = try RedisBackend(settings: settings, clock: clock) } catch {
                throw APIError.badRequest("redis: \(error.description)", field: "redis")
            }
            self.redisScrape = RedisScrape(timeoutSeconds: settings.metricsTimeoutSeconds)
        } else {
            self.redis = nil
            self.redisScrape = nil
        }
        var router = Router<Route>()
        OperationsRoutes.add(to: &router)
        EventRoutes.add(to: &router)
        DashboardRoutes.add(to: &router)
        for kind in Self.kinds { kind.add(to: &router) }
        self.router = router
        self.httpMetrics = HTTPMetrics(routes: router.routes)
        let declarations: [(path: String, Declaration)]
        do throws(FieldError) { declarations = try Self.declarations(config.declared, settings: config) } catch {
            throw APIError(error)
        }
        self.redisState = RedisState(
            declared: declarations.compactMap { if case .shared(let shared) = $0.1 { shared } else { nil } })
        for case (let path, .memory(let declared)) in declarations {
            if case .failed(let detail) = declared.apply(self) {
                throw APIError(FieldError(field: path, message: detail))
            }
        }
    }

    /// Reads every declaration of the config file, in its backend; errors name the field.
    static func declarations(
        _ declared: [ResourceKind: [(name: String, config: JSONValue, backend: Backend)]], settings: UsherConfig
    ) throws(FieldError) -> [(path: String, Declaration)] {
        var declarations: [(path: String, Declaration)] = []
        for kind in kinds {
            for (name, value, backend) in declared[kind.kind] ?? [] {
                let path = "\(kind.kind.rawValue).\(name)"
                let declaration = try kind.prepare(
                    name: name, config: value, backend: backend, path: path, settings: settings)
                declarations.append((path, declaration))
            }
        }
        return declarations
    }

    /// True once shutdown has begun.
    var isStopping: Bool { stopping.load(ordering: .relaxed) }

    /// Begins shutdown: readiness turns 503, and every parked long-poll is
    /// answered 503 `shutting_down`; new waits are refused the same way.
    func beginShutdown() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        for resource in registry.all() { resource.markShuttingDown() }
    }

    /// The deadline for a `wait` of `seconds` from now.
    func deadline(after seconds: Double) -> Timestamp { clock.now().adding(seconds: seconds) }
}
