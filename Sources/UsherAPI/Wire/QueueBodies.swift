import UsherCore

/// A visitor on the wire. Always present, `null` when empty: `key`, `action`,
/// `payload`, `granted_at`, `expires_at`, `finished_at`, `fence`. Only while
/// waiting: `position` and `estimated_wait_seconds` (`null` when unknowable,
/// with `estimated_wait_reason` saying why).
/// Only where they apply: `merged_into`, `cancelled_with`, `reason`.
struct VisitorBody: Encodable {
    let view: VisitorView
    init(_ view: VisitorView) { self.view = view }

    enum CodingKeys: String, CodingKey {
        case id, queue, key, action, payload, priority, status, position, fence, reason
        case estimatedWaitSeconds = "estimated_wait_seconds"
        case estimatedWaitReason = "estimated_wait_reason"
        case createdAt = "created_at"
        case grantedAt = "granted_at"
        case expiresAt = "expires_at"
        case finishedAt = "finished_at"
        case mergedInto = "merged_into"
        case cancelledWith = "cancelled_with"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try Self.write(view, to: &container)
    }

    /// The members, into an object being written.
    static func write(_ view: VisitorView, to container: inout KeyedEncodingContainer<CodingKeys>) throws {
        try container.encode(view.id, forKey: .id)
        try container.encode(view.queue, forKey: .queue)
        try container.encodeAlways(view.key, forKey: .key)
        try container.encodeAlways(view.action, forKey: .action)
        try container.encodeAlways(view.payload, forKey: .payload)
        try container.encode(view.priority, forKey: .priority)
        try container.encode(view.status.rawValue, forKey: .status)
        if view.status == .waiting {
            try container.encodeIfPresent(view.position, forKey: .position)
            if let wait = view.estimatedWaitSeconds {
                try container.encodeSeconds(wait, forKey: .estimatedWaitSeconds)
            } else {
                try container.encodeNil(forKey: .estimatedWaitSeconds)
                try container.encodeIfPresent(view.estimatedWaitReason?.rawValue, forKey: .estimatedWaitReason)
            }
        }
        try container.encodeTime(view.enqueuedAt, forKey: .createdAt)
        try container.encodeTime(view.grantedAt, forKey: .grantedAt)
        try container.encodeTime(view.expiresAt, forKey: .expiresAt)
        try container.encodeTime(view.finishedAt, forKey: .finishedAt)
        try container.encodeAlways(view.fence, forKey: .fence)
        try container.encodeIfPresent(view.mergedInto, forKey: .mergedInto)
        try container.encodeIfPresent(view.cancelledWith, forKey: .cancelledWith)
        try container.encodeIfPresent(view.reason, forKey: .reason)
    }
}

/// A queue's config with every default filled in.
struct QueueConfigBody: Encodable {
    let config: QueueConfig

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try Self.write(config, to: &container)
    }

    enum CodingKeys: String, CodingKey {
        case capacity, dedup, opposites, history
        case dedupKeep = "dedup_keep"
        case dedupSeconds = "dedup_seconds"
        case maxWaiting = "max_waiting"
        case holdSeconds = "hold_seconds"
        case idleSeconds = "idle_seconds"
        case claimSeconds = "claim_seconds"
    }

    /// The members, into an object being written.
    static func write(_ config: QueueConfig, to container: inout KeyedEncodingContainer<CodingKeys>) throws {
        try container.encode(config.capacity, forKey: .capacity)
        try container.encode(config.maxWaiting, forKey: .maxWaiting)
        try container.encodeSeconds(config.holdSeconds, forKey: .holdSeconds)
        try container.encode(config.dedup.rawValue, forKey: .dedup)
        try container.encode(config.dedupKeep.rawValue, forKey: .dedupKeep)
        try container.encode(config.opposites, forKey: .opposites)
        try container.encode(config.history, forKey: .history)
        try container.encodeSeconds(config.dedupSeconds, forKey: .dedupSeconds)
        try container.encodeSeconds(config.idleSeconds, forKey: .idleSeconds)
        try container.encodeSeconds(config.claimSeconds, forKey: .claimSeconds)
    }
}

/// `GET /v1/queues/{q}`: name, config, holders, the head of the line, counts,
/// and `next_cursor` (`null` on the last page).
struct QueueStateBody: Encodable {
    let state: QueueState
    init(_ state: QueueState) { self.state = state }

    enum CodingKeys: String, CodingKey {
        case name, config, holding, waiting, delayed, counts
        case nextCursor = "next_cursor"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(state.name, forKey: .name)
        var config = container.nestedContainer(keyedBy: QueueConfigBody.CodingKeys.self, forKey: .config)
        try QueueConfigBody.write(state.config, to: &config)
        var holding = container.nestedUnkeyedContainer(forKey: .holding)
        for view in state.holding {
            var visitor = holding.nestedContainer(keyedBy: VisitorBody.CodingKeys.self)
            try VisitorBody.write(view, to: &visitor)
        }
        var waiting = container.nestedUnkeyedContainer(forKey: .waiting)
        for view in state.waiting {
            var visitor = waiting.nestedContainer(keyedBy: VisitorBody.CodingKeys.self)
            try VisitorBody.write(view, to: &visitor)
        }
        var delayed = container.nestedUnkeyedContainer(forKey: .delayed)
        for view in state.delayed {
            var visitor = delayed.nestedContainer(keyedBy: VisitorBody.CodingKeys.self)
            try VisitorBody.write(view, to: &visitor)
        }
        try container.encode(CountsBody.queue(state.counts), forKey: .counts)
        try container.encodeCursor(state.nextCursor, forKey: .nextCursor)
    }
}
