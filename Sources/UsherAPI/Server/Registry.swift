import Locking
import UsherCore

/// The resource kinds, as they appear in paths.
package enum ResourceKind: String, Sendable, CaseIterable {
    case queues, windows, pools, pipelines, machines

    /// The singular noun, for messages.
    var noun: String { String(rawValue.dropLast()) }

    /// The kind of a singular noun (`queue`), as notices name it.
    init?(noun: String) {
        self.init(rawValue: noun + "s")
    }

    /// Its place in `allCases` (the registry's table index: no hashing).
    var index: Int {
        switch self {
        case .queues: 0
        case .windows: 1
        case .pools: 2
        case .pipelines: 3
        case .machines: 4
        }
    }
}

/// What the registry needs from every resource manager.
package protocol ManagedResource: AnyObject, Sendable {
    /// The resource's name.
    var name: String { get }
    /// A short summary for list routes.
    func summary() -> JSONValue
    /// The resource is deleted: requests waiting on it get 410.
    func markDeleted()
    /// The server is stopping: requests waiting on it get 503.
    func markShuttingDown()
}

/// A resource whose state lives outside this process (in Redis), shared
/// with every instance that uses the same store.
package protocol SharedResource: ManagedResource {
    /// Starts hearing what other instances do to it (once it is registered).
    func startListening()
    /// Deletes it in the store; every instance (this one too) hears of it.
    func deleteShared() -> Pending<Void, APIError>
    /// The list route's summary, with counts read from the store.
    func sharedSummary() -> Pending<JSONValue, APIError>
    /// Applies what came due while no timer here watched (after a start or a reconnect).
    func catchUp() async
}

