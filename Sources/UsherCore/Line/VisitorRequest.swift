/// A request for a slot: the body of `POST /v1/queues/{q}/visitors`.
package struct VisitorRequest: Sendable, Equatable {
    /// Client-supplied id (a valid name); an id that already exists returns that visitor.
    package var id: String?
    /// Dedup key (1–256 characters); keyless visitors are never merged or cancelled.
    package var key: String?
    /// Action compared for duplicates and opposites (1–256 characters).
    package var action: String?
    /// Any JSON, echoed back.
    package var payload: JSONValue?
    /// Higher is granted first; FIFO within a priority.
    package var priority: Int
    /// A shorter hold than the queue's; 0 only when the queue has no limit.
    package var holdSeconds: Double?
    /// Join the waiting line only after this many seconds (0 = at once).
    package var delaySeconds: Double?

    /// A request; only what is given differs from `{}`.
    package init(
        id: String? = nil, key: String? = nil, action: String? = nil, payload: JSONValue? = nil,
        priority: Int = 0, holdSeconds: Double? = nil, delaySeconds: Double? = nil
    ) {
        self.id = id
        self.key = key
        self.action = action
        self.payload = payload
        self.priority = priority
        self.holdSeconds = holdSeconds
        self.delaySeconds = delaySeconds
    }

    /// Reads `id, key, action, payload, priority, hold_seconds, delay_seconds`.
    /// Whether the hold suits the queue is checked by the queue itself. The
    /// caller calls `reader.finish()`.
    package static func parse(_ reader: inout FieldReader) throws(FieldError) -> VisitorRequest {
        var r = VisitorRequest()
        r.id = try reader.name("id")
        r.key = try reader.key("key")
        r.action = try reader.key("action")
        r.payload = reader.value("payload")
        r.priority = try reader.int("priority", in: QueueConfig.Limits.priority) ?? 0
        r.holdSeconds = try reader.duration("hold_seconds")
        r.delaySeconds = try reader.duration("delay_seconds")
        return r
    }
}
