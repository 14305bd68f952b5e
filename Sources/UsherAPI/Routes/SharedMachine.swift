import UsherCore
import UsherRedis

extension RedisMachine: RedisManager {
    package func deleteShared() -> Pending<Void, APIError> {
        .async { [self] () async throws(APIError) in
            let existed: Bool
            do throws(MachineError) { existed = try await delete() } catch { throw APIError(error) }
            guard existed else { throw APIError.notFound("machine \(name) not found") }
        }
    }

    package func sharedSummary() -> Pending<JSONValue, APIError> {
        readSnapshot().mapError(APIError.init).map { snapshot in
            .object([
                ("name", .string(snapshot.name)),
                ("definition", MachineRoutes.definitionSummary(snapshot.definitionName, snapshot.definition)),
                ("state", .string(snapshot.state)),
                ("version", .int(Int(snapshot.version))),
                ("backend", .string("redis")),
            ])
        }
    }
}

extension MachineRoutes: SharedKind {
    static func sharedManager(name: String, redis: RedisBackend, events: EventLog) -> any SharedResource {
        RedisMachine(name: name, backend: redis, events: events)
    }

    static func prepareShared(name: String, config: JSONValue, path: String, settings: UsherConfig)
        throws(FieldError) -> SharedDeclaration
    {
        let spec = try MachineSpec.parse(config, path: path, definitions: settings.definitions)
        return SharedDeclaration(kind: kind, name: name) { app async throws(APIError) in
            // A machine has no PATCH: another definition there stays, and is logged.
            _ = try await creating(name: name, spec: spec, backend: .redis, in: app).value()
        }
    }
}
