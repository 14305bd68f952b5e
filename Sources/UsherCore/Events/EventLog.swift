import Locking
import Synchronization

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

/// The event bus: managers emit, streams subscribe.
///
/// Cost when nobody listens: one atomic load per change point (`isRecording`),
/// and no JSON is built. Events are recorded into the replay ring from the
/// first subscription on (so a client that reconnects finds what it missed),
/// never before.
///
/// Subscribers are callbacks run under the log's lock, in id order, on the
/// emitting thread; they must be quick and must not call back into the log
/// (a stream appends bytes to its buffer and wakes its connection).
package final class EventLog: Sendable {
    /// A subscriber's callback.
    package typealias Handler = @Sendable (ResourceEvent) -> Void

    /// Default replay ring size.
    static let defaultCapacity = 10_000

    /// How many events are kept for `Last-Event-ID` replay.
    package let capacity: Int
    private let clock: any UsherClock
    private let recording = Atomic<Bool>(false)
    private let state: Locked<State>

    private struct State: Sendable {
        /// Buffered events with what each is charged, oldest at `start`.
        var ring: [(event: ResourceEvent, bytes: Int)] = []
        var start = 0
        /// The buffer's share of the server's storage budget.
        var storage: StorageAccount
        var nextID: UInt64 = 1
        var nextToken: UInt64 = 0
        var subscribers: [UInt64: Handler] = [:]
    }

    /// What a subscription starts with.
    package struct Subscription: Sendable {
        /// Pass to `unsubscribe`.
        package let token: UInt64
        /// Buffered events after the requested id, oldest first.
        package let replay: [ResourceEvent]
        /// True when events after the requested id were already dropped from
        /// the ring (the client missed some and should re-read state).
        package let gap: Bool
    }

    /// A log keeping up to `capacity` events for replay, within what
    /// `budget` allows: when the budget is short, the oldest buffered events
    /// go first, and an event that cannot fit at all is only streamed live.
    package init(
        capacity: Int = EventLog.defaultCapacity, clock: any UsherClock = SystemClock(),
        budget: StorageBudget = StorageBudget()
    ) {
        self.capacity = max(1, capacity)
        self.clock = clock
        self.state = Locked(State(storage: StorageAccount(budget)))
    }

    /// The bytes the replay buffer is charged now.
    var storedBytes: Int { state.withLock { $0.storage.bytes } }

    /// True once someone subscribed: emitters build events only then.
    package var isRecording: Bool { recording.load(ordering: .relaxed) }

    /// Subscribers now.
    var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    /// The id the next event will get.
    var nextID: UInt64 { state.withLock { $0.nextID } }

    /// Records an event (only while recording) and hands it to every subscriber.
    package func emit(_ draft: ResourceEvent.Draft) {
        guard isRecording else { return }
        let at = clock.now()
        state.withLock { s in
            let event = ResourceEvent(
                id: s.nextID, at: at, kind: draft.kind, name: draft.name, type: draft.type, subject: draft.subject)
            s.nextID += 1
            Self.buffer(event, in: &s, capacity: capacity)
            for handler in s.subscribers.values { handler(event) }
        }
    }

    /// Emits several drafts (convenience for change points with many changes).
    package func emit(_ drafts: [ResourceEvent.Draft]) {
        for d in drafts { emit(d) }
    }

    /// Subscribes; `after` is the last id the client saw (nil: only new events).
    /// The replay and the live events that follow have no gap and no overlap.
    package func subscribe(after: UInt64?, _ handler: @escaping Handler) -> Subscription {
        subscribe(after: after, start: { _ in }, deliver: handler)
    }

    /// Subscribes, running `start` with the replay under the log's lock
    /// before any live event reaches `handler`: a stream writes its replay
    /// there, so nothing live can overtake it.
    @discardableResult
    package func subscribe(
        after: UInt64?, start: (Subscription) -> Void, deliver handler: @escaping Handler
    ) -> Subscription {
        recording.store(true, ordering: .relaxed)
        return state.withLock { s in
            let token = s.nextToken
            s.nextToken += 1
            let sub: Subscription
            if let after {
                let ordered = Self.ordered(s)
                let oldest = ordered.first?.id ?? s.nextID
                // A gap: the client's next event (after + 1) is older than the
                // ring, or the id is from the future (e.g. a restarted server).
                let future = after >= s.nextID
                let gap = after + 1 < oldest || future
                sub = Subscription(token: token, replay: future ? ordered : ordered.filter { $0.id > after }, gap: gap)
            } else {
                sub = Subscription(token: token, replay: [], gap: false)
            }
            start(sub)
            s.subscribers[token] = handler
            return sub
        }
    }

    /// Stops calling the subscription's handler.
    package func unsubscribe(_ token: UInt64) {
        _ = state.withLock { $0.subscribers.removeValue(forKey: token) }
    }

    /// The buffered events, oldest first.
    package func buffered() -> [ResourceEvent] { state.withLock { Self.ordered($0) } }

    private static func ordered(_ s: State) -> [ResourceEvent] {
        s.ring[s.start...].map(\.event)
    }

    /// Keeps `event` for replay, dropping the oldest beyond `capacity` or
    /// while the storage budget is short.
    private static func buffer(_ event: ResourceEvent, in s: inout State, capacity: Int) {
        let bytes = StorageBudget.cost(event.kind, event.name, event.type, payload: event.subject.payload)
        while s.ring.count - s.start >= capacity { dropOldest(&s) }
        while true {
            do throws(StorageFull) {
                try s.storage.reserve(bytes)
                s.ring.append((event, bytes))
                return
            } catch {
                guard s.start < s.ring.count else { return }
                dropOldest(&s)
            }
        }
    }

    private static func dropOldest(_ s: inout State) {
        s.storage.release(s.ring[s.start].bytes)
        s.ring[s.start].event.subject = .count(0)
        s.start += 1
        if s.start == s.ring.count {
            s.ring.removeAll(keepingCapacity: true)
            s.start = 0
        } else if s.start >= 1024 && s.start * 2 >= s.ring.count {
            s.ring.removeFirst(s.start)
            s.start = 0
        }
    }
}
