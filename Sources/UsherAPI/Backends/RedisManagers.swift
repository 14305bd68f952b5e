import UsherCore
import UsherRedis

// Each kind's Redis manager as the lifecycle sees it, and how the config
// file declares one. The lifecycle itself is `RedisLifecycle`.

extension RedisQueue: ConfiguredRedisManager {
    static let kind = ResourceKind.queues
    static func apiError(_ error: QueueError) -> APIError { APIError(error) }

    static func make(name: String, redis: RedisBackend, in app: UsherApp) -> RedisQueue {
        RedisQueue(name: name, backend: redis, events: app.events)
    }

    func reconcile(to config: QueueConfig) async throws(APIError) {
        do throws(QueueError) { _ = try await applyPatch(QueuePatch(setting: config)).value() } catch {
            throw APIError(error)
        }
    }

    package func sharedSummary() -> Pending<JSONValue, APIError> {
        .async { [self] () async throws(APIError) -> JSONValue in
            do throws(QueueError) {
                let config = try await readConfig().value()
                let counts = try await counts()
                return .object([
                    ("name", .string(name)),
                    ("capacity", .int(config.capacity)),
                    ("holding", .int(counts.holding)),
                    ("waiting", .int(counts.waiting)),
                    ("delayed", .int(counts.delayed)),
                    ("backend", .string("redis")),
                ])
            } catch { throw APIError(error) }
        }
    }
}

extension QueueRoutes: SharedKind {
    static func sharedManager(name: String, redis: RedisBackend, events: EventLog) -> any SharedResource {
        RedisQueue(name: name, backend: redis, events: events)
    }

    static func prepareShared(name: String, config: JSONValue, path: String, settings: UsherConfig)
        throws(FieldError) -> SharedDeclaration
    {
        var reader = try FieldReader(config, path: path)
        let wanted = try QueueConfig.parse(&reader)
        try reader.finish()
        return SharedDeclaration(kind: kind, name: name) { app async throws(APIError) in
            try await RedisLifecycle<RedisQueue>.declare(name: name, config: wanted, in: app)
        }
    }
}

extension RedisWindow: ConfiguredRedisManager {
    static let kind = ResourceKind.windows
    static func apiError(_ error: WindowError) -> APIError { APIError(error) }

    static func make(name: String, redis: RedisBackend, in app: UsherApp) -> RedisWindow {
        RedisWindow(name: name, backend: redis, events: app.events)
    }

    func reconcile(to config: WindowConfig) async throws(APIError) {
        do throws(WindowError) { _ = try await applyPatch(WindowRoutes.patch(to: config)).value() } catch {
            throw APIError(error)
        }
    }

    package func sharedSummary() -> Pending<JSONValue, APIError> {
        .async { [self] () async throws(APIError) -> JSONValue in
            do throws(WindowError) {
                let (counts, showing) = try await counts()
                return .object([
                    ("name", .string(name)),
                    ("showing", showing.map { .string($0) } ?? .null),
                    ("queued", .int(counts.queued)),
                    ("backend", .string("redis")),
                ])
            } catch { throw APIError(error) }
        }
    }
}

extension WindowRoutes: SharedKind {
    static func sharedManager(name: String, redis: RedisBackend, events: EventLog) -> any SharedResource {
        RedisWindow(name: name, backend: redis, events: events)
    }

    static func prepareShared(name: String, config: JSONValue, path: String, settings: UsherConfig)
        throws(FieldError) -> SharedDeclaration
    {
        var reader = try FieldReader(config, path: path)
        let wanted = try WindowConfig.parse(&reader)
        try reader.finish()
        return SharedDeclaration(kind: kind, name: name) { app async throws(APIError) in
            try await RedisLifecycle<RedisWindow>.declare(name: name, config: wanted, in: app)
        }
    }
}

extension RedisPool: ConfiguredRedisManager {
    static let kind = ResourceKind.pools
    static func apiError(_ error: PoolError) -> APIError { APIError(error) }

    static func make(name: String, redis: RedisBackend, in app: UsherApp) -> RedisPool {
        RedisPool(name: name, backend: redis, events: app.events)
    }

    /// The mutable fields are patched; other elements there stay (an error says so).
    func reconcile(to config: PoolConfig) async throws(APIError) {
        let patched: PoolConfig
        do throws(PoolError) { patched = try await applyPatch(PoolPatch(config)).value() } catch {
            throw APIError(error)
        }
        guard patched == config else {
            throw APIError.conflict("declaration_differs", "Declaration differs", PoolRoutes.fixedFields(name))
        }
    }

