import UsherCore

/// An item as stored: `id, payload, priority, status, deliveries, created_at,
/// available_at, taken_at, ack_deadline, fence, dead_at`, every member always
/// present (`null` when it has no value); `reason` only in events that
/// say why (`undelivered`).
struct PipelineItemBody: Encodable {
    let item: PipelineItem
    let reason: String?
    init(_ item: PipelineItem, reason: String? = nil) {
        self.item = item
        self.reason = reason
    }

    enum CodingKeys: String, CodingKey {
        case id, payload, priority, status, deliveries, fence, reason
        case createdAt = "created_at"
        case availableAt = "available_at"
        case takenAt = "taken_at"
        case ackDeadline = "ack_deadline"
        case deadAt = "dead_at"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(item.id, forKey: .id)
        try container.encode(item.payload, forKey: .payload)
        try container.encode(item.priority, forKey: .priority)
        try container.encode(item.status.rawValue, forKey: .status)
        try container.encode(item.deliveries, forKey: .deliveries)
        try container.encodeTime(item.createdAt, forKey: .createdAt)
        try container.encodeTime(item.availableAt, forKey: .availableAt)
        try container.encodeTime(item.takenAt, forKey: .takenAt)
        try container.encodeTime(item.ackDeadline, forKey: .ackDeadline)
        try container.encodeAlways(item.fence, forKey: .fence)
        try container.encodeTime(item.deadAt, forKey: .deadAt)
        try container.encodeIfPresent(reason, forKey: .reason)
    }
}

/// One hand-out: `id, payload, deliveries, taken_at, ack_deadline, fence`
/// (`ack_deadline` `null` when there is no limit).
struct PipelineDeliveryBody: Encodable {
    let delivery: PipelineDelivery

    enum CodingKeys: String, CodingKey {
        case id, payload, deliveries, fence
        case takenAt = "taken_at"
        case ackDeadline = "ack_deadline"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(delivery.id, forKey: .id)
        try container.encode(delivery.payload, forKey: .payload)
        try container.encode(delivery.deliveries, forKey: .deliveries)
        try container.encodeTime(delivery.takenAt, forKey: .takenAt)
        try container.encodeTime(delivery.ackDeadline, forKey: .ackDeadline)
        try container.encode(delivery.fence, forKey: .fence)
    }
}

/// `{"items": [delivery, …]}`: the answer to `take`.
struct PipelineDeliveriesBody: Encodable {
    let items: [PipelineDelivery]

    enum CodingKeys: String, CodingKey { case items }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(items.map { PipelineDeliveryBody(delivery: $0) }, forKey: .items)
    }
}

/// `{"ids": [...]}`: the answer to a batch push, in request order.
struct PipelineBatchBody: Encodable {
    let ids: [String]
}

/// `{moved, dead}`: the answer to a redrive.
struct PipelineRedriveBody: Encodable {
    let moved: Int
    let dead: Int
}

/// `{dead, items, next_cursor}`: a page of the dead list (`next_cursor`
/// `null` on the last page).
struct PipelineDeadBody: Encodable {
    let dead: Int
    var items: [PipelineItem]
    var nextCursor: String?

    enum CodingKeys: String, CodingKey {
        case dead, items
        case nextCursor = "next_cursor"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(dead, forKey: .dead)
        try container.encode(items.map { PipelineItemBody($0) }, forKey: .items)
        try container.encodeCursor(nextCursor, forKey: .nextCursor)
    }
}

/// A filter: `priority, when?, action, field?, value?`; with its name
/// (`name`) where it is shown on its own.
struct PipelineFilterBody: Encodable {
    let name: String?
    let filter: PipelineFilter

    enum CodingKeys: String, CodingKey { case name, priority, when, action, field, value }

    enum WhenKeys: String, CodingKey {
        case field, equals, exists
        case notEquals = "not_equals"
        case isIn = "in"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(name, forKey: .name)
        try container.encode(filter.priority, forKey: .priority)
        if let when = filter.when {
            var nested = container.nestedContainer(keyedBy: WhenKeys.self, forKey: .when)
            try nested.encode(when.field.description, forKey: .field)
            switch when.test {
            case .equals(let v): try nested.encode(v, forKey: .equals)
            case .notEquals(let v): try nested.encode(v, forKey: .notEquals)
            case .isIn(let vs): try nested.encode(vs, forKey: .isIn)
            case .exists(let b): try nested.encode(b, forKey: .exists)
            }
        }
        switch filter.action {
        case .drop:
            try container.encode("drop", forKey: .action)
        case .set(let field, let value):
            try container.encode("set", forKey: .action)
            try container.encode(field.description, forKey: .field)
            try container.encode(value, forKey: .value)
        case .remove(let field):
            try container.encode("remove", forKey: .action)
            try container.encode(field.description, forKey: .field)
        }
    }
}

