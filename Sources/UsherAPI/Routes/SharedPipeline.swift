import UsherCore
import UsherRedis

extension RedisPipeline: RedisManager {
    package func deleteShared() -> Pending<Void, APIError> {
        .async { [self] () async throws(APIError) in
            let existed: Bool
            do throws(PipelineError) { existed = try await delete() } catch { throw APIError(error) }
            guard existed else { throw APIError.notFound("pipeline \(name) not found") }
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
            try await declareShared(name: name, config: wanted, in: app)
        }
    }
}
