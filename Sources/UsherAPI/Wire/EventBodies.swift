import UsherCore

/// One event's `data:` line: `{id, at, kind, name, type, data}`, where `data`
/// is the changed thing in its own kind's wire form (a window's item, a
/// pool's lease, …).
struct EventBody: Encodable {
    let event: ResourceEvent

    enum CodingKeys: String, CodingKey { case id, at, kind, name, type, data }
    private enum CountKeys: String, CodingKey { case count }
    private enum NameKeys: String, CodingKey { case name }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(event.id, forKey: .id)
        try container.encodeTime(event.at, forKey: .at)
        try container.encode(event.kind, forKey: .kind)
        try container.encode(event.name, forKey: .name)
        try container.encode(event.type, forKey: .type)
        switch event.subject {
        case .visitor(let visitor):
            try container.encode(VisitorBody(visitor), forKey: .data)
        case .windowItem(let item):
            try container.encode(WindowItemBody(item), forKey: .data)
        case .lease(let lease):
            try LeaseBody.write(lease, withElement: true, forKey: .data, to: &container)
        case .pipelineItem(let item, let reason):
            try container.encode(PipelineItemBody(item, reason: reason), forKey: .data)
        case .delivery(let delivery):
            try container.encode(PipelineDeliveryBody(delivery: delivery), forKey: .data)
        case .count(let count):
            var nested = container.nestedContainer(keyedBy: CountKeys.self, forKey: .data)
            try nested.encode(count, forKey: .count)
        case .transition(let transition):
            try container.encode(MachineTransitionBody(transition: transition), forKey: .data)
        case .transaction(let transaction):
            try container.encode(TransactionBody(transaction: transaction), forKey: .data)
        case .changes(let changes):
            var nested = container.nestedContainer(keyedBy: WireKey.self, forKey: .data)
            for (field, value) in changes { try nested.encode(value, forKey: WireKey(field)) }
        case .summary(let summary):
            try container.encode(summary, forKey: .data)
        case .deleted(let name):
            var nested = container.nestedContainer(keyedBy: NameKeys.self, forKey: .data)
            try nested.encode(name, forKey: .name)
        }
    }
}

/// `event: dropped`, the last of a stream the server ends: resume with
/// `Last-Event-ID: last_event_id` (nil: the stream sent no event).
struct EventDroppedBody: Encodable {
    /// Why the stream ends.
    enum Reason: String, Encodable {
        /// Its next event already left the replay buffer.
        case behind
        /// More than `max_event_lag_bytes` of live events were waiting for it.
        case lagging
    }

    let reason: Reason
    let lastEventID: UInt64?
    let maxLagBytes: Int

    enum CodingKeys: String, CodingKey {
        case reason
        case lastEventID = "last_event_id"
        case maxLagBytes = "max_event_lag_bytes"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(reason, forKey: .reason)
        try container.encodeAlways(lastEventID, forKey: .lastEventID)
        try container.encode(maxLagBytes, forKey: .maxLagBytes)
    }
}

/// `event: reset`: the client's `Last-Event-ID` is older than the replay
/// buffer (or unknown); `oldest_event_id` is the first one it will get.
struct EventResetBody: Encodable {
    let lastEventID: UInt64?
    let oldestEventID: UInt64?

    enum CodingKeys: String, CodingKey {
        case lastEventID = "last_event_id"
        case oldestEventID = "oldest_event_id"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeAlways(lastEventID, forKey: .lastEventID)
        try container.encodeAlways(oldestEventID, forKey: .oldestEventID)
    }
}