/// `GET /v1/pipelines/{p}`: name, capacity, paused, fence, filters (in
/// running order), items, next_cursor, counts (gauges `ready`, `in_flight`,
/// `delayed`, `dead`, `waiting_consumers`, `waiting_producers` and the
/// totals), source (`null` when none), config.
struct PipelineStateBody: Encodable {
    let state: PipelineSnapshot
    init(_ state: PipelineSnapshot) { self.state = state }

    enum CodingKeys: String, CodingKey {
        case name, capacity, paused, fence, filters, items, counts, source, config
        case nextCursor = "next_cursor"
    }

    enum ConfigKeys: String, CodingKey {
        case capacity, history, filters, source
        case maxInFlight = "max_in_flight"
        case ackSeconds = "ack_seconds"
        case maxDeliveries = "max_deliveries"
        case dedupSeconds = "dedup_seconds"
    }

    enum SourceKeys: String, CodingKey {
        case kind, path, url, exhausted
        case lowWater = "low_water"
        case pulledTotal = "pulled_total"
        case errorsTotal = "errors_total"
        case lastError = "last_error"
        case nextRetryAt = "next_retry_at"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(state.name, forKey: .name)
        try container.encode(state.capacity, forKey: .capacity)
        try container.encode(state.paused, forKey: .paused)
        try container.encode(state.fence, forKey: .fence)
        try container.encode(
            state.filters.ordered.map { PipelineFilterBody(name: $0.name, filter: $0.filter) }, forKey: .filters)
        try container.encode(state.items.map { PipelineItemBody($0) }, forKey: .items)
        try container.encodeCursor(state.nextCursor, forKey: .nextCursor)
        try container.encode(CountsBody.pipeline(state), forKey: .counts)
        if let source = state.source {
            var nested = container.nestedContainer(keyedBy: SourceKeys.self, forKey: .source)
            try Self.write(source.config, to: &nested)
            try nested.encode(source.pulledTotal, forKey: .pulledTotal)
            try nested.encode(source.errorsTotal, forKey: .errorsTotal)
            try nested.encodeAlways(source.lastError, forKey: .lastError)
            try nested.encode(source.exhausted, forKey: .exhausted)
            try nested.encodeTime(source.nextRetryAt, forKey: .nextRetryAt)
        } else {
            try container.encodeNil(forKey: .source)
        }
        try writeConfig(state.config, to: &container)
    }

    /// The config with every default filled in: `filters` by name, `source`
    /// only when there is one.
    private func writeConfig(_ config: PipelineConfig, to container: inout KeyedEncodingContainer<CodingKeys>) throws {
        var nested = container.nestedContainer(keyedBy: ConfigKeys.self, forKey: .config)
        try nested.encode(config.capacity, forKey: .capacity)
        try nested.encode(config.maxInFlight, forKey: .maxInFlight)
        try nested.encodeSeconds(config.ackSeconds, forKey: .ackSeconds)
        try nested.encode(config.maxDeliveries, forKey: .maxDeliveries)
        try nested.encode(config.history, forKey: .history)
        try nested.encodeSeconds(config.dedupSeconds, forKey: .dedupSeconds)
        var filters = nested.nestedContainer(keyedBy: WireKey.self, forKey: .filters)
        for (name, filter) in config.filters {
            try filters.encode(PipelineFilterBody(name: nil, filter: filter), forKey: WireKey(name))
        }
        if let source = config.source {
            var s = nested.nestedContainer(keyedBy: SourceKeys.self, forKey: .source)
            try Self.write(source, to: &s)
        }
    }

    /// `kind, path | url, low_water`.
    private static func write(_ source: PipelineSourceConfig, to container: inout KeyedEncodingContainer<SourceKeys>)
        throws
    {
        switch source.kind {
        case .file(let path):
            try container.encode("file", forKey: .kind)
            try container.encode(path, forKey: .path)
        case .http(let url):
            try container.encode("http", forKey: .kind)
            try container.encode(url, forKey: .url)
        }
        try container.encode(source.lowWater, forKey: .lowWater)
    }
}
