/// Initializers for values another backend keeps (a Redis-backed pipeline
/// decodes its items, hand-outs and state into these).
extension PipelineItem {
    /// An item as stored elsewhere; `seq` is its place in hand-out order while ready.
    package init(
        stored id: String, payload: JSONValue, priority: Int, status: PipelineItemStatus, deliveries: Int,
        createdAt: Timestamp, availableAt: Timestamp, takenAt: Timestamp?, ackDeadline: Timestamp?, fence: Int64?,
        deadAt: Timestamp?, seq: Int64
    ) {
        self.init(
            id: id, payload: payload, priority: priority, status: status, deliveries: deliveries, createdAt: createdAt,
            availableAt: availableAt, takenAt: takenAt, ackDeadline: ackDeadline, fence: fence, deadAt: deadAt)
        self.seq = seq
    }

    /// The item with its payload replaced (what a hand-out shows after the filters).
    package func showing(_ payload: JSONValue) -> PipelineItem {
        var item = self
        item.payload = payload
        return item
    }

    /// Its place in hand-out order while ready.
    package var readySeq: Int64 { seq }
}

extension PipelineDelivery {
    /// A hand-out of `item` (in flight now) showing `payload`.
    package init(handing item: PipelineItem, payload: JSONValue) {
        self.init(
            id: item.id, payload: payload, priority: item.priority, deliveries: item.deliveries,
            takenAt: item.takenAt ?? item.availableAt, ackDeadline: item.ackDeadline, fence: item.fence ?? 0)
    }
}

extension PipelinePushResult {
    /// The answer to a push.
    package init(stored item: PipelineItem, position: Int?, created: Bool) {
        self.item = item
        self.position = position
        self.created = created
    }
}

extension PipelineSnapshot {
    /// A state read elsewhere; no parked callers.
    package init(
        stored name: String, config: PipelineConfig, ready: Int, inFlight: Int, delayed: Int, dead: Int, fence: Int64,
        filters: PipelineFilters, items: [PipelineItem], counts: PipelineCounts
    ) {
        self.init(
            name: name, config: config, capacity: config.capacity, ready: ready, inFlight: inFlight, delayed: delayed,
            dead: dead, fence: fence, waitingConsumers: 0, waitingProducers: 0, filters: filters, items: items,
            counts: counts, source: nil)
    }
}

extension PipelinePatch {
    /// A patch setting every mutable field to `config`'s (a declaration
    /// applied again, or a config stored elsewhere).
    package init(config c: PipelineConfig) {
        self.init(
            capacity: c.capacity, maxInFlight: c.maxInFlight, ackSeconds: c.ackSeconds, maxDeliveries: c.maxDeliveries,
            history: c.history, dedupSeconds: c.dedupSeconds)
    }
}
