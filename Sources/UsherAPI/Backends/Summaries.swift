import UsherCore

/// Each kind's summary in `GET /v1/{kind}` and in `created` events, the same
/// from both backends; one kept in Redis adds `"backend": "redis"`.
enum Summary {
    static func queue(_ name: String, capacity: Int, _ counts: QueueCounts, in backend: Backend) -> JSONValue {
        object(
            [
                ("name", .string(name)), ("capacity", .int(capacity)), ("holding", .int(counts.holding)),
                ("waiting", .int(counts.waiting)), ("delayed", .int(counts.delayed)),
            ], backend)
    }

    static func window(_ name: String, showing: String?, queued: Int, in backend: Backend) -> JSONValue {
        object(
            [("name", .string(name)), ("showing", showing.map { .string($0) } ?? .null), ("queued", .int(queued))],
            backend)
    }

    static func pool(
        _ name: String, size: Int, maxSize: Int, available: Int, leased: Int, waiting: Int, in backend: Backend
    ) -> JSONValue {
        object(
            [
                ("name", .string(name)), ("size", .int(size)), ("max_size", .int(maxSize)),
                ("available", .int(available)),
                ("leased", .int(leased)), ("waiting", .int(waiting)),
            ], backend)
    }

    static func pipeline(_ state: PipelineSnapshot, in backend: Backend) -> JSONValue {
        object(
            [
                ("name", .string(state.name)), ("capacity", .int(state.capacity)), ("ready", .int(state.ready)),
                ("in_flight", .int(state.inFlight)), ("delayed", .int(state.delayed)), ("dead", .int(state.dead)),
            ], backend)
    }

    static func machine(
        _ name: String, definitionName: String?, definition: MachineDefinition, state: String, version: Int64,
        in backend: Backend
    ) -> JSONValue {
        object(
            [
                ("name", .string(name)),
                ("definition", MachineRoutes.definitionSummary(definitionName, definition)),
                ("state", .string(state)), ("version", .int(Int(version))),
            ], backend)
    }

    private static func object(_ members: [(String, JSONValue)], _ backend: Backend) -> JSONValue {
        switch backend {
        case .memory: .object(members)
        case .redis: .object(members + [("backend", .string(Backend.redis.rawValue))])
        }
    }
}
