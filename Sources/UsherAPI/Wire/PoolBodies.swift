import UsherCore

/// A lease on the wire. Always present, `null` when empty: `element`
/// (`{id, data}`), `holder`, `created_at`, `granted_at`, `expires_at`, `finished_at`, `fence`;
/// `reason` only where it applies. Inside an element's own object the
/// `element` member is left out.
enum LeaseBody {
    enum CodingKeys: String, CodingKey {
        case id, element, holder, status, fence, reason
        case createdAt = "created_at"
        case grantedAt = "granted_at"
        case expiresAt = "expires_at"
        case finishedAt = "finished_at"
    }

    /// The members, into an object being written.
    static func write(
        _ lease: Lease, withElement: Bool, to container: inout KeyedEncodingContainer<CodingKeys>
    ) throws {
        try container.encode(lease.id, forKey: .id)
        if withElement {
            if let element = lease.element {
                var nested = container.nestedContainer(keyedBy: ElementKeys.self, forKey: .element)
                try nested.encode(element, forKey: .id)
                try nested.encodeAlways(lease.elementData, forKey: .data)
            } else {
                try container.encodeNil(forKey: .element)
            }
        }
        try container.encodeAlways(lease.holder, forKey: .holder)
        try container.encode(lease.status.rawValue, forKey: .status)
        try container.encodeTime(lease.createdAt, forKey: .createdAt)
        try container.encodeTime(lease.grantedAt, forKey: .grantedAt)
        try container.encodeTime(lease.expiresAt, forKey: .expiresAt)
        try container.encodeTime(lease.finishedAt, forKey: .finishedAt)
        try container.encodeAlways(lease.fence, forKey: .fence)
        try container.encodeIfPresent(lease.reason, forKey: .reason)
    }

    /// A lease always present: `null` when there is none.
    static func write<Key>(
        _ lease: Lease?, withElement: Bool, forKey key: Key, to container: inout KeyedEncodingContainer<Key>
    ) throws {
        guard let lease else { return try container.encodeNil(forKey: key) }
        var nested = container.nestedContainer(keyedBy: CodingKeys.self, forKey: key)
        try write(lease, withElement: withElement, to: &nested)
    }
}

/// `{id, data}` of an element (`data` always present, `null` when empty),
/// and the members of an element's own object.
enum ElementKeys: String, CodingKey {
    case id, data, status, lease
    case leaseTransitions = "lease_transitions"
    case lastHolder = "last_holder"
}

/// A lease with its element: the answer to fetch, recycle, extend and a read.
struct LeaseReplyBody: Encodable {
    let lease: Lease

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: LeaseBody.CodingKeys.self)
        try LeaseBody.write(lease, withElement: true, to: &container)
    }
}

/// An element as a pool's state lists it: `{id, data, status: "free" |
/// "leased", lease, lease_transitions, last_holder}` (`lease` without its
/// `element`, `null` when free; `last_holder` `null` when unknown).
struct PoolElementBody: Encodable {
    let element: PoolElement

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: ElementKeys.self)
        try Self.write(element, to: &container)
    }

    /// The members, into an object being written.
    static func write(_ element: PoolElement, to container: inout KeyedEncodingContainer<ElementKeys>) throws {
        try container.encode(element.id, forKey: .id)
        try container.encodeAlways(element.data, forKey: .data)
        try container.encode(element.lease == nil ? "free" : "leased", forKey: .status)
        try LeaseBody.write(element.lease, withElement: false, forKey: .lease, to: &container)
        try writeHistory(element, to: &container)
    }

    /// `lease_transitions` and `last_holder`.
    static func writeHistory(_ element: PoolElement, to container: inout KeyedEncodingContainer<ElementKeys>) throws {
        try container.encode(element.leaseTransitions, forKey: .leaseTransitions)
        try container.encodeAlways(element.lastHolder, forKey: .lastHolder)
    }
}

