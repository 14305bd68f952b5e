import UsherCore

/// A window item on the wire. Always present, `null` when empty: `key`,
/// `title`, `message`, `payload`, `shown_at`, `expires_at`, `finished_at`,
/// `fence`. Only while queued: `position`; only when merged: `merged_into`
/// (and `reason` `replaced` when a newer duplicate took its place).
struct WindowItemBody: Encodable {
    let item: WindowItem
    init(_ item: WindowItem) { self.item = item }

    enum CodingKeys: String, CodingKey {
        case id, window, key, title, message, payload, priority, status, position, fence, reason, showing
        case createdAt = "created_at"
        case shownAt = "shown_at"
        case expiresAt = "expires_at"
        case finishedAt = "finished_at"
        case mergedInto = "merged_into"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try Self.write(item, to: &container)
    }

    /// The members, into an object being written.
    static func write(_ item: WindowItem, to container: inout KeyedEncodingContainer<CodingKeys>) throws {
        try container.encode(item.id, forKey: .id)
        try container.encode(item.window, forKey: .window)
        try container.encodeAlways(item.key, forKey: .key)
        try container.encodeAlways(item.title, forKey: .title)
        try container.encodeAlways(item.message, forKey: .message)
        try container.encodeAlways(item.payload, forKey: .payload)
        try container.encode(item.priority, forKey: .priority)
        try container.encode(item.status.rawValue, forKey: .status)
        try container.encodeIfPresent(item.position, forKey: .position)
        try container.encodeTime(item.createdAt, forKey: .createdAt)
        try container.encodeTime(item.shownAt, forKey: .shownAt)
        try container.encodeTime(item.expiresAt, forKey: .expiresAt)
        try container.encodeTime(item.finishedAt, forKey: .finishedAt)
        try container.encodeAlways(item.fence, forKey: .fence)
        try container.encodeIfPresent(item.mergedInto, forKey: .mergedInto)
        try container.encodeIfPresent(item.reason, forKey: .reason)
    }

    /// An item always present: `null` when there is none.
    static func write<Key>(_ item: WindowItem?, forKey key: Key, to container: inout KeyedEncodingContainer<Key>) throws
    {
        guard let item else { return try container.encodeNil(forKey: key) }
        var nested = container.nestedContainer(keyedBy: CodingKeys.self, forKey: key)
        try write(item, to: &nested)
    }
}

/// `GET /v1/windows/{w}`: name, config, the item shown (or `null`), the
/// queued items, counts, and `next_cursor` (`null` on the last page).
struct WindowStateBody: Encodable {
    let state: WindowState
    init(_ state: WindowState) { self.state = state }

    enum CodingKeys: String, CodingKey {
        case name, config, showing, queued, counts
        case nextCursor = "next_cursor"
    }

    enum ConfigKeys: String, CodingKey {
        case dedup
        case dedupKeep = "dedup_keep"
        case maxWaiting = "max_waiting"
        case displaySeconds = "display_seconds"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(state.name, forKey: .name)
        var config = container.nestedContainer(keyedBy: ConfigKeys.self, forKey: .config)
        try config.encode(state.config.maxWaiting, forKey: .maxWaiting)
        try config.encodeSeconds(state.config.displaySeconds, forKey: .displaySeconds)
        try config.encode(state.config.dedup.rawValue, forKey: .dedup)
        try config.encode(state.config.dedupKeep.rawValue, forKey: .dedupKeep)
        try WindowItemBody.write(state.showing, forKey: .showing, to: &container)
        var queued = container.nestedUnkeyedContainer(forKey: .queued)
        for item in state.queued {
            var nested = queued.nestedContainer(keyedBy: WindowItemBody.CodingKeys.self)
            try WindowItemBody.write(item, to: &nested)
        }
        try container.encode(CountsBody.window(state.counts), forKey: .counts)
        try container.encodeCursor(state.nextCursor, forKey: .nextCursor)
    }
}

/// `POST …/dismiss`: the item dismissed, its members bare, with `showing`:
/// the item shown now (the next one, shown in the same step), `null` when none.
struct DismissalBody: Encodable {
    let dismissal: Dismissal

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: WindowItemBody.CodingKeys.self)
        try WindowItemBody.write(dismissal.dismissed, to: &container)
        try WindowItemBody.write(dismissal.showing, forKey: .showing, to: &container)
    }
}
