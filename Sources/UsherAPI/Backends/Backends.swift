import Answers
import UsherCore
import UsherRedis

/// A kind whose resources live in memory or in Redis, made from one config:
/// its memory manager and its Redis manager implement the same service
/// (`QueueService`, …), and this is the one place that picks between them.
protocol BackedKind: ResourceAPI {
    associatedtype Config: Equatable & Sendable
    associatedtype InMemory: MemoryKindManager where InMemory.Config == Config
    associatedtype InRedis: ConfiguredRedisManager where InRedis.Config == Config

    /// Reads a declaration in the config file; errors name the field under `path`.
    static func parseDeclared(_ config: JSONValue, path: String, settings: UsherConfig) throws(FieldError) -> Config
    /// What a declaration that differs from the resource cannot change in
    /// place ("" when a patch reaches every field).
    static func fixedFields(_ name: String) -> String
}

/// A resource the config file declares, read and checked, in its backend.
enum Declaration {
    /// Applied at once, here.
    case memory(DeclaredResource)
    /// Applied in Redis once it answers, and again should Redis lose it.
    case shared(SharedDeclaration)
}

extension BackedKind {
    static func fixedFields(_ name: String) -> String { "" }

    /// Makes the resource in `backend`, or finds the one there with the same
    /// config (made through any instance, for Redis). `PUT` and the config
    /// file share this.
    static func creating(name: String, config: Config, backend: Backend, in app: UsherApp) -> Pending<
        Created<any ManagedResource>, APIError
    > {
        switch backend {
        case .memory:
            return MemoryLifecycle<InMemory>.creating(name: name, config: config, in: app)
        case .redis:
            return RedisLifecycle<InRedis>.creating(name: name, config: config, in: app).map {
                Created(manager: $0.manager, created: $0.created)
            }
        }
    }

    /// Reads a declaration of the config file in `backend`, without applying
    /// it; errors name the field under `path` (e.g. `queues.printer.capacity`).
    static func prepare(name: String, config value: JSONValue, backend: Backend, path: String, settings: UsherConfig)
        throws(FieldError) -> Declaration
    {
        let config = try parseDeclared(value, path: path, settings: settings)
        switch backend {
        case .memory:
            return .memory(
                DeclaredResource(kind: kind, name: name) { app in
                    guard let resource = try? app.registry.lookup(kind, name, as: InMemory.self) else {
                        return .creating { () throws(APIError) in
                            _ = try MemoryLifecycle<InMemory>.creating(name: name, config: config, in: app).readyValue()
                        }
                    }
                    return .patching(current: { resource.currentConfig }, wanted: config, fixed: fixedFields(name)) {
                        () throws(APIError) in try resource.reconcile(to: config)
                    }
                })
        case .redis:
            if let (field, message) = InRedis.refusal(of: config) {
                throw FieldError(field: "\(path).\(field)", message: message)
            }
            return .shared(
                SharedDeclaration(kind: kind, name: name) { app async throws(APIError) in
                    try await RedisLifecycle<InRedis>.declare(name: name, config: config, in: app)
                })
        }
    }

    /// This process's manager of the resource `name` in Redis, made when it
    /// first hears of it (not yet registered).
    static func sharedManager(name: String, redis: RedisBackend, in app: UsherApp) -> any ManagedResource {
        InRedis.make(name: name, redis: redis, in: app)
    }
}

/// What deleting a resource the config file no longer declares did.
enum UndeclaredOutcome {
    case deleted
    /// Kept in Redis: deleted there in the background (every instance hears of it).
    case inRedis
    /// Deleted already (through the API).
    case absent
}

extension UsherApp {
    /// Deletes a resource the reloaded config file no longer declares, in
    /// the backend it was declared in.
    func deleteUndeclared(_ kind: ResourceKind, _ name: String, in backend: Backend) -> UndeclaredOutcome {
        switch backend {
        case .memory:
            do throws(APIError) { try registry.remove(kind, name) } catch { return .absent }
            return .deleted
        case .redis:
            deleteDeclaredShared(kind, name)
            return .inRedis
        }
    }
}

/// A kind's manager in memory as the lifecycle sees it: an actor made from
/// a config, matched and brought to one. Lives and is counted in this process.
protocol MemoryKindManager: ManagedResource, LockIsolatedActor {
    associatedtype Config: Equatable & Sendable
    static var kind: ResourceKind { get }
    /// Checks what must hold before one is made with `config` (by default nothing).
    static func check(_ config: Config, in app: UsherApp) throws(APIError)
    /// A new manager (not yet registered).
    static func make(name: String, config: Config, in app: UsherApp) -> Self
    /// The config in force.
    var config: Config { get }
    /// Brings it towards `config` as a `PATCH` would.
    nonisolated func reconcile(to config: Config) throws(APIError)
    /// Deleted: its waiters are answered 410.
    func close()
    /// Stopping: its waiters are answered 503.
    func shutdown()
}

extension MemoryKindManager {
    static func check(_ config: Config, in app: UsherApp) throws(APIError) {}

    /// The config in force, read from any thread.
    nonisolated var currentConfig: Config { withIsolation { $0.config } }

    nonisolated func markDeleted() { withIsolation { $0.close() } }
    nonisolated func markShuttingDown() { withIsolation { $0.shutdown() } }

    nonisolated func listSummary() -> Pending<JSONValue, APIError> { .ready(.success(summary())) }

    nonisolated func deleting(from registry: Registry) -> Pending<Void, APIError> {
        .now { () throws(APIError) in try registry.remove(Self.kind, name) }
    }

    nonisolated func startListening() {}
    nonisolated func catchUp() async {}
}

/// Creating a resource of a kind in memory, for every kind.
enum MemoryLifecycle<Manager: MemoryKindManager> {
    /// Creates the resource here, or finds the one here with the same config.
    static func creating(name: String, config: Manager.Config, in app: UsherApp) -> Pending<
        Created<any ManagedResource>, APIError
    > {
        .now { () throws(APIError) in
            try Manager.check(config, in: app)
            let (resource, created) = try app.registry.create(
                Manager.kind, name, make: { Manager.make(name: name, config: config, in: app) },
                matches: { $0.currentConfig == config })
            return Created(manager: resource, created: created)
        }
    }
}

// The manager that serves each kind in each backend.

extension QueueRoutes {
    typealias InMemory = VisitorQueue
    typealias InRedis = RedisQueue
}

extension WindowRoutes {
    typealias InMemory = WindowSlot
    typealias InRedis = RedisWindow
}

extension PoolRoutes {
    typealias InMemory = LeasePool
    typealias InRedis = RedisPool
}

extension PipelineRoutes {
    typealias InMemory = Pipeline
    typealias InRedis = RedisPipeline
}

extension MachineRoutes {
    typealias InMemory = StateMachine
    typealias InRedis = RedisMachine
}
