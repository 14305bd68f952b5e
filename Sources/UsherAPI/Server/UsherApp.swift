import Foundation
import HTTPServer
import Locking
import RedisClient
import Synchronization
import UsherCore
import UsherRedis

/// A route's code: answers now, or defers work that waits.
package struct Route: Sendable {
    /// Its index in the router (`Router.routes`): its slot in `HTTPMetrics`.
    package let slot: Int
    /// Who may call it.
    let access: RouteAccess
    /// Handles a routed call.
    package let run: @Sendable (Call) throws(APIError) -> HTTPHandlerResult
}

extension Router where Handler == Route {
    /// Adds a route whose code is `run`.
    mutating func add(
        _ method: String, _ template: String, _ run: @escaping @Sendable (Call) throws(APIError) -> HTTPHandlerResult
    ) {
        add(method, template, Route(slot: routes.count, access: RouteAccess(path: template), run: run))
    }
}

/// The application: routes every request, checks auth, maps errors to
/// problems. Holds the registry of resources and the shared settings.
package final class UsherApp: HTTPHandler {
    /// The settings in force.
    package let config: UsherConfig
    /// Every resource.
    let registry: Registry
    /// The source of time for every manager.
    package let clock: any UsherClock
    /// The structured logger.
    package let logger: Logger
    /// Every state change, for `GET /v1/events`; injected into each manager.
    package let events: EventLog
    /// Keeps idle event streams alive (one timer for all of them).
    private let eventHeartbeat: EventHeartbeat
    /// What clients store, against `max_stored_bytes`; injected into each manager.
    package let storage: StorageBudget
    /// The Redis side, when the config has a `redis` block (connects once serving starts).
    package let redis: RedisBackend?
    /// Resources the config file (as last applied) keeps in Redis: created
    /// there once Redis answers, and again should Redis lose them.
    private let declaredShared: Locked<[SharedDeclaration]>
    /// Redis's generation last seen: a new one means Redis restarted, failed
    /// over or was emptied, and may have lost resources.
    private let redisGeneration = Locked<RedisBackend.Generation?>(nil)
    /// The `kind:name` of the resources found missing that are being looked into.
    private let missingChecks = Locked<Set<String>>([])
    /// Returns freed memory to the system after a resource is deleted.
    let trimmer = MemoryTrimmer()
    private let stopping = Atomic<Bool>(false)
    /// Host, Origin and token checks.
    private let access: AccessPolicy
    /// Request counts and latency by route template, for `GET /metrics`.
    let httpMetrics: HTTPMetrics
    /// Samples the Redis-backed resources for `GET /metrics` (with a `redis` block).
    let redisScrape: RedisScrape?
    /// The routes (internal: `OpenAPITests` compares them with the document).
    let router: Router<Route>

    /// Every resource kind's routes, in the order of `GET /v1`.
    static let kinds: [any SharedKind.Type] = [
        QueueRoutes.self, WindowRoutes.self, PoolRoutes.self, PipelineRoutes.self, MachineRoutes.self,
    ]

    /// Headers the server must copy out for the routes.
    package static let capturedHeaders = ["authorization", "if-match", "last-event-id", "host", "origin"]

    /// Builds the app and creates the resources the config declares.
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
        self.eventHeartbeat = EventHeartbeat(every: EventRoutes.heartbeatSeconds, events)
        self.access = AccessPolicy(config: config)
        self.registry = Registry(maxResources: config.maxResources, events: events)
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
        Self.addOperationsRoutes(to: &router)
        EventRoutes.add(to: &router)
        DashboardRoutes.add(to: &router)
        for kind in Self.kinds { kind.add(to: &router) }
        self.router = router
        self.httpMetrics = HTTPMetrics(routes: router.routes)
        do throws(FieldError) {
            self.declaredShared = Locked(try Self.sharedDeclarations(config.declared, settings: config))
        } catch {
            throw APIError(error)
        }
        for kind in Self.kinds {
            for (name, value, backend) in config.declared[kind.kind] ?? [] where backend == .memory {
                do throws(FieldError) {
                    try kind.createDeclared(name: name, config: value, path: "\(kind.kind.rawValue).\(name)", in: self)
                } catch {
                    throw APIError(error)
                }
            }
        }
    }

    // MARK: Redis

    /// Starts hearing Redis notices and learns the Redis-backed resources
    /// (in the background: Redis may be down, and nothing waits for it).
    func startRedis() {
        guard let redis else { return }
        do throws(RedisError) {
            try redis.start { [weak self] change in self?.redisMembershipChanged(change) }
        } catch {
            logger.error("redis subscriber", [("detail", .string(error.description))])
        }
        createDeclaredShared()
        watchEpoch(redis)
    }

    /// How often each instance reads Redis's epoch (one `GET`).
    static let epochCheckSeconds = 1.0

    /// Reads the epoch every `epochCheckSeconds` until shutdown: missing or
    /// new, Redis was emptied (`FLUSHALL`, `FLUSHDB`, the key evicted or
    /// deleted) without a restart, so its `run_id` says nothing: recovers as
    /// after a restart.
    private func watchEpoch(_ redis: RedisBackend) {
        Task { [weak self] in
            while let app = self, !app.isStopping {
                let known = app.redisGeneration.withLock { $0?.epoch }
                // Redis not answering says nothing: its return is a reconnect, which resynchronizes.
                do throws(ScriptFailure) {
                    if try await redis.currentEpoch() != known { await app.resynchronizeShared() }
                } catch {}
                try? await Task.sleep(for: .seconds(Self.epochCheckSeconds))
            }
        }
    }

    /// Reads the declarations kept in Redis (`backend` redis); errors name the field.
    static func sharedDeclarations(
        _ declared: [ResourceKind: [(name: String, config: JSONValue, backend: Backend)]], settings: UsherConfig
    ) throws(FieldError) -> [SharedDeclaration] {
        var declarations: [SharedDeclaration] = []
        for kind in kinds {
            for (name, value, backend) in declared[kind.kind] ?? [] where backend == .redis {
                let path = "\(kind.kind.rawValue).\(name)"
                declarations.append(try kind.prepareShared(name: name, config: value, path: path, settings: settings))
            }
        }
        return declarations
    }

    /// Creates the declared Redis-backed resources.
    private func createDeclaredShared() {
        declareShared(declaredShared.withLock { $0 })
    }

    /// A reload's declarations kept in Redis: the ones re-created should Redis lose them.
    func replaceDeclaredShared(_ declarations: [SharedDeclaration]) {
        declaredShared.withLock { $0 = declarations }
    }

    /// Brings each declared resource in Redis to its declaration (creating it,
    /// or patching the one there, as for memory), in the background.
    func declareShared(_ declarations: [SharedDeclaration]) {
        for declaration in declarations {
            let fields: [(String, JSONValue)] = [
                ("kind", .string(declaration.kind.rawValue)), ("name", .string(declaration.name)),
            ]
            whileRedisAnswers(declaration.kind, declaration.name) { app async throws(APIError) in
                try await declaration.declare(app)
                app.logger.info("declared resource applied in redis", fields)
            }
        }
    }

    /// Deletes, in Redis, a resource the reloaded file no longer declares (every instance hears it).
    func deleteDeclaredShared(_ kind: ResourceKind, _ name: String) {
        whileRedisAnswers(kind, name) { app async throws(APIError) in
            guard let shared = app.adoptShared(kind, name) as? any SharedResource else { return }
            do throws(APIError) { try await shared.deleteShared().value() } catch  where error.status == 404 {}
            app.registry.forget(kind, name)
            app.logger.info(
                "declared resource deleted in redis", [("kind", .string(kind.rawValue)), ("name", .string(name))])
        }
    }

    /// Runs `work` in the background, again every 2 s while Redis does not
    /// answer (until shutdown); another failure is logged.
    private func whileRedisAnswers(
        _ kind: ResourceKind, _ name: String, _ work: @escaping @Sendable (UsherApp) async throws(APIError) -> Void
    ) {
        guard redis != nil else { return }
        Task { [weak self] in
            while let app = self, !app.isStopping {
                do throws(APIError) {
                    try await work(app)
                    return
                } catch  where error.code == "backend_unavailable" {
                    try? await Task.sleep(for: .seconds(2))
                } catch {
                    app.logger.error(
                        "declared resource in redis",
                        [
                            ("kind", .string(kind.rawValue)), ("name", .string(name)),
                            ("detail", .string(error.detail)),
                        ])
                    return
                }
            }
        }
    }

    private func redisMembershipChanged(_ change: RedisBackend.Membership) {
        switch change {
        case .created(let kind, let name):
            if let kind = ResourceKind(noun: kind) { _ = adoptShared(kind, name) }
        case .deleted(let kind, let name, let lost):
            guard let kind = ResourceKind(noun: kind) else { return }
            registry.forget(kind, name)
            if lost { declareShared(declaredShared.withLock { $0 }.filter { $0.kind == kind && $0.name == name }) }
        case .missing(let kind, let name):
            if let kind = ResourceKind(noun: kind) { lookIntoMissing(kind, name) }
        case .resynchronize:
            Task { await resynchronizeShared() }
        }
    }

    /// A script found the resource's keys missing. Redis emptied (its epoch
    /// missing or new): recovers as after a restart. Else the resource alone:
    /// deleted (this instance forgets it; the notice may be on its way), or
    /// lost (its entry removed, every instance forgets it and makes it
    /// again if it declares it). One look at a time per resource.
    private func lookIntoMissing(_ kind: ResourceKind, _ name: String) {
        guard let redis else { return }
        let key = "\(kind.noun):\(name)"
        guard missingChecks.withLock({ $0.insert(key).inserted }) else { return }
        Task {
            defer { _ = missingChecks.withLock { $0.remove(key) } }
            let current: String?
            do throws(ScriptFailure) { current = try await redis.currentEpoch() } catch { return }
            guard current == redisGeneration.withLock({ $0?.epoch }) else { return await resynchronizeShared() }
            switch await redis.checkMissing(kind: kind.noun, name: name) {
            case .deleted, .lost: registry.forget(kind, name)
            case .present, .unchecked: break
            }
        }
    }

    /// This process's manager of the Redis-backed resource (made and
    /// registered the first time), or nil without a `redis` block.
    func adoptShared(_ kind: ResourceKind, _ name: String) -> (any ManagedResource)? {
        guard let redis, let shared = Self.sharedKind(kind) else { return nil }
        let events = events
        return registry.adopt(kind, name) { shared.sharedManager(name: name, redis: redis, events: events) }
    }

    /// Reads Redis's index again: adopts what this process missed, forgets
    /// what was deleted meanwhile (or lost, when Redis restarted or was
    /// emptied), and applies what came due; then, after a restart or an
    /// emptying, cleans the index. The subscriber may be back before the
    /// command connections' back-off ends: the read is retried for up to 10 s.
    private func resynchronizeShared() async {
        guard let redis else { return }
        // Only what was here before the index was read may be missing from it:
        // a resource adopted meanwhile (a PUT here) is newer than the read.
        let before = ResourceKind.allCases.flatMap { kind in
            registry.list(kind).filter { $0 is any SharedResource }.map { (kind, $0.name) }
        }
        // The generation before the index: a loss after the read shows in the next look.
        var generation: RedisBackend.Generation?
        var read: [(kind: String, name: String)]?
        for _ in 0..<50 where !isStopping {
            do throws(ScriptFailure) {
                generation = try await redis.generation()
                read = try await redis.indexedResources()
                break
            } catch {
                try? await Task.sleep(for: .milliseconds(200))
            }
        }
        guard let indexed = read else { return }
        var known = Set<String>()
        for (noun, name) in indexed {
            guard let kind = ResourceKind(noun: noun) else { continue }
            known.insert("\(noun):\(name)")
            if let shared = adoptShared(kind, name) as? any SharedResource { await shared.catchUp() }
        }
        for (kind, name) in before where !known.contains("\(kind.noun):\(name)") {
            // Keys without an entry: the index was lost (a Cluster master of
            // its own emptied) or its creation is under way: indexed again.
            if (try? await redis.hasKeys(kind: kind.noun, name: name)) == true,
                (try? await redis.announceCreated(kind: kind.noun, name: name)) != nil
            {
                known.insert("\(kind.noun):\(name)")
            } else {
                registry.forget(kind, name)
            }
        }
        if let generation { await afterRedisRestart(redis, generation: generation, known: known) }
    }

    /// When Redis restarted, failed over (a new `run_id`; on a cluster, any
    /// master's) or was emptied (a new epoch), and at the first look: removes
    /// from the index what it lost, and makes again what the file declares
    /// and it lost. `known`: the `kind:name` the index held when read just
    /// after `generation`.
    private func afterRedisRestart(
        _ redis: RedisBackend, generation: RedisBackend.Generation, known: Set<String>
    ) async {
        let previous = redisGeneration.withLock { seen in
            defer { seen = generation }
            return seen
        }
        guard previous != generation else { return }
        let (lost, checkedAll) = await removeLostShared(redis)
        // Some master did not answer: the next resynchronization looks again.
        if !checkedAll { redisGeneration.withLock { if $0 == generation { $0 = previous } } }
        let remade = declaredShared.withLock { $0 }.filter { declaration in
            let key = "\(declaration.kind.noun):\(declaration.name)"
            // At the first look, the declared resources are being made already (`createDeclaredShared`).
            return lost.contains(key) || (previous != nil && !known.contains(key))
        }
        if !remade.isEmpty {
            logger.warn(
                "redis restarted or emptied: declared resources it lost are made again",
                [("resources", .array(remade.map { .string("\($0.kind.rawValue)/\($0.name)") }))])
            declareShared(remade)
        }
    }

    /// Removes from Redis's index the resources a master lost (a Cluster
    /// master back empty: the index, on another, still names them); every
    /// instance hears they are deleted, and this one forgets them at once.
    /// Masters that do not answer are asked again for up to 10 s. Answers
    /// the `kind:name` of each lost resource, and whether every entry was checked.
    private func removeLostShared(_ redis: RedisBackend) async -> (lost: Set<String>, checkedAll: Bool) {
        var lost = Set<String>()
        for attempt in 0..<50 where !isStopping {
            if attempt > 0 { try? await Task.sleep(for: .milliseconds(200)) }
            guard let found = try? await redis.removeLost() else { continue }
            for (noun, name) in found.removed {
                lost.insert("\(noun):\(name)")
                if let kind = ResourceKind(noun: noun) { registry.forget(kind, name) }
            }
            if !found.removed.isEmpty {
                logger.warn(
                    "redis lost resources: removed from the index",
                    [("resources", .array(found.removed.map { .string("\($0.kind)/\($0.name)") }))])
            }
            if found.unchecked == 0 { return (lost, true) }
        }
        return (lost, false)
    }

    /// A resource this process does not know may have been created through
    /// another instance a moment ago: looks it up in Redis's index. One the
    /// index names without its keys is being deleted (the entry goes after
    /// the keys), or was lost (looked into): not adopted, so 404.
    /// One whose master does not answer is adopted (it answers 503).
    func discoverShared(_ kind: ResourceKind, _ name: String) async -> Bool {
        guard let redis, Self.sharedKind(kind) != nil else { return false }
        async let indexed = try? redis.isIndexed(kind: kind.noun, name: name)
        async let present = try? redis.hasKeys(kind: kind.noun, name: name)
        guard await indexed == true else { return false }
        guard await present != false else {
            lookIntoMissing(kind, name)
            return false
        }
        return adoptShared(kind, name) != nil
    }

    /// True once shutdown has begun.
    var isStopping: Bool { stopping.load(ordering: .relaxed) }

    /// Begins shutdown: readiness turns 503, and every parked long-poll is
    /// answered 503 `shutting_down`; new waits are refused the same way.
    func beginShutdown() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        for resource in registry.all() { resource.markShuttingDown() }
    }

    // MARK: HTTPHandler

    package func handle(_ request: HTTPRequest) -> HTTPHandlerResult {
        let start = HTTPMetrics.now()
        var template = "unmatched"
        var slot: Int?
        let result = dispatch(request, template: &template, slot: &slot)
        let measured = httpMetrics.measure(result, slot: slot, route: template, method: request.method, since: start)
        guard logger.level == .debug else { return measured }
        return accessLogged(measured, request: request, route: template, since: start)
    }

    /// At `debug`, one access-log line per answered request (after a long-poll
    /// ends, for deferred answers).
    private func accessLogged(
        _ result: HTTPHandlerResult, request: HTTPRequest, route: String, since start: UInt64
    ) -> HTTPHandlerResult {
        let logger = self.logger
        let method = request.method
        let path = request.path
        @Sendable func log(_ status: Int) {
            logger.debug(
                "request",
                [
                    ("method", .string(method)), ("path", .string(path)), ("route", .string(route)),
                    ("status", .int(status)), ("seconds", .double(HTTPMetrics.seconds(since: start))),
                ])
        }
        switch result {
        case .respond(let response):
            log(response.status)
            return result
        case .stream(let stream):
            log(stream.status)
            return result
        case .deferred, .handedOver:
            return result.observingDeferred { log($0.status) }
        }
    }

    /// Routes a request; `template` and `slot` are set to the matched route's.
    /// The path is canonical already (`RequestTarget`).
    private func dispatch(_ request: HTTPRequest, template: inout String, slot: inout Int?) -> HTTPHandlerResult {
        let match = router.match(request.method, request.path)
        var route: Route?
        if case .found(let found, let matched, _) = match {
            route = found
            template = matched
            slot = found.slot
        }
        if let refused = access.refusal(for: request, access: route?.access ?? RouteAccess(path: request.path)) {
            return .respond(refused.response)
        }
        switch match {
        case .notFound:
            return .respond(APIError.notFound("no route for \(request.path)").response)
        case .methodNotAllowed(let allowed):
            return .respond(APIError.methodNotAllowed(request.method, allowed: allowed).response)
        case .found(let route, _, let parameters):
            let call = Call(request: request, parameters: parameters, app: self)
            do throws(APIError) {
                return try route.run(call)
            } catch {
                guard let (kind, name) = error.unknownResource, redis != nil else { return .respond(error.response) }
                return later { () async throws(APIError) -> HTTPResponse in
                    guard await self.discoverShared(kind, name) else { throw error }
                    return await Self.resolve(try route.run(call))
                }
            }
        }
    }

    package func refusal(_ refusal: HTTPRefusal) -> HTTPResponse {
        switch refusal {
        case .badRequest(let detail): APIError.badRequest(detail).response
        case .payloadTooLarge(let limit): APIError.payloadTooLarge(limit: limit).response
        case .notImplemented(let detail): APIError.notImplemented(detail).response
        case .uriTooLong(let detail): APIError.uriTooLong("\(detail) (max_query_parameters)").response
        case .headerFieldsTooLarge(let detail): APIError.headerFieldsTooLarge(detail).response
        }
    }

    /// The Host, Origin and token checks, on the head of a request that
    /// waits for `100 Continue`: a refusal must come before the client sends
    /// its body. Counted and logged like any answer.
    package func refusalBeforeBody(_ request: HTTPRequest) -> HTTPResponse? {
        let start = HTTPMetrics.now()
        var template = "unmatched"
        var slot: Int?
        var access = RouteAccess(path: request.path)
        if case .found(let route, let matched, _) = router.match(request.method, request.path) {
            template = matched
            slot = route.slot
            access = route.access
        }
        guard let refused = self.access.refusal(for: request, access: access) else { return nil }
        var result = httpMetrics.measure(
            .respond(refused.response), slot: slot, route: template, method: request.method, since: start)
        if logger.level == .debug { result = accessLogged(result, request: request, route: template, since: start) }
        guard case .respond(let response) = result else { return refused.response }
        return response
    }

    /// The response of a handler's result, awaiting a deferred one (a stream
    /// cannot be answered from inside another deferred answer: 500).
    private static func resolve(_ result: HTTPHandlerResult) async -> HTTPResponse {
        switch result {
        case .respond(let response): return response
        case .deferred(let work, let finished):
            let response = await work()
            finished?(response)
            return response
        case .handedOver(let start, let finished):
            let response = await withCheckedContinuation { done in start { done.resume(returning: $0) } }
            finished?(response)
            return response
        case .stream: return APIError.internalError("a stream cannot follow a Redis lookup").response
        }
    }

    /// Runs `work` with the connection parked, mapping its error to a problem.
    /// Refused with 503 once shutdown has begun.
    func later(_ work: @escaping @Sendable () async throws(APIError) -> HTTPResponse) -> HTTPHandlerResult {
        if isStopping { return .respond(APIError.shuttingDown().response) }
        return .deferred {
            do throws(APIError) { return try await work() } catch { return error.response }
        }
    }

    /// Hands `start` the function to answer through, with the connection
    /// parked and no task (see `HTTPHandlerResult.handedOver`). Refused with
    /// 503 once shutdown has begun.
    func handedOver(_ start: @escaping @Sendable (@escaping @Sendable (HTTPResponse) -> Void) -> Void)
        -> HTTPHandlerResult
    {
        if isStopping { return .respond(APIError.shuttingDown().response) }
        return .handedOver(start)
    }

    /// The deadline for a `wait` of `seconds` from now.
    func deadline(after seconds: Double) -> Timestamp { clock.now().adding(seconds: seconds) }

    // MARK: Operations routes

    private static func addOperationsRoutes(to router: inout Router<Route>) {
        router.add("GET", "/healthz") { _ throws(APIError) in
            .respond(Reply.encoded(StatusBody(status: "ok")))
        }
        router.add("GET", "/metrics") { call throws(APIError) in
            MetricsRoute.handle(call.app)
        }
        router.add("GET", "/readyz") { call throws(APIError) in
            let app = call.app
            if app.isStopping {
                // Not `Connection: close`: the connection may carry the next request.
                var refusal = APIError.shuttingDown()
                refusal.headers.removeAll { $0.name == "Connection" }
                return .respond(refusal.response)
            }
            guard let redis = app.redis else { return .respond(Reply.encoded(StatusBody(status: "ready"))) }
            return app.later { () async throws(APIError) -> HTTPResponse in
                if let reason = await redis.unavailableReason() { throw APIError.backendUnavailable(reason) }
                return Reply.encoded(StatusBody(status: "ready"))
            }
        }
        router.add("GET", "/openapi.json") { _ throws(APIError) in
            .respond(OpenAPIDocument.response())
        }
        router.add("GET", "/v1") { call throws(APIError) in
            _ = try call.query(allowing: [])
            let counts = call.app.registry.counts()
            let kinds = ResourceKind.allCases.map { KindsBody.Kind(kind: $0, count: counts[$0] ?? 0) }
            return .respond(Reply.encoded(KindsBody(kinds: kinds)))
        }
    }
}
