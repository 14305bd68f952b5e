import Answers
import Locking
import UsherCore

/// The resource kinds, as they appear in paths.
enum ResourceKind: String, Sendable, CaseIterable {
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

/// One resource's manager, whichever backend holds it: what the registry,
/// the list and delete routes, shutdown and the Redis membership need.
protocol ManagedResource: AnyObject, Sendable {
    /// The resource's name.
    var name: String { get }
    /// A short summary, as the registry's `created` event carries it.
    func summary() -> JSONValue
    /// The list route's summary (a resource kept in Redis reads its counts there).
    func listSummary() -> Pending<JSONValue, APIError>
    /// Deletes it where it lives (in Redis, every instance hears of it) and
    /// drops it from `registry`; 404 when it is gone already.
    func deleting(from registry: Registry) -> Pending<Void, APIError>
    /// Starts hearing what other instances do to it (once it is registered).
    func startListening()
    /// Applies what came due while no timer here watched (after a start or a reconnect).
    func catchUp() async
    /// The resource is deleted: requests waiting on it get 410.
    func markDeleted()
    /// The server is stopping: requests waiting on it get 503.
    func markShuttingDown()
}

/// Every resource by kind and name, with the `max_resources` cap.
///
/// A mutex, not an actor: a lookup happens on every request and is a
/// dictionary read that never waits.
final class Registry: Sendable {
    private struct Entry {
        let resource: any ManagedResource
        /// Kept outside this process (in Redis), whose index counts it against
        /// `max_resources`, not this registry.
        let shared: Bool
        /// Its state's last full answer.
        let answers: AnswerCache
    }

    private struct State {
        /// By `ResourceKind.index`, then by name.
        var entries = [[String: Entry]](repeating: [:], count: ResourceKind.allCases.count)
        /// Resources kept here (shared ones are not counted).
        var count = 0
    }

    private let state = Locked(State())
    /// The cap on resources of all kinds.
    let maxResources: Int
    /// Where `created` and `deleted` are emitted (nil: nowhere).
    private let events: EventLog?
    /// What the kept answers are charged to.
    private let storage: StorageBudget

    init(maxResources: Int, events: EventLog? = nil, storage: StorageBudget = StorageBudget()) {
        self.maxResources = maxResources
        self.events = events
        self.storage = storage
    }

    /// The resource of this kind and name, or 404.
    func resource(_ kind: ResourceKind, _ name: String) throws(APIError) -> any ManagedResource {
        guard let entry = state.withLock({ $0.entries[kind.index][name] }) else {
            var error = APIError.notFound("\(kind.noun) \(name) not found")
            error.unknownResource = (kind, name)
            throw error
        }
        return entry.resource
    }

    /// The answer cache of the resource of this kind and name (nil: not registered).
    func answers(_ kind: ResourceKind, _ name: String) -> AnswerCache? {
        state.withLock { $0.entries[kind.index][name]?.answers }
    }

    /// Whether the resource is registered.
    func contains(_ kind: ResourceKind, _ name: String) -> Bool {
        state.withLock { $0.entries[kind.index][name] != nil }
    }

    /// Adds a resource that lives elsewhere (Redis) unless one of that name is
    /// here: it does not count against `max_resources` here (Redis's index
    /// does). Emits `created` when added; answers the one registered.
    func adopt(_ kind: ResourceKind, _ name: String, make: () -> any ManagedResource) -> any ManagedResource {
        let outcome = state.withLock { s -> (resource: any ManagedResource, added: Bool) in
            if let existing = s.entries[kind.index][name] { return (existing.resource, false) }
            let resource = make()
            s.entries[kind.index][name] = Entry(resource: resource, shared: true, answers: AnswerCache(budget: storage))
            return (resource, true)
        }
        if outcome.added {
            outcome.resource.startListening()
            emit(kind, name, type: "created", .summary(outcome.resource.summary()))
        }
        return outcome.resource
    }

