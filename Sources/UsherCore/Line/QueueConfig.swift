/// How a queue merges duplicates and cancels opposite pairs (docs/api.md, "Order, dedup and opposites").
package enum DedupMode: String, Sendable, Equatable, CaseIterable {
    /// Against every waiting visitor with the same key.
    case key
    /// Only against the most recent arrival still waiting in the whole queue.
    case adjacent
    /// Neither merging nor cancelling (the default: no payload is dropped
    /// unless the config asks for it).
    case off
}

/// Which of two duplicates stays in line (`dedup_keep`).
package enum DedupKeep: String, Sendable, Equatable, CaseIterable {
    /// The one already waiting; the newcomer is merged into it (the default).
    case first
    /// The newcomer, in the waiting one's place; that one is merged into it
    /// (reason `replaced`).
    case latest
}

/// A queue's configuration. Every field has a default, so `{}` is a valid config.
package struct QueueConfig: Sendable, Hashable {
    /// `capacity` (1): slots; 0 closes the resource (nobody is granted, visitors still wait).
    package var capacity: Int
    /// `max_waiting` (10000): waiting plus delayed visitors allowed; more is 429 `queue_full`.
    package var maxWaiting: Int
    /// `hold_seconds` (30): a holder not completed by then expires; 0 = no limit.
    package var holdSeconds: Double
    /// `dedup` (`off`; `key` when `opposites` are given): see `DedupMode`.
    package var dedup: DedupMode
    /// `dedup_keep` (`first`): see `DedupKeep`.
    package var dedupKeep: DedupKeep
    /// `opposites` (`[]`): pairs of actions that cancel each other.
    package var opposites: [[String]]
    /// `history` (1000): finished visitors kept visible, and their client ids remembered.
    package var history: Int
    /// `dedup_seconds` (0): a finished visitor beyond `history` is still
    /// kept (and its id known) until this long after it finished.
    package var dedupSeconds: Double
    /// `idle_seconds` (30): a waiting visitor whose client was not heard of
    /// (a call naming it, a wait parked on it) for this long is cancelled,
    /// reason `abandoned`; 0 = never.
    package var idleSeconds: Double
    /// `claim_seconds` (10): a visitor granted while no client waited on it
    /// that no call names within this long is released, reason `unclaimed`;
    /// 0 = never.
    package var claimSeconds: Double

    /// The defaults of `idle_seconds` and `claim_seconds`.
    static let defaultIdleSeconds = 30.0
    static let defaultClaimSeconds = 10.0

    /// A config; every argument defaults to the documented default.
    package init(
        capacity: Int = 1, maxWaiting: Int = 10_000, holdSeconds: Double = 30,
        dedup: DedupMode? = nil, dedupKeep: DedupKeep = .first, opposites: [[String]] = [], history: Int = 1000,
        dedupSeconds: Double = 0, idleSeconds: Double = defaultIdleSeconds,
        claimSeconds: Double = defaultClaimSeconds
    ) {
        self.capacity = capacity
        self.maxWaiting = maxWaiting
        self.holdSeconds = holdSeconds
        self.dedup = dedup ?? Self.defaultDedup(opposites: opposites)
        self.dedupKeep = dedupKeep
        self.opposites = opposites
        self.history = history
        self.dedupSeconds = dedupSeconds
        self.idleSeconds = idleSeconds
        self.claimSeconds = claimSeconds
    }

    /// Allowed ranges, shared by the config, the patch and visitor requests.
    package enum Limits {
        /// `capacity`.
        package static let capacity = 0...1_000_000
        /// `max_waiting`.
        package static let maxWaiting = 0...10_000_000
        /// Also the range of a visitor's `hold_seconds` and `delay_seconds` (one year).
        package static let seconds = 0.0...31_536_000.0
        /// `history`.
        package static let history = 0...100_000
        /// A visitor's `priority`.
        package static let priority = -1_000_000...1_000_000
    }

    /// Reads a config object; missing fields take their defaults. The caller
    /// calls `reader.finish()` to reject unknown fields.
    package static func parse(_ reader: inout FieldReader) throws(FieldError) -> QueueConfig {
        var patch = try QueuePatch.parse(&reader)
        if patch.dedup == nil, let opposites = patch.opposites { patch.dedup = defaultDedup(opposites: opposites) }
        return patch.applied(to: QueueConfig())
    }

    /// `dedup` when a config does not say: `off`, so that no payload is
    /// dropped unless asked; `key` when it names `opposites` (they cancel by key).
    static func defaultDedup(opposites: [[String]]) -> DedupMode {
        opposites.isEmpty ? .off : .key
    }
}

extension QueueConfig {
    /// The fields that differ from `before` to `after`, with their new values
    /// (an `updated` event's data).
    package static func changes(from before: QueueConfig, to after: QueueConfig) -> ConfigChanges {
        var changes = ConfigChanges()
        changes.compare("capacity", before.capacity, after.capacity, JSONValue.int)
        changes.compare("max_waiting", before.maxWaiting, after.maxWaiting, JSONValue.int)
        changes.compare("hold_seconds", before.holdSeconds, after.holdSeconds, ConfigChanges.seconds)
        changes.compare("dedup", before.dedup, after.dedup) { .string($0.rawValue) }
        changes.compare("dedup_keep", before.dedupKeep, after.dedupKeep) { .string($0.rawValue) }
        changes.compare("opposites", before.opposites, after.opposites) { pairs in
            .array(pairs.map { .array($0.map(JSONValue.string)) })
        }
        changes.compare("history", before.history, after.history, JSONValue.int)
        changes.compare("dedup_seconds", before.dedupSeconds, after.dedupSeconds, ConfigChanges.seconds)
        changes.compare("idle_seconds", before.idleSeconds, after.idleSeconds, ConfigChanges.seconds)
        changes.compare("claim_seconds", before.claimSeconds, after.claimSeconds, ConfigChanges.seconds)
        return changes
    }
}

