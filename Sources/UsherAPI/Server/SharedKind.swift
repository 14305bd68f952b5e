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
    /// The routes of a kind that can be kept in Redis, or nil.
    static func sharedKind(_ kind: ResourceKind) -> (any SharedKind.Type)? {
        kinds.first { $0.kind == kind } as? any SharedKind.Type
    }
}
