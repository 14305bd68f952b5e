import UsherCore
import UsherRedis

extension RedisWindow: RedisManager {
    package func deleteShared() -> Pending<Void, APIError> {
        .async { [self] () async throws(APIError) in
            let existed: Bool
            do throws(WindowError) { existed = try await delete() } catch { throw APIError(error) }
            guard existed else { throw APIError.notFound("window \(name) not found") }
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
            try await declareShared(name: name, config: wanted, in: app)
        }
    }

    /// Creates a window in Redis, or finds the one there with the same config
    /// (created through any instance).
    static func creatingShared(name: String, config: WindowConfig, in app: UsherApp) -> Pending<
        Created<any WindowService>, APIError
    > {
        guard let redis = app.redis else { return .ready(.failure(.noRedisBlock)) }
        if let existing = try? app.registry.resource(.windows, name) {
            guard let window = existing as? RedisWindow else {
                return .ready(.failure(.alreadyExists("window", name)))
            }
            return .async { () async throws(APIError) -> Created<any WindowService> in
                let current: WindowConfig
                do throws(WindowError) { current = try await window.readConfig().value() } catch .gone {
                    // Known here, gone from Redis (deleted, or lost in a restart): made anew.
                    app.registry.forget(.windows, name)
                    return try await creatingShared(name: name, config: config, in: app).value()
                } catch { throw APIError(error) }
                guard current == config else { throw APIError.alreadyExists("window", name) }
                return Created(manager: window, created: false)
            }
        }
        return .async { () async throws(APIError) -> Created<any WindowService> in
            let made = RedisWindow(name: name, backend: redis, events: app.events)
            let shared = try await app.createShared(.windows, name, manager: made) { () async throws(APIError) in
                do throws(WindowError) {
                    let (current, created) = try await made.create(config)
                    return (current, created)
                } catch { throw APIError(error) }
            }
            guard let window = shared.registered as? RedisWindow, shared.value == config else {
                throw APIError.alreadyExists("window", name)
            }
            return Created(manager: window, created: shared.created)
        }
    }

    /// Brings a window the config file keeps in Redis to its declared config.
    static func declareShared(name: String, config: WindowConfig, in app: UsherApp) async throws(APIError) {
        do throws(APIError) {
            _ = try await creatingShared(name: name, config: config, in: app).value()
        } catch  where error.code == "already_exists" {
            guard let window = try app.registry.resource(.windows, name) as? RedisWindow else { throw error }
            do throws(WindowError) { _ = try await window.applyPatch(patch(to: config)).value() } catch {
                throw APIError(error)
            }
        }
    }
}
