import UsherCore

/// A resource the config file declares, read and checked but not yet applied:
/// `apply` brings the resource of that name to the declared config, creating
/// it when it does not exist and changing it as a `PATCH` would when it does.
/// Start-up and SIGHUP share it.
struct DeclaredResource {
    let kind: ResourceKind
    let name: String
    let apply: (UsherApp) -> DeclaredOutcome
}

/// What applying a declared resource did.
enum DeclaredOutcome: Equatable {
    case created
    case changed
    case unchanged
    /// What a `PATCH` can change was changed; the rest cannot change in place.
    case partlyChanged(String)
    /// Kept in Redis: applied there in the background.
    case inRedis
    case failed(String)

    /// Creates the resource.
    static func creating(_ create: () throws(APIError) -> Void) -> DeclaredOutcome {
        do throws(APIError) { try create() } catch { return .failed(error.detail) }
        return .created
    }

    /// Patches a resource whose config is `current()` towards `wanted`;
    /// `fixed` says what a patch cannot change, should some difference remain.
    static func patching<Config: Equatable>(
        current: () -> Config, wanted: Config, fixed: String, _ patch: () throws(APIError) -> Void
    ) -> DeclaredOutcome {
        if current() == wanted { return .unchanged }
        do throws(APIError) { try patch() } catch { return .failed(error.detail) }
        return current() == wanted ? .changed : .partlyChanged(fixed)
    }
}

extension ResourceAPI {
    /// Creates a resource the config file declares at start-up; errors name
    /// the field under `path` (e.g. `queues.printer.capacity`).
    static func createDeclared(name: String, config: JSONValue, path: String, in app: UsherApp) throws(FieldError) {
        let declared = try prepareDeclared(name: name, config: config, path: path, in: app)
        if case .failed(let detail) = declared.apply(app) { throw FieldError(field: path, message: detail) }
    }
}
