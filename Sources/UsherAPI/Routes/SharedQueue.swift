import UsherCore
import UsherRedis

extension RedisQueue: RedisManager {
    package func deleteShared() -> Pending<Void, APIError> {
        .async { [self] () async throws(APIError) in
            let existed: Bool
            do throws(QueueError) { existed = try await delete() } catch { throw APIError(error) }
            guard existed else { throw APIError.notFound("queue \(name) not found") }
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
            try await declareShared(name: name, config: wanted, in: app)
        }
    }
}
