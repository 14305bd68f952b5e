import Locking
import Synchronization

/// The event bus: managers emit, streams read.
///
/// Cost when nobody listens: one atomic load per change point (`isRecording`),
/// and no JSON is built. Events are recorded into the replay ring from the
/// first subscription on (so a client that reconnects finds what it missed),
/// never before.
///
/// A stream is a cursor into the ring, not a queue of its own: its reader
/// pulls the next matching event's frame (encoded once, by the first reader
/// that needs it, and kept in the ring instead of the event) only when the
/// connection can take bytes. So replaying or sending live costs what the
/// client reads, and a subscriber holds no bytes of its own. The ring is
/// charged to the storage budget. A subscriber that falls behind the ring, or
/// more than `lagLimit` bytes behind the live events, is ended (`Read`).
package final class EventLog: Sendable {
    /// An observer's callback, run under the log's lock for every event.
    package typealias Handler = @Sendable (ResourceEvent) -> Void

    /// Default replay ring size.
    static let defaultCapacity = 10_000
    /// Default `max_event_subscribers`.
    package static let defaultMaxSubscribers = 1000
    /// Default `max_event_lag_bytes`.
    package static let defaultLagLimit = 1 << 20

    /// How many events are kept for `Last-Event-ID` replay.
    package let capacity: Int
    /// Most stream subscribers at once.
    let maxSubscribers: Int
    /// Bytes of live events (as the budget prices them) a subscriber may
    /// fall behind before it is ended; twice that and it is cut off.
    package let lagLimit: Int
    private let clock: any UsherClock
    private let encode: @Sendable (ResourceEvent) -> [UInt8]
    private let recording = Atomic<Bool>(false)
    private let state: Locked<State>

    /// What a stream's reader gets.
    package enum Read: Sendable {
        /// The next bytes of the current event's frame, at most `max`.
        case bytes(ArraySlice<UInt8>)
        /// Nothing to send now: the subscriber's `wake` runs when there is.
        case wait
        /// Nothing to send for a heartbeat's period: send a keep-alive.
        case ping
        /// The stream's next event is no longer buffered: end the stream;
        /// the client resumes after `lastEventID`.
        case behind(lastEventID: UInt64?)
        /// More than `lagLimit` behind the live events: end the stream.
        case lagging(lastEventID: UInt64?)
        /// Between two events while finishing, or no such subscriber: end cleanly.
        case ended
        /// The event being sent left the ring part-way: close the connection.
        case broken
    }

    /// What a subscriber is told, outside the log's lock.
    package enum Signal: Sendable {
        /// There is something to read.
        case wake
        /// Twice `lagLimit` behind without taking its last event: close the connection now.
        case cut
    }

    /// What a stream subscription starts with.
    package struct Subscription: Sendable {
        /// Pass to `read` and `unsubscribe`.
        package let token: UInt64
        /// True when events after the requested id were already dropped from
        /// the ring (the client missed some and should re-read state).
        package let gap: Bool
        /// The first id the stream will consider (the oldest buffered one after a gap).
        package let firstID: UInt64
    }

    /// `max_event_subscribers` streams are open.
    package struct TooManySubscribers: Error, Sendable, Equatable {
        /// The limit.
        package let limit: Int
    }

    private struct Entry: Sendable {
        let id: UInt64
        let kind: String
        let name: String
        /// Until the frame is encoded; then only the frame is kept.
        var event: ResourceEvent?
        var frame: [UInt8]?
        /// What the storage budget is charged for it (0 for a live-only event).
        var charged: Int
        /// What it counts against a subscriber's lag: its price when recorded.
        let weight: Int
        /// Did not fit the budget: kept, uncharged, only until the next event.
        let liveOnly: Bool
    }

    private struct Subscriber: Sendable {
        let filter: EventFilter
        let signal: @Sendable (Signal) -> Void
        /// The first event that was live when it subscribed.
        let liveFrom: UInt64
        /// The id of the next event to consider.
        var next: UInt64
        /// Bytes of event `next` already handed out (0: between events).
        var offset = 0
        var lastSent: UInt64?
        /// Weight of the live events it matched and has not finished.
        var lag = 0
        var waiting = false
        var pingDue = false
        var lagging = false
        var cut = false
    }

    private struct State: Sendable {
        /// Buffered events, oldest at `start`; ids are consecutive.
        var ring: [Entry] = []
        var start = 0
        /// The buffer's share of the server's storage budget.
        var storage: StorageAccount
        var nextID: UInt64 = 1
        var nextToken: UInt64 = 0
        var subscribers: [UInt64: Subscriber] = [:]
        var observers: [UInt64: Handler] = [:]

        /// The ring index of event `id`, if it is buffered.
        func index(of id: UInt64) -> Int? {
            guard start < ring.count, id >= ring[start].id else { return nil }
            let i = start + Int(id - ring[start].id)
            return i < ring.count ? i : nil
        }
    }

    /// A log keeping up to `capacity` events for replay, within what
    /// `budget` allows (when it is short the oldest go first; an event that
    /// cannot fit at all is only kept until the next one). `encode` makes an
    /// event's frame, once per event.
    package init(
        capacity: Int = EventLog.defaultCapacity, clock: any UsherClock = SystemClock(),
        budget: StorageBudget = StorageBudget(), maxSubscribers: Int = EventLog.defaultMaxSubscribers,
        lagLimit: Int = EventLog.defaultLagLimit,
        encode: @escaping @Sendable (ResourceEvent) -> [UInt8] = { Array("id: \($0.id)\n\n".utf8) }
    ) {
        self.capacity = max(1, capacity)
        self.clock = clock
        self.maxSubscribers = max(1, maxSubscribers)
        self.lagLimit = max(1, lagLimit)
        self.encode = encode
        self.state = Locked(State(storage: StorageAccount(budget)))
    }

    /// The bytes the replay buffer is charged now.
    var storedBytes: Int { state.withLock { $0.storage.bytes } }

    /// True once someone subscribed: emitters build events only then.
    package var isRecording: Bool { recording.load(ordering: .relaxed) }

    /// Stream subscribers now.
    var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    /// Subscribers past `lagLimit`, waiting to be told (tests).
    var laggingSubscribers: Int { state.withLock { $0.subscribers.values.count(where: \.lagging) } }

    /// The id the next event will get.
    package var nextID: UInt64 { state.withLock { $0.nextID } }

    /// The buffered events no stream has needed yet (once a frame is made,
    /// only the frame is kept), oldest first: for tests and tools.
    func buffered() -> [ResourceEvent] { state.withLock { s in s.ring[s.start...].compactMap(\.event) } }

    /// The ids of the buffered events, oldest first (live-only ones included).
    func bufferedIDs() -> [UInt64] { state.withLock { s in s.ring[s.start...].map(\.id) } }

    /// Records an event (only while recording), runs the observers and wakes
    /// the subscribers it concerns.
    package func emit(_ draft: ResourceEvent.Draft) {
        guard isRecording else { return }
        let at = clock.now()
        let lagLimit = lagLimit
        let signals: [(@Sendable (Signal) -> Void, Signal)] = state.withLock { s in
            let event = ResourceEvent(
                id: s.nextID, at: at, kind: draft.kind, name: draft.name, type: draft.type, subject: draft.subject)
            s.nextID += 1
            let weight = Self.buffer(event, in: &s, capacity: capacity)
            for handler in s.observers.values { handler(event) }
            var signals: [(@Sendable (Signal) -> Void, Signal)] = []
            for i in s.subscribers.values.indices {
                guard s.subscribers.values[i].filter.matches(kind: event.kind, name: event.name) else { continue }
                Self.noteLive(weight, &s.subscribers.values[i], limit: lagLimit, into: &signals)
            }
            return signals
        }
        for (signal, what) in signals { signal(what) }
    }

    /// Emits several drafts (convenience for change points with many changes).
    package func emit(_ drafts: [ResourceEvent.Draft]) {
        for d in drafts { emit(d) }
    }

    /// Adds a live event's weight to a subscriber's lag and says what to tell it.
    private static func noteLive(
        _ weight: Int, _ sub: inout Subscriber, limit: Int, into signals: inout [(@Sendable (Signal) -> Void, Signal)]
    ) {
        guard !sub.cut else { return }
        sub.lag += weight
        if sub.lag > 2 * limit && sub.lagging {
            sub.cut = true
            signals.append((sub.signal, .cut))
        } else if sub.lag > limit {
            sub.lagging = true
        }
        if sub.waiting {
            sub.waiting = false
            signals.append((sub.signal, .wake))
        }
    }

    /// Runs `handler` for every event from now on, under the log's lock (tests and tools).
    package func observe(_ handler: @escaping Handler) -> UInt64 {
        recording.store(true, ordering: .relaxed)
        return state.withLock { s in
            let token = s.nextToken
            s.nextToken += 1
            s.observers[token] = handler
            return token
        }
    }

    /// Opens a stream cursor; `after` is the last id the client saw (nil:
    /// only new events). Events come out of `read` in id order from the one
    /// after `after`, with no gap (or `gap` says so) and no repeat. `signal`
    /// runs outside the lock, on an emitting or heartbeat thread.
    package func subscribe(
        after: UInt64?, filter: EventFilter = EventFilter(), signal: @escaping @Sendable (Signal) -> Void
    ) throws(TooManySubscribers) -> Subscription {
        recording.store(true, ordering: .relaxed)
        let limit = maxSubscribers
        let result: Result<Subscription, TooManySubscribers> = state.withLock { s in
            guard s.subscribers.count < limit else { return .failure(TooManySubscribers(limit: limit)) }
            let token = s.nextToken
            s.nextToken += 1
            let oldest = s.start < s.ring.count ? s.ring[s.start].id : s.nextID
            var first = s.nextID
            var gap = false
            if let after {
                // A gap: the client's next event (after + 1) is older than the
                // ring, or the id is from the future (e.g. a restarted server).
                gap = after + 1 < oldest || after >= s.nextID
                first = gap ? oldest : after + 1
            }
            s.subscribers[token] = Subscriber(filter: filter, signal: signal, liveFrom: s.nextID, next: first)
            return .success(Subscription(token: token, gap: gap, firstID: first))
        }
        return try result.get()
    }

    /// Ends a subscription or an observation.
    package func unsubscribe(_ token: UInt64) {
        state.withLock { s in
            if s.subscribers.removeValue(forKey: token) == nil { s.observers.removeValue(forKey: token) }
        }
    }

    /// Marks every idle subscriber for a keep-alive and wakes it (one timer
    /// for all streams; busy ones need none).
    package func heartbeat() {
        let signals: [@Sendable (Signal) -> Void] = state.withLock { s in
            var signals: [@Sendable (Signal) -> Void] = []
            for i in s.subscribers.values.indices where s.subscribers.values[i].waiting {
                s.subscribers.values[i].waiting = false
                s.subscribers.values[i].pingDue = true
                signals.append(s.subscribers.values[i].signal)
            }
            return signals
        }
        for signal in signals { signal(.wake) }
    }

    /// What the subscriber sends next, at most `max` bytes; with `finishing`,
    /// only the rest of an event already begun.
    package func read(_ token: UInt64, max: Int, finishing: Bool = false) -> Read {
        while true {
            let step = state.withLock { s in Self.step(&s, token, max: Swift.max(1, max), finishing: finishing) }
            switch step {
            case .done(let read): return read
            case .encode(let event):
                let frame = encode(event)
                state.withLock { s in Self.keep(frame, of: event.id, in: &s) }
            }
        }
    }

    private enum Step: Sendable {
        case done(Read)
        /// This event's frame is needed: encode it outside the lock.
        case encode(ResourceEvent)
    }

    private static func step(_ s: inout State, _ token: UInt64, max: Int, finishing: Bool) -> Step {
        guard var sub = s.subscribers[token] else { return .done(.ended) }
        defer { s.subscribers[token] = sub }
        if sub.offset > 0 {
            guard let i = s.index(of: sub.next), let frame = s.ring[i].frame else { return .done(.broken) }
            return .done(.bytes(handOut(frame, of: s.ring[i], max: max, to: &sub)))
        }
        if finishing { return .done(.ended) }
        if sub.lagging { return .done(.lagging(lastEventID: sub.lastSent)) }
        if sub.next < s.nextID {
            guard var i = s.index(of: sub.next) else { return .done(.behind(lastEventID: sub.lastSent)) }
            while i < s.ring.count {
                let entry = s.ring[i]
                guard sub.filter.matches(kind: entry.kind, name: entry.name) else {
                    sub.next = entry.id + 1
                    i += 1
                    continue
                }
                if let frame = entry.frame { return .done(.bytes(handOut(frame, of: entry, max: max, to: &sub))) }
                if let event = entry.event { return .encode(event) }
                return .done(.behind(lastEventID: sub.lastSent))  // a live-only event already gone
            }
        }
        if sub.pingDue {
            sub.pingDue = false
            return .done(.ping)
        }
        sub.waiting = true
        return .done(.wait)
    }

    /// The next slice of `frame` for `sub`, moving its cursor past the event once all is out.
    private static func handOut(_ frame: [UInt8], of entry: Entry, max: Int, to sub: inout Subscriber)
        -> ArraySlice<UInt8>
    {
        let end = min(frame.count, sub.offset + max)
        let slice = frame[sub.offset..<end]
        if end < frame.count {
            sub.offset = end
        } else {
            sub.offset = 0
            sub.next = entry.id + 1
            sub.lastSent = entry.id
            if entry.id >= sub.liveFrom { sub.lag -= entry.weight }
        }
        return slice
    }

    /// Keeps an event's frame in its place of the event, charged what it takes.
    private static func keep(_ frame: [UInt8], of id: UInt64, in s: inout State) {
        guard let i = s.index(of: id), s.ring[i].frame == nil, s.ring[i].event != nil else { return }
        s.ring[i].frame = frame
        s.ring[i].event = nil
        guard !s.ring[i].liveOnly else { return }
        let cost = StorageBudget.cost(s.ring[i].kind, s.ring[i].name) + frame.count
        let delta = cost - s.ring[i].charged
        s.ring[i].charged = cost
        guard delta > 0 else {
            s.storage.release(-delta)
            return
        }
        while true {
            do throws(StorageFull) {
                try s.storage.reserve(delta)
                return
            } catch {
                // Older events make room; the newest keeps its frame even when none are left.
                guard let oldest = s.ring[s.start...].first, oldest.id < id else {
                    s.storage.charge(delta)
                    return
                }
                dropOldest(&s)
            }
        }
    }

    /// Keeps `event` for replay, dropping the oldest beyond `capacity` or
    /// while the storage budget is short; returns its weight.
    private static func buffer(_ event: ResourceEvent, in s: inout State, capacity: Int) -> Int {
        let bytes = StorageBudget.cost(event.kind, event.name, event.type, payload: event.subject.payload)
        // The previous event if it was live-only: its place stays, its bytes go.
        if let last = s.ring.indices.last, s.ring[last].liveOnly {
            s.ring[last].event = nil
            s.ring[last].frame = nil
        }
        while s.ring.count - s.start >= capacity { dropOldest(&s) }
        while true {
            do throws(StorageFull) {
                try s.storage.reserve(bytes)
                s.ring.append(
                    Entry(
                        id: event.id, kind: event.kind, name: event.name, event: event, charged: bytes, weight: bytes,
                        liveOnly: false))
                return bytes
            } catch {
                guard s.start < s.ring.count else { break }
                dropOldest(&s)
            }
        }
        s.ring.append(
            Entry(
                id: event.id, kind: event.kind, name: event.name, event: event, charged: 0, weight: bytes,
                liveOnly: true))
        return bytes
    }

    private static func dropOldest(_ s: inout State) {
        s.storage.release(s.ring[s.start].charged)
        s.ring[s.start].event = nil
        s.ring[s.start].frame = nil
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

/// Which events a stream wants; nil matches any.
package struct EventFilter: Sendable {
    /// Only this kind (`queue`, `window`, …).
    package var kind: String?
    /// Only resources with this name.
    package var name: String?

    package init(kind: String? = nil, name: String? = nil) {
        self.kind = kind
        self.name = name
    }

    func matches(kind: String, name: String) -> Bool {
        (self.kind == nil || self.kind == kind) && (self.name == nil || self.name == name)
    }
}
