/// A window's configuration (docs/api.md, Windows). Every field has a default, so `{}` is
/// a valid config, and every field can be changed with `PATCH`.
package struct WindowConfig: Sendable, Hashable {
    /// `max_waiting` (1000): queued plus delayed items allowed; more is 429 `queue_full`.
    package var maxWaiting: Int
    /// `display_seconds` (0): how long an item stays shown before it is
    /// dismissed by itself; 0 = until dismissed. An item's own value overrides it.
    package var displaySeconds: Double
    /// `dedup` (`off`): with `key`, a new item whose `key` matches a queued one merges into it.
    package var dedup: DedupMode
    /// `dedup_keep` (`first`): with `latest`, the new item takes the queued one's place instead.
    package var dedupKeep: DedupKeep

    /// A config; every argument defaults to the documented default.
    package init(
        maxWaiting: Int = 1000, displaySeconds: Double = 0, dedup: DedupMode = .off, dedupKeep: DedupKeep = .first
    ) {
        self.maxWaiting = maxWaiting
        self.displaySeconds = displaySeconds
        self.dedup = dedup
        self.dedupKeep = dedupKeep
    }

    /// Reads a config object; missing fields take their defaults. The caller
    /// calls `reader.finish()` to reject unknown fields.
    package static func parse(_ reader: inout FieldReader) throws(FieldError) -> WindowConfig {
        try WindowPatch.parse(&reader).applied(to: WindowConfig())
    }

    /// What a `PATCH` from `before` to `after` changed, as its `updated` event tells it.
    package static func changes(from before: WindowConfig, to after: WindowConfig) -> ConfigChanges {
        var changes = ConfigChanges()
        changes.compare("max_waiting", before.maxWaiting, after.maxWaiting, JSONValue.int)
        changes.compare("display_seconds", before.displaySeconds, after.displaySeconds, ConfigChanges.seconds)
        changes.compare("dedup", before.dedup, after.dedup) { .string($0.rawValue) }
        changes.compare("dedup_keep", before.dedupKeep, after.dedupKeep) { .string($0.rawValue) }
        return changes
    }

    /// The queue engine's config for this window: one slot, the display time
    /// as the hold, no opposites, and no idle or claim checks (an item is
    /// shown to whoever looks: nobody has to wait on it or claim it).
    var queueConfig: QueueConfig {
        QueueConfig(
            capacity: 1, maxWaiting: maxWaiting, holdSeconds: displaySeconds, dedup: dedup,
            dedupKeep: dedupKeep, opposites: [], history: WindowSlot.history, idleSeconds: 0, claimSeconds: 0)
    }
}

/// A change to a window's config (`PATCH`): every field optional.
package struct WindowPatch: Sendable, Equatable {
    /// `max_waiting`: lowering it refuses new items, it never removes any.
    package var maxWaiting: Int?
    /// `display_seconds`: applies to items shown from now on.
    package var displaySeconds: Double?
    /// `dedup`: applies to items queued from now on.
    package var dedup: DedupMode?
    /// `dedup_keep`: applies to duplicates met from now on.
    package var dedupKeep: DedupKeep?

    /// A patch naming only the given fields.
    package init(
        maxWaiting: Int? = nil, displaySeconds: Double? = nil, dedup: DedupMode? = nil, dedupKeep: DedupKeep? = nil
    ) {
        self.maxWaiting = maxWaiting
        self.displaySeconds = displaySeconds
        self.dedup = dedup
        self.dedupKeep = dedupKeep
    }

    /// Reads `max_waiting`, `display_seconds`, `dedup`, `dedup_keep`, none required. The
    /// caller calls `reader.finish()`.
    package static func parse(_ reader: inout FieldReader) throws(FieldError) -> WindowPatch {
        var p = WindowPatch()
        p.maxWaiting = try reader.int("max_waiting", in: QueueConfig.Limits.maxWaiting)
        p.displaySeconds = try reader.duration("display_seconds")
        p.dedup = try reader.choice("dedup")
        p.dedupKeep = try reader.choice("dedup_keep")
        return p
    }

    /// `config` with the fields present in the patch replaced.
    func applied(to config: WindowConfig) -> WindowConfig {
        var c = config
        if let maxWaiting { c.maxWaiting = maxWaiting }
        if let displaySeconds { c.displaySeconds = displaySeconds }
        if let dedup { c.dedup = dedup }
        if let dedupKeep { c.dedupKeep = dedupKeep }
        return c
    }

    /// The same change in the queue engine's terms.
    var queuePatch: QueuePatch {
        QueuePatch(maxWaiting: maxWaiting, holdSeconds: displaySeconds, dedup: dedup, dedupKeep: dedupKeep)
    }
}
