/// What an event carries: the changed thing, in its own kind's terms.
package enum EventSubject: Sendable {
    /// A queue's visitor.
    case visitor(VisitorView)
    /// A window's item.
    case windowItem(WindowItem)
    /// A pool's lease.
    case lease(Lease)
    /// A pipeline's item; `reason` says why, where the status alone does not.
    case pipelineItem(PipelineItem, reason: String?)
    /// One hand-out of a pipeline item.
    case delivery(PipelineDelivery)
    /// How many items a clock-driven change moved (redeliveries, dead letters).
    case count(Int)
    /// A machine's transition.
    case transition(MachineTransition)
    /// A machine's transaction, opened or ended.
    case transaction(MachineTransaction)
    /// A `PATCH` that changed something: each changed field with its new value.
    case changes([(field: String, value: JSONValue)])
    /// A created resource: its list summary.
    case summary(JSONValue)
    /// A deleted resource: its name.
    case deleted(name: String)

    /// The client-given JSON inside, which dominates what the event costs to keep.
    var payload: JSONValue? {
        switch self {
        case .visitor(let v): v.payload
        case .windowItem(let item): item.payload
        case .lease(let lease): lease.elementData
        case .pipelineItem(let item, _): item.payload
        case .delivery(let delivery): delivery.payload
        case .summary(let summary): summary
        case .changes(let changes): .object(changes.map { ($0.field, $0.value) })
        case .transaction(let transaction): transaction.data
        case .count, .transition, .deleted: nil
        }
    }
}

/// One state change of one resource, as `GET /v1/events` streams it.
package struct ResourceEvent: Sendable {
    /// Increasing from 1 within one `EventLog` (the SSE `id:`).
    package var id: UInt64
    /// When it was recorded.
    package var at: Timestamp
    /// The resource kind: `queue`, `window`, `pool`, `pipeline`, `machine`.
    package var kind: String
    /// The resource's name.
    package var name: String
    /// What happened: `granted`, `expired`, `transition`, … (the SSE `event:`).
    package var type: String
    /// The changed thing (a visitor, an item, a transition).
    package var subject: EventSubject

    package init(id: UInt64, at: Timestamp, kind: String, name: String, type: String, subject: EventSubject) {
        self.id = id
        self.at = at
        self.kind = kind
        self.name = name
        self.type = type
        self.subject = subject
    }

    /// The event without its id: what a manager emits.
    package struct Draft: Sendable {
        package var kind: String
        package var name: String
        package var type: String
        package var subject: EventSubject

        package init(kind: String, name: String, type: String, subject: EventSubject) {
            self.kind = kind
            self.name = name
            self.type = type
            self.subject = subject
        }
    }
}
