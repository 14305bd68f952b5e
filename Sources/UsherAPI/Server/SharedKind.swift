import UsherCore
import UsherRedis

/// A kind whose resources can be kept in Redis (`"backend": "redis"`).
protocol SharedKind: ResourceAPI {
    /// This process's manager of the resource of that name in Redis.
    static func sharedManager(name: String, redis: RedisBackend, events: EventLog) -> any SharedResource
    /// Reads a config file declaration kept in Redis, without applying it;
    /// errors name the field under `path`.
    static func prepareShared(name: String, config: JSONValue, path: String, settings: UsherConfig)
        throws(FieldError) -> SharedDeclaration
}

/// A resource the config file keeps in Redis, read and checked: `declare`
/// creates it there, or brings the one there to the declaration, once Redis answers.
struct SharedDeclaration: Sendable {
    let kind: ResourceKind
    let name: String
    let declare: @Sendable (UsherApp) async throws(APIError) -> Void
}

extension UsherApp {
    /// The routes of `kind`, each of which can keep its resources in Redis.
    static func sharedKind(_ kind: ResourceKind) -> (any SharedKind.Type)? {
        kinds.first { $0.kind == kind }
    }
}

extension UsherApp {
    /// Makes a resource in Redis through `manager`, this process's new manager
    /// of it: checks `max_resources` against Redis's index (unless it is
    /// there), runs `create`
    /// (which answers what is there, made now or before), and, when it made
    /// the resource, adds it to the index and tells every instance. Answers
    /// the manager registered here (`manager`, or one registered meanwhile).
    func createShared<Value: Sendable>(
        _ kind: ResourceKind, _ name: String, manager: any SharedResource,
        create: () async throws(APIError) -> (Value, Bool)
    ) async throws(APIError) -> (registered: any ManagedResource, value: Value, created: Bool) {
        guard let redis else { throw APIError.internalError("no redis block") }
        let indexed: Int
        do throws(ScriptFailure) { indexed = try await redis.indexedCount() } catch {
            throw .backendUnavailable("\(error)")
        }
        // At the cap, one that exists (this process has not heard of it yet) is still found.
        if indexed >= config.maxResources, await !discoverShared(kind, name) {
            throw APIError.tooMany(
                "too_many_resources", "Too many resources",
                "at most \(config.maxResources) resources may exist in Redis (max_resources)", retryAfter: nil)
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
