/// How a visitor's own hold (`hold_seconds`, a window item's
/// `display_seconds`, a lease's `lease_seconds`) relates to its resource's.
package enum HoldPolicy: Sendable, Equatable {
    /// docs/api.md, Conventions: a shorter hold than the resource's, never a longer one, and
    /// none (0) only where the resource itself has no limit, so that a
    /// vanished client cannot block a resource for ever. Queues and pools.
    case atMostResource
    /// The visitor's own hold replaces the resource's, 0 (no limit) included.
    /// Windows (docs/api.md, Windows): an item's `display_seconds` overrides the window's,
    /// and 0 pins the item until it is dismissed (the login screen).
    case ownOverrides
}

extension HoldPolicy {
    /// What is wrong with asking for `seconds` under `.atMostResource` when
    /// the resource allows `limit` (0 = no limit), or nil when it is allowed.
    /// `resource` and `holds` name things in the caller's words ("queue",
    /// "holds", "hold_seconds"; "pool", "leases", "lease_seconds").
    static func excess(
        _ seconds: Double, limit: Double, resource: String, holds: String, field: String
    ) -> String? {
        guard limit > 0 else { return nil }
        let shown = Durations.text(limit)
        if seconds == 0 { return "must be more than 0: this \(resource) limits \(holds) to \(shown) s" }
        if seconds > limit { return "must be at most \(shown), the \(resource)'s \(field)" }
        return nil
    }
}