/// `DELETE …/elements/{id}`: the element removed, `status: "removed"`, with
/// `lease` the one the removal ended (`null` when it was free).
struct ElementRemovalBody: Encodable {
    let removal: ElementRemoval

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: ElementKeys.self)
        try container.encode(removal.element.id, forKey: .id)
        try container.encodeAlways(removal.element.data, forKey: .data)
        try container.encode("removed", forKey: .status)
        try LeaseBody.write(removal.endedLease, withElement: false, forKey: .lease, to: &container)
        try PoolElementBody.writeHistory(removal.element, to: &container)
    }
}

/// `GET /v1/pools/{p}`: name, config, size, `max_size`, `next_expiry_at`,
/// elements, `waiting_leases` (the first waiting fetches, `[]` after the
/// first page), counts (gauges `available`, `leased`, `waiting` and the
/// totals), `next_cursor` (`null` when absent).
struct PoolStateBody: Encodable {
    let state: PoolState
    init(_ state: PoolState) { self.state = state }

    enum CodingKeys: String, CodingKey {
        case name, config, size, elements, counts
        case maxSize = "max_size"
        case nextExpiryAt = "next_expiry_at"
        case waitingLeases = "waiting_leases"
        case nextCursor = "next_cursor"
    }

    enum ConfigKeys: String, CodingKey {
        case elements, grow
        case leaseSeconds = "lease_seconds"
        case maxWaiting = "max_waiting"
        case idleSeconds = "idle_seconds"
        case claimSeconds = "claim_seconds"
    }

    enum GrowKeys: String, CodingKey {
        case prefix
        case maxSize = "max_size"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(state.name, forKey: .name)
        try writeConfig(state.config, to: &container)
        try container.encode(state.size, forKey: .size)
        try container.encode(state.config.maxSize(size: state.size), forKey: .maxSize)
        try container.encodeTime(state.nextExpiryAt, forKey: .nextExpiryAt)
        var elements = container.nestedUnkeyedContainer(forKey: .elements)
        for element in state.elements {
            var nested = elements.nestedContainer(keyedBy: ElementKeys.self)
            try PoolElementBody.write(element, to: &nested)
        }
        var waitingLeases = container.nestedUnkeyedContainer(forKey: .waitingLeases)
        for lease in state.waitingLeases {
            var nested = waitingLeases.nestedContainer(keyedBy: LeaseBody.CodingKeys.self)
            try LeaseBody.write(lease, withElement: true, to: &nested)
        }
        try container.encode(CountsBody.pool(state), forKey: .counts)
        try container.encodeCursor(state.nextCursor, forKey: .nextCursor)
    }

    /// The config with every default filled in; a declared element is its id
    /// alone when it has no data, else `{id, data}`; `grow` is `null` when off.
    private func writeConfig(_ config: PoolConfig, to container: inout KeyedEncodingContainer<CodingKeys>) throws {
        var nested = container.nestedContainer(keyedBy: ConfigKeys.self, forKey: .config)
        var elements = nested.nestedUnkeyedContainer(forKey: .elements)
        for spec in config.elements {
            if let data = spec.data {
                var element = elements.nestedContainer(keyedBy: ElementKeys.self)
                try element.encode(spec.id, forKey: .id)
                try element.encode(data, forKey: .data)
            } else {
                try elements.encode(spec.id)
            }
        }
        try nested.encodeSeconds(config.leaseSeconds, forKey: .leaseSeconds)
        try nested.encode(config.maxWaiting, forKey: .maxWaiting)
        if let grow = config.grow {
            var g = nested.nestedContainer(keyedBy: GrowKeys.self, forKey: .grow)
            try g.encode(grow.maxSize, forKey: .maxSize)
            try g.encode(grow.prefix, forKey: .prefix)
        } else {
            try nested.encodeNil(forKey: .grow)
        }
        try nested.encodeSeconds(config.idleSeconds, forKey: .idleSeconds)
        try nested.encodeSeconds(config.claimSeconds, forKey: .claimSeconds)
    }
}
