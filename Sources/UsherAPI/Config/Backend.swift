import UsherCore

/// Where a resource's state lives: this process's memory, or the Redis server
/// of the `redis` block, shared by every Usher that uses it. A resource keeps
/// its backend for life (changing it needs DELETE + PUT).
enum Backend: String, Sendable, CaseIterable {
    case memory, redis

    /// Reads a `backend` (or `default_backend`) value; errors name `field`
    /// and the allowed values.
    static func parse(_ value: JSONValue, field: String) throws(FieldError) -> Backend {
        guard case .string(let text) = value, let backend = Backend(rawValue: text) else {
            throw FieldError(field: field, message: "must be \"memory\" or \"redis\"")
        }
        return backend
    }

    /// Takes the `backend` member out of a resource's config object (a config
    /// file declaration or a PUT body), so that the kind's own reader, which
    /// refuses unknown members, never sees it. `path` is the object's dotted
    /// path (`queues.deploys`, or empty for a body); without the member, the
    /// backend is `otherwise`. A value that is not an object is left as it is.
    static func split(_ config: JSONValue, path: String, otherwise: Backend) throws(FieldError) -> (
        config: JSONValue, backend: Backend
    ) {
        guard case .object(var members) = config, let i = members.firstIndex(where: { $0.0 == "backend" }) else {
            return (config, otherwise)
        }
        let value = members.remove(at: i).1
        let backend = value == .null ? otherwise : try parse(value, field: path.isEmpty ? "backend" : "\(path).backend")
        return (.object(members), backend)
    }
}
