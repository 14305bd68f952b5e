import Answers
import UsherCore
import UsherRedis

// Each kind's Redis manager (of UsherRedis) as the lifecycle sees it. The
// lifecycle itself is `RedisLifecycle`.

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

    func listSummary() -> Pending<JSONValue, APIError> {
        .async { [self] () async throws(APIError) -> JSONValue in
            do throws(QueueError) {
                let config = try await readConfig().value()
                return Summary.queue(name, capacity: config.capacity, try await counts(), in: .redis)
            } catch { throw APIError(error) }
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

    func listSummary() -> Pending<JSONValue, APIError> {
        .async { [self] () async throws(APIError) -> JSONValue in
            do throws(WindowError) {
                let (counts, showing) = try await counts()
                return Summary.window(name, showing: showing, queued: counts.queued, in: .redis)
            } catch { throw APIError(error) }
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

    func listSummary() -> Pending<JSONValue, APIError> {
        .async { [self] () async throws(APIError) -> JSONValue in
            do throws(PoolError) {
                let counts = try await counts()
                let config = try await readConfig().value()
                return Summary.pool(
                    name, size: counts.size, maxSize: config.maxSize(size: counts.size), available: counts.available,
                    leased: counts.leased, waiting: counts.waiting, in: .redis)
            } catch { throw APIError(error) }
        }
    }
}

extension RedisPipeline: ConfiguredRedisManager {
    static let kind = ResourceKind.pipelines
    static func apiError(_ error: PipelineError) -> APIError { APIError(error) }

    /// A source is pulled by one process (its reader, file offset and back-off live there).
    static func refusal(of config: PipelineConfig) -> (field: String, message: String)? {
        guard config.source != nil else { return nil }
        return (
            "source",
            "a Redis-backed pipeline cannot have a source: a source is pulled by one process; "
                + "use backend \"memory\", or push the items"
        )
    }

    static func make(name: String, redis: RedisBackend, in app: UsherApp) -> RedisPipeline {
        RedisPipeline(name: name, backend: redis, events: app.events, maxTakeBytes: app.config.maxResponseBytes)
    }

    func reconcile(to config: PipelineConfig) async throws(APIError) {
        do throws(PipelineError) { _ = try await applyPatch(PipelinePatch(config: config)).value() } catch {
            throw APIError(error)
        }
    }

    func listSummary() -> Pending<JSONValue, APIError> {
        readState(limit: 0, after: nil).mapError { APIError($0) }.map { Summary.pipeline($0, in: .redis) }
    }
}

extension RedisMachine: ConfiguredRedisManager {
    static let kind = ResourceKind.machines
    static func apiError(_ error: MachineError) -> APIError { APIError(error) }

    static func make(name: String, redis: RedisBackend, in app: UsherApp) -> RedisMachine {
        RedisMachine(name: name, backend: redis, events: app.events)
    }

    func readConfig() -> Pending<MachineSpec, MachineError> {
        readSnapshot().map { MachineSpec(definitionName: $0.definitionName, definition: $0.definition) }
    }

    func create(_ config: MachineSpec) async throws(MachineError) -> (config: MachineSpec, created: Bool) {
        let (snapshot, created) = try await create(definitionName: config.definitionName, definition: config.definition)
        return (MachineSpec(definitionName: snapshot.definitionName, definition: snapshot.definition), created)
    }

    /// A machine has no `PATCH`: another definition there stays (the caller logs it).
    func reconcile(to config: MachineSpec) async throws(APIError) {
        throw APIError.alreadyExists(Self.kind.noun, name)
    }

    func listSummary() -> Pending<JSONValue, APIError> {
        readSnapshot().mapError(APIError.init).map { snapshot in
            Summary.machine(
                snapshot.name, definitionName: snapshot.definitionName, definition: snapshot.definition,
                state: snapshot.state, version: snapshot.version, in: .redis)
        }
    }
}