    /// Drops a resource that lives elsewhere and was deleted there (its
    /// waiters here get 410); nothing when it is not here or lives here.
    func forget(_ kind: ResourceKind, _ name: String) {
        let removed = state.withLock { s -> (any ManagedResource)? in
            guard s.entries[kind.index][name]?.shared == true else { return nil }
            return s.entries[kind.index].removeValue(forKey: name)?.resource
        }
        guard let removed else { return }
        removed.markDeleted()
        emit(kind, name, type: "deleted", .deleted(name: name))
    }

    /// The resource of this kind and name, as its concrete type, or 404.
    func lookup<R: ManagedResource>(_ kind: ResourceKind, _ name: String, as type: R.Type) throws(APIError) -> R {
        guard let resource = state.withLock({ $0.entries[kind.index][name]?.resource }) else {
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
    func create<R: ManagedResource>(
        _ kind: ResourceKind, _ name: String, make: () -> R, matches: (R) -> Bool
    ) throws(APIError) -> (resource: R, created: Bool) {
        let outcome = try state.withLock { (s: inout State) throws(APIError) -> (resource: R, created: Bool) in
            if let existing = s.entries[kind.index][name] {
                guard let typed = existing.resource as? R, matches(typed) else {
                    throw APIError.alreadyExists(kind.noun, name)
                }
                return (typed, false)
            }
            guard s.count < maxResources else { throw APIError.tooManyResources(limit: maxResources, counted: "") }
            let resource = make()
            s.entries[kind.index][name] = Entry(
                resource: resource, shared: false, answers: AnswerCache(budget: storage))
            s.count += 1
            return (resource, true)
        }
        if outcome.created { emit(kind, name, type: "created", .summary(outcome.resource.summary())) }
        return outcome
    }

    /// Removes a resource and closes it (its waiters get 410), or 404.
    func remove(_ kind: ResourceKind, _ name: String) throws(APIError) {
        let removed = state.withLock { s -> (any ManagedResource)? in
            guard let entry = s.entries[kind.index].removeValue(forKey: name) else { return nil }
            if !entry.shared { s.count -= 1 }
            return entry.resource
        }
        guard let removed else { throw APIError.notFound("\(kind.noun) \(name) not found") }
        removed.markDeleted()
        emit(kind, name, type: "deleted", .deleted(name: name))
    }

    /// The resources of a kind, sorted by name.
    func list(_ kind: ResourceKind) -> [any ManagedResource] {
        state.withLock { s in s.entries[kind.index].values.map(\.resource).sorted { $0.name < $1.name } }
    }

    /// The resources kept outside this process (in Redis), by kind and name.
    func shared() -> [(kind: ResourceKind, name: String)] {
        state.withLock { s in
            ResourceKind.allCases.flatMap { kind in
                s.entries[kind.index].filter(\.value.shared).keys.sorted().map { (kind, $0) }
            }
        }
    }

    /// How many resources of a kind this process knows that are kept outside it (in Redis).
    func sharedCount(_ kind: ResourceKind) -> Int {
        state.withLock { s in s.entries[kind.index].values.count(where: \.shared) }
    }

    /// Up to `limit` resources of a kind whose names sort after `after`, by
    /// name, and whether more follow.
    func list(_ kind: ResourceKind, after: String?, limit: Int) -> (resources: [any ManagedResource], more: Bool) {
        let all = state.withLock { $0.entries[kind.index] }
        let sorted = all.values.map(\.resource).filter { r in after.map { r.name > $0 } ?? true }
            .sorted { $0.name < $1.name }
        return (Array(sorted.prefix(limit)), sorted.count > limit)
    }

    /// How many resources of each kind exist.
    func counts() -> [ResourceKind: Int] {
        state.withLock { s in
            Dictionary(uniqueKeysWithValues: ResourceKind.allCases.map { ($0, s.entries[$0.index].count) })
        }
    }

    /// Every resource of every kind.
    func all() -> [any ManagedResource] {
        state.withLock { s in s.entries.flatMap { $0.values.map(\.resource) } }
    }

    private func emit(_ kind: ResourceKind, _ name: String, type: String, _ subject: EventSubject) {
        guard let events, events.isRecording else { return }
        events.emit(ResourceEvent.Draft(kind: kind.noun, name: name, type: type, subject: subject))
    }
}
