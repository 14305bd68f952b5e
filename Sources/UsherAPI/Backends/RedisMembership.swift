import Locking
import RedisClient
import UsherCore
import UsherRedis

/// What the app keeps about Redis: the declarations to make again should
/// Redis lose them, the generation last seen, the losses being looked into.
final class RedisState: Sendable {
    /// Resources the config file (as last applied) keeps in Redis: created
    /// there once Redis answers, and again should Redis lose them.
    let declared: Locked<[SharedDeclaration]>
    /// Redis's generation last seen: a new one means Redis restarted, failed
    /// over or was emptied, and may have lost resources.
    let generation = Locked<RedisBackend.Generation?>(nil)
    /// The `kind:name` of the resources found missing that are being looked into.
    let missingChecks = Locked<Set<String>>([])

    init(declared: [SharedDeclaration]) { self.declared = Locked(declared) }
}

// The membership of Redis-backed resources in this process: which it knows,
// how it learns of new and deleted ones, and what it does when Redis
// restarts or is emptied.
extension UsherApp {
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
                let known = app.redisState.generation.withLock { $0?.epoch }
                // Redis not answering says nothing: its return is a reconnect, which resynchronizes.
                do throws(ScriptFailure) {
                    if try await redis.currentEpoch() != known { await app.resynchronizeShared() }
                } catch {}
                try? await Task.sleep(for: .seconds(Self.epochCheckSeconds))
            }
        }
    }

    /// Creates the declared Redis-backed resources.
    private func createDeclaredShared() {
        declareShared(redisState.declared.withLock { $0 })
    }

    /// A reload's declarations kept in Redis: the ones re-created should Redis lose them.
    func replaceDeclaredShared(_ declarations: [SharedDeclaration]) {
        redisState.declared.withLock { $0 = declarations }
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
            guard let resource = app.adoptShared(kind, name) else { return }
            do throws(APIError) { try await resource.deleting(from: app.registry).value() } catch
                where error.status == 404
            {}
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
            if lost { declareShared(redisState.declared.withLock { $0 }.filter { $0.kind == kind && $0.name == name }) }
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
        guard redisState.missingChecks.withLock({ $0.insert(key).inserted }) else { return }
        Task {
            defer { _ = redisState.missingChecks.withLock { $0.remove(key) } }
            let current: String?
            do throws(ScriptFailure) { current = try await redis.currentEpoch() } catch { return }
            guard current == redisState.generation.withLock({ $0?.epoch }) else { return await resynchronizeShared() }
            switch await redis.checkMissing(kind: kind.noun, name: name) {
            case .deleted, .lost: registry.forget(kind, name)
            case .present, .unchecked: break
            }
        }
    }

    /// This process's manager of the Redis-backed resource (made and
    /// registered the first time), or nil without a `redis` block.
    func adoptShared(_ kind: ResourceKind, _ name: String) -> (any ManagedResource)? {
        guard let redis, let backed = Self.kinds.first(where: { $0.kind == kind }) else { return nil }
        return registry.adopt(kind, name) { backed.sharedManager(name: name, redis: redis, in: self) }
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
        let before = registry.shared()
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
            // The read may be older than a deletion since: what this process
            // does not know yet is adopted only while its keys are there.
            if !registry.contains(kind, name), (try? await redis.hasKeys(kind: noun, name: name)) == false { continue }
            await adoptShared(kind, name)?.catchUp()
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
        let previous = redisState.generation.withLock { seen in
            defer { seen = generation }
            return seen
        }
        guard previous != generation else { return }
        let (lost, checkedAll) = await removeLostShared(redis)
        // Some master did not answer: the next resynchronization looks again.
        if !checkedAll { redisState.generation.withLock { if $0 == generation { $0 = previous } } }
        let remade = redisState.declared.withLock { $0 }.filter { declaration in
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
        guard let redis else { return false }
        async let indexed = try? redis.isIndexed(kind: kind.noun, name: name)
        async let present = try? redis.hasKeys(kind: kind.noun, name: name)
        guard await indexed == true else { return false }
        guard await present != false else {
            lookIntoMissing(kind, name)
            return false
        }
        return adoptShared(kind, name) != nil
    }

    /// Makes a resource in Redis through `manager`, this process's new manager
    /// of it: checks `max_resources` against Redis's index (unless it is
    /// there), runs `create`
    /// (which answers what is there, made now or before), and, when it made
    /// the resource, adds it to the index and tells every instance. Answers
    /// the manager registered here (`manager`, or one registered meanwhile).
    func createShared<Value: Sendable>(
        _ kind: ResourceKind, _ name: String, manager: any ManagedResource,
        create: () async throws(APIError) -> (Value, Bool)
    ) async throws(APIError) -> (registered: any ManagedResource, value: Value, created: Bool) {
        guard let redis else { throw APIError.internalError("no redis block") }
        let indexed: Int
        do throws(ScriptFailure) { indexed = try await redis.indexedCount() } catch {
            throw .backendUnavailable("\(error)")
        }
        // At the cap, one that exists (this process has not heard of it yet) is still found.
        if indexed >= config.maxResources, await !discoverShared(kind, name) {
            throw APIError.tooManyResources(limit: config.maxResources, counted: " in Redis")
        }
        let (value, created) = try await create()
        if created {
            do throws(ScriptFailure) { try await redis.announceCreated(kind: kind.noun, name: name) } catch {
                throw .backendUnavailable("\(error)")
            }
        }
        return (registry.adopt(kind, name, make: { manager }), value, created)
    }
}
