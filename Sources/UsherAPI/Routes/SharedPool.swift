import UsherCore
import UsherRedis

extension RedisPool: RedisManager {
    package func deleteShared() -> Pending<Void, APIError> {
        .async { [self] () async throws(APIError) in
            let existed: Bool
            do throws(PoolError) { existed = try await delete() } catch { throw APIError(error) }
            guard existed else { throw APIError.notFound("pool \(name) not found") }
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
            try await declareShared(name: name, config: wanted, in: app)
        }
    }
}
