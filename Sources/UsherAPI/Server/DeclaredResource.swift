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

/// A resource the config file keeps in Redis, read and checked: `declare`
/// creates it there, or brings the one there to the declaration, once Redis answers.
struct SharedDeclaration: Sendable {
    let kind: ResourceKind
    let name: String
    let declare: @Sendable (UsherApp) async throws(APIError) -> Void
}
