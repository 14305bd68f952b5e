import Answers
import UsherCore
import UsherRedis

/// A kind's manager in Redis as the lifecycle sees it: `RedisLifecycle`
/// makes, finds and declares it; deleting is the same for every kind.
protocol ConfiguredRedisManager: RedisManager, RedisResource {
    associatedtype Config: Equatable & Sendable
    static var kind: ResourceKind { get }
    static func apiError(_ error: Store.Failure) -> APIError
    /// Why a resource with `config` cannot be kept in Redis (the field and
    /// why), or nil (by default).
    static func refusal(of config: Config) -> (field: String, message: String)?
    /// This process's manager of the resource `name` in Redis (not yet registered).
    static func make(name: String, redis: RedisBackend, in app: UsherApp) -> Self
    func readConfig() -> Pending<Config, Store.Failure>
    /// Makes the resource with `config`, or answers the config of the one there.
    func create(_ config: Config) async throws(Store.Failure) -> (config: Config, created: Bool)
    /// Brings the resource there, made with another config, to a declared one.
    func reconcile(to config: Config) async throws(APIError)
}

extension ConfiguredRedisManager {
    static func refusal(of config: Config) -> (field: String, message: String)? { nil }

    func deleting(from registry: Registry) -> Pending<Void, APIError> {
        .async { [self] () async throws(APIError) in
            let existed: Bool
            do throws(Store.Failure) { existed = try await delete() } catch { throw Self.apiError(error) }
            guard existed else { throw APIError.notFound("\(Self.kind.noun) \(name) not found") }
            registry.forget(Self.kind, name)
        }
    }
}

/// Creating and declaring a resource of a configured kind in Redis, for every kind.
enum RedisLifecycle<Manager: ConfiguredRedisManager> {
    /// Creates the resource in Redis, or finds the one there with the same
    /// config (created through any instance).
    static func creating(name: String, config: Manager.Config, in app: UsherApp) -> Pending<
        Created<Manager>, APIError
    > {
        let kind = Manager.kind
        guard let redis = app.redis else { return .ready(.failure(.noRedisBlock)) }
        if let (field, message) = Manager.refusal(of: config) {
            return .ready(.failure(.badRequest(message, field: field)))
        }
        if let existing = try? app.registry.resource(kind, name) {
            guard let manager = existing as? Manager else {
                return .ready(.failure(.alreadyExists(kind.noun, name)))
            }
            return .async { () async throws(APIError) -> Created<Manager> in
                let current: Manager.Config
                do throws(Manager.Store.Failure) { current = try await manager.readConfig().value() } catch {
                    guard error.isGone else { throw Manager.apiError(error) }
                    // Known here, gone from Redis (deleted, or lost in a restart): made anew.
                    app.registry.forget(kind, name)
                    return try await creating(name: name, config: config, in: app).value()
                }
                guard current == config else { throw APIError.alreadyExists(kind.noun, name) }
                return Created(manager: manager, created: false)
            }
        }
        return .async { () async throws(APIError) -> Created<Manager> in
            let made = Manager.make(name: name, redis: redis, in: app)
            let shared = try await app.createShared(kind, name, manager: made) { () async throws(APIError) in
                do throws(Manager.Store.Failure) {
                    let (current, created) = try await made.create(config)
                    return (current, created)
                } catch { throw Manager.apiError(error) }
            }
            guard let manager = shared.registered as? Manager, shared.value == config else {
                throw APIError.alreadyExists(kind.noun, name)
            }
            return Created(manager: manager, created: shared.created)
        }
    }

    /// Brings a resource the config file keeps in Redis to its declared config.
    static func declare(name: String, config: Manager.Config, in app: UsherApp) async throws(APIError) {
        do throws(APIError) {
            _ = try await creating(name: name, config: config, in: app).value()
        } catch  where error.code == "already_exists" {
            guard let manager = try app.registry.resource(Manager.kind, name) as? Manager else { throw error }
            try await manager.reconcile(to: config)
        }
    }
}
