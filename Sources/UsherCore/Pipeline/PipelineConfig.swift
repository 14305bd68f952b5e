/// A pipeline's configuration (docs/api.md, Pipelines). Every field has a default, so `{}`
/// is a valid config.
package struct PipelineConfig: Sendable, Hashable {
    /// `capacity` (1000): ready, delayed and in-flight items together; also
    /// the most items the dead list keeps.
    package var capacity: Int
    /// `max_in_flight` (1): items handed out and not yet consumed or released;
    /// with 1, the next item is not handed out until the previous one is consumed.
    package var maxInFlight: Int
    /// `ack_seconds` (30): an item not consumed by then is handed out again; 0 = never.
    package var ackSeconds: Double
    /// `max_deliveries` (5): an item handed out this many times that comes
    /// back (by timeout or release) moves to the dead list.
    package var maxDeliveries: Int
    /// `filters` (`{}`): the filters the pipeline starts with, by name.
    package var filters: [String: PipelineFilter]
    /// `source` (none): where the pipeline pulls items by itself.
    package var source: PipelineSourceConfig?
    /// `history` (1000): finished (consumed or cancelled) items remembered,
    /// without their payloads, so a retried consume learns what happened.
    package var history: Int
    /// `dedup_seconds` (300): a push whose `id` belongs to an item that
    /// finished (and is still among the `history` remembered) less than this
    /// long after that item's push answers the finished item and enqueues
    /// nothing; 0 lets such an id be pushed again at once.
    package var dedupSeconds: Double

    /// A config; every argument defaults to the documented default.
    package init(
        capacity: Int = 1000, maxInFlight: Int = 1, ackSeconds: Double = 30, maxDeliveries: Int = 5,
        filters: [String: PipelineFilter] = [:], source: PipelineSourceConfig? = nil, history: Int = 1000,
        dedupSeconds: Double = 300
    ) {
        self.capacity = capacity
        self.maxInFlight = maxInFlight
        self.ackSeconds = ackSeconds
        self.maxDeliveries = maxDeliveries
        self.filters = filters
        self.source = source
        self.history = history
        self.dedupSeconds = dedupSeconds
    }

    /// Allowed ranges, shared by the config, the patch and item requests.
    package enum Limits {
        /// `capacity`.
        package static let capacity = 1...1_000_000
        /// `max_in_flight`.
        package static let maxInFlight = 1...1_000_000
        /// `max_deliveries`.
        package static let maxDeliveries = 1...1000
        /// `history`.
        package static let history = 0...100_000
        /// Also the range of `delay_seconds` (one year).
        package static let seconds = 0.0...31_536_000.0
        /// An item's `priority`.
        package static let priority = -1_000_000...1_000_000
    }

    /// Reads a config object; missing fields take their defaults. The caller
    /// calls `reader.finish()` to reject unknown fields.
    ///
    /// - Parameters:
    ///   - allowRemoteSources: `allow_remote_sources` from the service config.
    ///   - limits: `max_json_depth` and `max_pointer_segments`, for the filters.
    package static func parse(
        _ reader: inout FieldReader, allowRemoteSources: Bool = false, limits: JSONLimits = JSONLimits()
    ) throws(FieldError) -> PipelineConfig {
        var config = try PipelinePatch.parse(&reader).applied(to: PipelineConfig())
        if var f = try reader.object("filters") {
            guard f.keys.count <= PipelineFilter.Limits.count else {
                throw FieldError(field: f.path, message: "at most \(PipelineFilter.Limits.count) filters")
            }
            for name in f.keys {
                guard Names.isValid(name) else {
                    throw FieldError(
                        field: f.fieldPath(name), message: "filter names must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
                    )
                }
                var r = try FieldReader(f.value(name), path: f.fieldPath(name))
                config.filters[name] = try PipelineFilter.parse(&r, limits: limits)
                try r.finish()
            }
            try f.finish()
        }
        if var s = try reader.object("source") {
            config.source = try PipelineSourceConfig.parse(&s, allowRemote: allowRemoteSources)
            try s.finish()
        }
        return config
    }
}

/// A change to a pipeline's mutable config (`PATCH`): `capacity`,
/// `max_in_flight`, `ack_seconds`, `max_deliveries`, `history`, `dedup_seconds`,
/// each optional, and `paused` (state, not config). Filters
/// change through their own routes; the source cannot change.
package struct PipelinePatch: Sendable, Equatable {
    /// New `capacity`.
    package var capacity: Int?
    /// New `max_in_flight`.
    package var maxInFlight: Int?
    /// New `ack_seconds` (later hand-outs only).
    package var ackSeconds: Double?
    /// New `max_deliveries` (later returns only).
    package var maxDeliveries: Int?
    /// New `history`: a smaller one forgets the oldest finished items at once.
    package var history: Int?
    /// New `dedup_seconds` (later pushes only).
    package var dedupSeconds: Double?
    /// Pause (true) or resume (false) hand-outs. Read by the `PATCH` route
    /// only: it is state, not config, so `PUT` and the config file never set it.
    package var paused: Bool?

    /// A patch changing the fields given.
    package init(
        capacity: Int? = nil, maxInFlight: Int? = nil, ackSeconds: Double? = nil, maxDeliveries: Int? = nil,
        history: Int? = nil, dedupSeconds: Double? = nil, paused: Bool? = nil
    ) {
        self.capacity = capacity
        self.maxInFlight = maxInFlight
        self.ackSeconds = ackSeconds
        self.maxDeliveries = maxDeliveries
        self.history = history
        self.dedupSeconds = dedupSeconds
        self.paused = paused
    }

    /// Reads the six mutable config keys, none required (not `paused`). The
    /// caller calls `reader.finish()`.
    package static func parse(_ reader: inout FieldReader) throws(FieldError) -> PipelinePatch {
        var p = PipelinePatch()
        p.capacity = try reader.int("capacity", in: PipelineConfig.Limits.capacity)
        p.maxInFlight = try reader.int("max_in_flight", in: PipelineConfig.Limits.maxInFlight)
        p.ackSeconds = try reader.duration("ack_seconds")
        p.maxDeliveries = try reader.int("max_deliveries", in: PipelineConfig.Limits.maxDeliveries)
        p.history = try reader.int("history", in: PipelineConfig.Limits.history)
        p.dedupSeconds = try reader.duration("dedup_seconds")
        return p
    }

    /// `config` with the fields present in the patch replaced.
    func applied(to config: PipelineConfig) -> PipelineConfig {
        var c = config
        if let capacity { c.capacity = capacity }
        if let maxInFlight { c.maxInFlight = maxInFlight }
        if let ackSeconds { c.ackSeconds = ackSeconds }
        if let maxDeliveries { c.maxDeliveries = maxDeliveries }
        if let history { c.history = history }
        if let dedupSeconds { c.dedupSeconds = dedupSeconds }
        return c
    }
}