    package func sharedSummary() -> Pending<JSONValue, APIError> {
        .async { [self] () async throws(APIError) -> JSONValue in
            do throws(PoolError) {
                let counts = try await counts()
                return .object([
                    ("name", .string(name)),
                    ("size", .int(counts.size)),
                    ("available", .int(counts.available)),
                    ("leased", .int(counts.leased)),
                    ("waiting", .int(counts.waiting)),
                    ("backend", .string("redis")),
                ])
            } catch { throw APIError(error) }
        }
    }
}

extension PoolRoutes: SharedKind {
    static func sharedManager(name: String, redis: RedisBackend, events: EventLog) -> any SharedResource {
        RedisPool(name: name, backend: redis, events: events)
    }

    static func prepareShared(name: String, config: JSONValue, path: String, settings: UsherConfig)
        throws(FieldError) -> SharedDeclaration
    {
        var reader = try FieldReader(config, path: path)
        let wanted = try PoolConfig.parse(&reader)
        try reader.finish()
        return SharedDeclaration(kind: kind, name: name) { app async throws(APIError) in
            try await RedisLifecycle<RedisPool>.declare(name: name, config: wanted, in: app)
        }
    }
}

extension RedisPipeline: ConfiguredRedisManager {
    static let kind = ResourceKind.pipelines
    static func apiError(_ error: PipelineError) -> APIError { APIError(error) }

    static func make(name: String, redis: RedisBackend, in app: UsherApp) -> RedisPipeline {
        RedisPipeline(name: name, backend: redis, events: app.events, maxTakeBytes: app.config.maxResponseBytes)
    }

    func reconcile(to config: PipelineConfig) async throws(APIError) {
        do throws(PipelineError) { _ = try await applyPatch(PipelinePatch(config: config)).value() } catch {
            throw APIError(error)
        }
    }

    package func sharedSummary() -> Pending<JSONValue, APIError> {
        readState(limit: 0, after: nil).mapError { APIError($0) }.map { state in
            .object([
                ("name", .string(state.name)),
                ("capacity", .int(state.capacity)),
                ("ready", .int(state.ready)),
                ("in_flight", .int(state.inFlight)),
                ("delayed", .int(state.delayed)),
                ("dead", .int(state.dead)),
                ("backend", .string("redis")),
            ])
        }
    }
}

extension PipelineRoutes: SharedKind {
    static func sharedManager(name: String, redis: RedisBackend, events: EventLog) -> any SharedResource {
        RedisPipeline(name: name, backend: redis, events: events)
    }

    static func prepareShared(name: String, config: JSONValue, path: String, settings: UsherConfig)
        throws(FieldError) -> SharedDeclaration
    {
        var reader = try FieldReader(config, path: path)
        let wanted = try PipelineConfig.parse(
            &reader, allowRemoteSources: settings.allowRemoteSources, limits: settings.jsonLimits)
        try reader.finish()
        if wanted.source != nil { throw FieldError(field: "\(path).source", message: sharedSourceMessage) }
        return SharedDeclaration(kind: kind, name: name) { app async throws(APIError) in
            try await RedisLifecycle<RedisPipeline>.declare(name: name, config: wanted, in: app)
        }
    }
}

extension RedisMachine: RedisKindManager {
    static let kind = ResourceKind.machines
    static func apiError(_ error: MachineError) -> APIError { APIError(error) }

    package func sharedSummary() -> Pending<JSONValue, APIError> {
        readSnapshot().mapError(APIError.init).map { snapshot in
            .object([
                ("name", .string(snapshot.name)),
                ("definition", MachineRoutes.definitionSummary(snapshot.definitionName, snapshot.definition)),
                ("state", .string(snapshot.state)),
                ("version", .int(Int(snapshot.version))),
                ("backend", .string("redis")),
            ])
        }
    }
}

extension MachineRoutes: SharedKind {
    static func sharedManager(name: String, redis: RedisBackend, events: EventLog) -> any SharedResource {
        RedisMachine(name: name, backend: redis, events: events)
    }

    static func prepareShared(name: String, config: JSONValue, path: String, settings: UsherConfig)
        throws(FieldError) -> SharedDeclaration
    {
        let spec = try MachineSpec.parse(config, path: path, definitions: settings.definitions)
        return SharedDeclaration(kind: kind, name: name) { app async throws(APIError) in
            // A machine has no PATCH: another definition there stays, and is logged.
            _ = try await creating(name: name, spec: spec, backend: .redis, in: app).value()
        }
    }
}