/// A change to a queue's config (`PATCH`): every field optional, all mutable.
package struct QueuePatch: Sendable, Equatable {
    /// `capacity`; nil leaves it as it is (and so for every field).
    package var capacity: Int?
    /// `max_waiting`: lowering it refuses new visitors, it never removes any.
    package var maxWaiting: Int?
    /// `hold_seconds`: applies to grants and extends from now on.
    package var holdSeconds: Double?
    /// `dedup`: applies to visitors entering the line from now on.
    package var dedup: DedupMode?
    /// `dedup_keep`: applies to duplicates met from now on.
    package var dedupKeep: DedupKeep?
    /// `opposites`: replaces the whole list.
    package var opposites: [[String]]?
    /// `history`: lowering it forgets the oldest finished visitors.
    package var history: Int?
    /// `dedup_seconds`: applies to every finished visitor from now on.
    package var dedupSeconds: Double?
    /// `idle_seconds`: applies to the checks due from now on.
    package var idleSeconds: Double?
    /// `claim_seconds`: applies to grants from now on.
    package var claimSeconds: Double?

    /// A patch naming only the given fields.
    package init(
        capacity: Int? = nil, maxWaiting: Int? = nil, holdSeconds: Double? = nil,
        dedup: DedupMode? = nil, dedupKeep: DedupKeep? = nil, opposites: [[String]]? = nil, history: Int? = nil,
        dedupSeconds: Double? = nil, idleSeconds: Double? = nil, claimSeconds: Double? = nil
    ) {
        self.capacity = capacity
        self.maxWaiting = maxWaiting
        self.holdSeconds = holdSeconds
        self.dedup = dedup
        self.dedupKeep = dedupKeep
        self.opposites = opposites
        self.history = history
        self.dedupSeconds = dedupSeconds
        self.idleSeconds = idleSeconds
        self.claimSeconds = claimSeconds
    }

    /// A patch that sets every field to `config`'s (a config file's declaration).
    package init(setting config: QueueConfig) {
        self.init(
            capacity: config.capacity, maxWaiting: config.maxWaiting, holdSeconds: config.holdSeconds,
            dedup: config.dedup, dedupKeep: config.dedupKeep, opposites: config.opposites, history: config.history,
            dedupSeconds: config.dedupSeconds,
            idleSeconds: config.idleSeconds, claimSeconds: config.claimSeconds)
    }

    /// Reads the same keys as `QueueConfig.parse`, none required. The caller
    /// calls `reader.finish()`.
    package static func parse(_ reader: inout FieldReader) throws(FieldError) -> QueuePatch {
        var p = QueuePatch()
        p.capacity = try reader.int("capacity", in: QueueConfig.Limits.capacity)
        p.maxWaiting = try reader.int("max_waiting", in: QueueConfig.Limits.maxWaiting)
        p.holdSeconds = try reader.duration("hold_seconds")
        p.dedup = try reader.choice("dedup")
        p.dedupKeep = try reader.choice("dedup_keep")
        if let list = try reader.array("opposites") {
            p.opposites = try parseOpposites(list, field: reader.fieldPath("opposites"))
        }
        p.history = try reader.int("history", in: QueueConfig.Limits.history)
        p.dedupSeconds = try reader.duration("dedup_seconds")
        p.idleSeconds = try reader.duration("idle_seconds")
        p.claimSeconds = try reader.duration("claim_seconds")
        return p
    }

    /// `config` with the fields present in the patch replaced.
    func applied(to config: QueueConfig) -> QueueConfig {
        var c = config
        if let capacity { c.capacity = capacity }
        if let maxWaiting { c.maxWaiting = maxWaiting }
        if let holdSeconds { c.holdSeconds = holdSeconds }
        if let dedup { c.dedup = dedup }
        if let dedupKeep { c.dedupKeep = dedupKeep }
        if let opposites { c.opposites = opposites }
        if let history { c.history = history }
        if let dedupSeconds { c.dedupSeconds = dedupSeconds }
        if let idleSeconds { c.idleSeconds = idleSeconds }
        if let claimSeconds { c.claimSeconds = claimSeconds }
        return c
    }

    /// Each entry must be a pair of two different actions of 1–256 characters.
    private static func parseOpposites(_ list: [JSONValue], field: String) throws(FieldError) -> [[String]] {
        var pairs: [[String]] = []
        for (i, entry) in list.enumerated() {
            let path = "\(field)[\(i)]"
            guard case .array(let items) = entry, items.count == 2,
                case .string(let a) = items[0], case .string(let b) = items[1]
            else { throw FieldError(field: path, message: "must be a pair of two actions, e.g. [\"like\",\"unlike\"]") }
            guard Names.isValidKey(a), Names.isValidKey(b) else {
                throw FieldError(field: path, message: "actions must be 1 to 256 characters")
            }
            guard a != b else { throw FieldError(field: path, message: "an action cannot be its own opposite") }
            pairs.append([a, b])
        }
        return pairs
    }
}
