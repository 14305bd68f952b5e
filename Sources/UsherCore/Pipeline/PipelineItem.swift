/// Where an item is.
package enum PipelineItemStatus: String, Sendable, Equatable {
    /// Waiting to be handed out.
    case ready
    /// Pushed or released with a delay; ready at `available_at`.
    case delayed
    /// Handed out and not yet consumed or released.
    case inFlight = "in_flight"
    /// Handed out `max_deliveries` times and came back; kept on the dead list.
    case dead
    /// Finished: acknowledged; remembered (without its payload) up to `history`.
    case consumed
    /// Finished: removed by `DELETE`; remembered like a consumed item.
    case cancelled

    /// True for the statuses of items that left the pipeline.
    package var isFinished: Bool { self == .consumed || self == .cancelled }
}

/// One item of a pipeline, as stored: the payload is the one pushed, never
/// the filtered one.
package struct PipelineItem: Sendable, Hashable {
    /// The client's or the server's id.
    package internal(set) var id: String
    /// The payload as pushed; filters never change it.
    package internal(set) var payload: JSONValue
    /// Higher is handed out first.
    package internal(set) var priority: Int
    /// Where the item is.
    package internal(set) var status: PipelineItemStatus
    /// Hand-outs so far (reset by redrive).
    package internal(set) var deliveries: Int
    /// When it was pushed (or pulled from the source).
    package internal(set) var createdAt: Timestamp
    /// When it became (or becomes, while delayed) ready.
    package internal(set) var availableAt: Timestamp
    /// The latest hand-out.
    package internal(set) var takenAt: Timestamp?
    /// While in flight: when it is handed out again unless consumed; nil for no limit.
    package internal(set) var ackDeadline: Timestamp?
    /// The fence of the latest hand-out.
    package internal(set) var fence: Int64?
    /// When it moved to the dead list.
    package internal(set) var deadAt: Timestamp?

    /// Place in hand-out order among ready items: lower first within a priority.
    var seq: Int64 = 0
    /// Matches the item's live entry in the engine's deadline heap; `noTimer`
    /// while none is filed (ready, or in flight without an ack deadline).
    var timerToken: Int64 = noTimer
    /// The token of an item with no live entry: matches none (tokens start at 1).
    static let noTimer: Int64 = 0
    /// A delayed release: goes to the front when the delay ends.
    var toFront = false
}

/// One hand-out: what `take` returns for each item.
package struct PipelineDelivery: Sendable, Equatable {
    /// The item's id.
    package var id: String
    /// The payload after the filters ran.
    package var payload: JSONValue
    /// The item's priority.
    package var priority: Int
    /// Hand-outs so far, this one included.
    package var deliveries: Int
    /// When this hand-out happened.
    package var takenAt: Timestamp
    /// When it is handed out again unless consumed; nil for no limit.
    package var ackDeadline: Timestamp?
    /// The fencing token of this hand-out.
    package var fence: Int64
}

/// A push: the body of `POST /v1/pipelines/{p}/items`, or one entry of a batch.
package struct PipelinePushRequest: Sendable, Equatable {
    /// Client-supplied id (a valid name); an id the pipeline holds returns that item.
    package var id: String?
    /// Any JSON, `null` included.
    package var payload: JSONValue
    /// Higher is handed out first (0).
    package var priority: Int
    /// Ready only after this many seconds (0 or nil = at once).
    package var delaySeconds: Double?

    /// A push; only the payload is required.
    package init(id: String? = nil, payload: JSONValue, priority: Int = 0, delaySeconds: Double? = nil) {
        self.id = id
        self.payload = payload
        self.priority = priority
        self.delaySeconds = delaySeconds
    }

    /// Reads `id, payload, priority, delay_seconds`; `payload` is required (an
    /// explicit `null` is a null payload). The caller calls `reader.finish()`.
    package static func parse(_ reader: inout FieldReader) throws(FieldError) -> PipelinePushRequest {
        let id = try reader.name("id")
        guard reader.keys.contains("payload") else {
            throw FieldError(field: reader.fieldPath("payload"), message: "is required (any JSON value)")
        }
        let payload = reader.value("payload") ?? .null
        let priority = try reader.int("priority", in: PipelineConfig.Limits.priority) ?? 0
        let delay = try reader.duration("delay_seconds")
        return PipelinePushRequest(id: id, payload: payload, priority: priority, delaySeconds: delay)
    }

    /// Reads `{"items": [push, …]}`, each entry finished here (unknown fields
    /// are errors naming `items[i].field`). The caller calls `reader.finish()`.
    package static func parseBatch(_ reader: inout FieldReader) throws(FieldError) -> [PipelinePushRequest] {
        guard let entries = try reader.array("items") else {
            throw FieldError(field: reader.fieldPath("items"), message: "is required (an array of items)")
        }
        var out: [PipelinePushRequest] = []
        out.reserveCapacity(entries.count)
        for (i, entry) in entries.enumerated() {
            let path = "\(reader.fieldPath("items"))[\(i)]"
            guard case .object = entry else { throw FieldError(field: path, message: "must be an object") }
            var r = try FieldReader(entry, path: path)
            out.append(try parse(&r))
            try r.finish()
        }
        return out
    }
}

/// The answer to a push.
package struct PipelinePushResult: Sendable, Equatable {
    /// The item as stored now.
    package var item: PipelineItem
    /// 1-based place in hand-out order while ready; nil otherwise.
    package var position: Int?
    /// False when the id already existed and this is that item (200, not 201).
    package var created: Bool
}

/// A pipeline's running totals.
package struct PipelineCounts: Sendable, Hashable {
    /// Items that entered the pipeline (pushes, batches and source pulls; not
    /// a push that found its id already there: `deduplicatedTotal`).
    package var pushedTotal = 0
    /// Hand-outs (redeliveries included).
    package var deliveredTotal = 0
    /// Items consumed.
    package var consumedTotal = 0
    /// Items a filter dropped.
    package var filteredTotal = 0
    /// In-flight items whose ack deadline passed and that went back to the buffer.
    package var redeliveredTotal = 0
    /// Items that moved to the dead list.
    package var deadTotal = 0
    /// Dead items dropped because the dead list was full (oldest first).
    package var deadDroppedTotal = 0
    /// Items cancelled by a client (ready, delayed or dead).
    package var cancelledTotal = 0
    /// Extends of an in-flight item's ack deadline.
    package var extendedTotal = 0
    /// Pushes (and batch entries) answered with the item their `id` already
    /// names, live or finished within `dedup_seconds`: nothing enqueued.
    package var deduplicatedTotal = 0

    /// All zero.
    package init() {}
}

extension PipelineItem {
    /// Whether the item is in another status or delivery than `status` and
    /// `fence`: what a wait on an item by id waits for (`GET …/items/{id}?wait=S`).
    package func hasMoved(from status: PipelineItemStatus, fence: Int64?) -> Bool {
        self.status != status || self.fence != fence
    }
}