/// Every resource by kind and name, with the `max_resources` cap.
///
/// A mutex, not an actor: a lookup happens on every request and is a
/// dictionary read that never waits.
package final class Registry: Sendable {
    private struct State {
        /// By `ResourceKind.index`, then by name.
        var resources = [[String: any ManagedResource]](repeating: [:], count: ResourceKind.allCases.count)
        var count = 0
    }

    private let state = Locked(State())
    /// The cap on resources of all kinds.
    let maxResources: Int
    /// Where `created` and `deleted` are emitted (nil: nowhere).
    private let events: EventLog?

    package init(maxResources: Int, events: EventLog? = nil) {
        self.maxResources = maxResources
        self.events = events
    }

    /// The resource of this kind and name, or 404.
    package func resource(_ kind: ResourceKind, _ name: String) throws(APIError) -> any ManagedResource {
        guard let resource = state.withLock({ $0.resources[kind.index][name] }) else {
            var error = APIError.notFound("\(kind.noun) \(name) not found")
            error.unknownResource = (kind, name)
            throw error
        }
        return resource
    }

    /// Adds a resource that lives elsewhere (Redis) unless one of that name is
    /// here: it does not count against `max_resources` here (Redis's index
    /// does). Emits `created` when added; answers the one registered.
    package func adopt(
        _ kind: ResourceKind, _ name: String, make: () -> any SharedResource
    ) -> any ManagedResource {
        let outcome = state.withLock { s -> (resource: any ManagedResource, added: Bool) in
            if let existing = s.resources[kind.index][name] { return (existing, false) }
            let resource = make()
            s.resources[kind.index][name] = resource
            return (resource, true)
        }
        if outcome.added {
            (outcome.resource as? any SharedResource)?.startListening()
            if let events, events.isRecording {
                events.emit(
                    ResourceEvent.Draft(
                        kind: kind.noun, name: name, type: "created", subject: .summary(outcome.resource.summary())))
            }
        }
        return outcome.resource
    }

    /// Drops a resource that lives elsewhere and was deleted there (its
    /// waiters here get 410); nothing when it is not here or lives here.
    package func forget(_ kind: ResourceKind, _ name: String) {
        let removed = state.withLock { s -> (any ManagedResource)? in
            guard s.resources[kind.index][name] is any SharedResource else { return nil }
            return s.resources[kind.index].removeValue(forKey: name)
        }
        guard let removed else { return }
        removed.markDeleted()
        if let events, events.isRecording {
            events.emit(
                ResourceEvent.Draft(kind: kind.noun, name: name, type: "deleted", subject: .deleted(name: name)))
        }
    }

    /// The resource of this kind and name, as its concrete type, or 404.
    package func lookup<R: ManagedResource>(_ kind: ResourceKind, _ name: String, as type: R.Type) throws(APIError) -> R
    {
        guard let resource = state.withLock({ $0.resources[kind.index][name] }) else {
            throw APIError.notFound("\(kind.noun) \(name) not found")
        }
        // The exact class (always, in practice) without a dynamic cast.
        if ObjectIdentifier(Swift.type(of: resource)) == ObjectIdentifier(R.self) {
            return unsafeDowncast(resource, to: R.self)
        }
        guard let typed = resource as? R else { throw APIError.notFound("\(kind.noun) \(name) not found") }
        return typed
    }

    /// Creates a resource unless one of that name exists. For an existing one,
    /// `matches` decides between 200 (same config) and 409 `already_exists`.
    /// Answers the resource and whether it was created.
    package func create<R: ManagedResource>(
        _ kind: ResourceKind, _ name: String, make: () -> R, matches: (R) -> Bool
    ) throws(APIError) -> (resource: R, created: Bool) {
        let outcome = try state.withLock { (s: inout State) throws(APIError) -> (resource: R, created: Bool) in
            if let existing = s.resources[kind.index][name] {
                guard let typed = existing as? R, matches(typed) else { throw APIError.alreadyExists(kind.noun, name) }
                return (typed, false)
            }
            guard s.count < maxResources else {
                throw APIError.tooMany(
                    "too_many_resources", "Too many resources",
                    "at most \(maxResources) resources may exist (max_resources)", retryAfter: nil)
            }
            let resource = make()
            s.resources[kind.index][name] = resource
            s.count += 1
            return (resource, true)
        }
        if outcome.created, let events, events.isRecording {
            events.emit(
                ResourceEvent.Draft(
                    kind: kind.noun, name: name, type: "created", subject: .summary(outcome.resource.summary())))
        }
        return outcome
    }

    /// Removes a resource and closes it (its waiters get 410), or 404.
    package func remove(_ kind: ResourceKind, _ name: String) throws(APIError) {
        let removed = state.withLock { s -> (any ManagedResource)? in
            guard let r = s.resources[kind.index].removeValue(forKey: name) else { return nil }
            if !(r is any SharedResource) { s.count -= 1 }
            return r
        }
        guard let removed else { throw APIError.notFound("\(kind.noun) \(name) not found") }
        removed.markDeleted()
        if let events, events.isRecording {
            events.emit(
                ResourceEvent.Draft(kind: kind.noun, name: name, type: "deleted", subject: .deleted(name: name)))
        }
    }

    /// The resources of a kind, sorted by name.
    package func list(_ kind: ResourceKind) -> [any ManagedResource] {
        state.withLock { s in s.resources[kind.index].values.sorted { $0.name < $1.name } }
    }

    /// Up to `limit` resources of a kind whose names sort after `after`, by
    /// name, and whether more follow.
    package func list(_ kind: ResourceKind, after: String?, limit: Int) -> (
        resources: [any ManagedResource], more: Bool
    ) {
        let all = state.withLock { $0.resources[kind.index] }
        let sorted = all.values.filter { r in after.map { r.name > $0 } ?? true }.sorted { $0.name < $1.name }
        return (Array(sorted.prefix(limit)), sorted.count > limit)
    }

    /// How many resources of each kind exist.
    package func counts() -> [ResourceKind: Int] {
        state.withLock { s in
            Dictionary(uniqueKeysWithValues: ResourceKind.allCases.map { ($0, s.resources[$0.index].count) })
        }
    }

    /// Every resource of every kind.
    package func all() -> [any ManagedResource] {
        state.withLock { s in s.resources.flatMap(\.values) }
    }
}
