import Testing

@testable import Locking
@testable import UsherCore

@Suite struct EventLogTests {
    private func draft(_ n: Int, name: String = "q", size: Int = 0) -> ResourceEvent.Draft {
        let payload: JSONValue =
            size > 0 ? .string(String(repeating: "x", count: size)) : .object([("n", .int(n))])
        return ResourceEvent.Draft(kind: "queue", name: name, type: "granted", subject: .summary(payload))
    }

    /// Counts the frames made; a frame is `<id>;` then the payload's size in dots.
    private final class Encoder: Sendable {
        let made = Locked<[UInt64]>([])

        func encode(_ event: ResourceEvent) -> [UInt8] {
            made.withLock { $0.append(event.id) }
            return Array("\(event.id);".utf8)
                + [UInt8](repeating: 46, count: StorageBudget.size(of: event.subject.payload))
        }
    }

    /// A subscriber that records its signals.
    private final class Signals: Sendable {
        let seen = Locked<[EventLog.Signal]>([])
        var handler: @Sendable (EventLog.Signal) -> Void { { s in self.seen.withLock { $0.append(s) } } }
        var wakes: Int { seen.withLock { $0.count { $0 == .wake } } }
        var cuts: Int { seen.withLock { $0.count { $0 == .cut } } }
    }

    /// Reads whole frames until the log has nothing more; the ids read, and how it stopped.
    private func drain(_ log: EventLog, _ token: UInt64, max: Int = 1 << 20) -> (ids: [UInt64], end: EventLog.Read) {
        var text: [UInt8] = []
        while true {
            let read = log.read(token, max: max)
            guard case .bytes(let bytes) = read else {
                let ids = String(decoding: text, as: UTF8.self).split(separator: ";").dropLast().map {
                    UInt64($0.drop { $0 == "." })!
                }
                return (ids, read)
            }
            text += bytes
        }
    }

    @Test func recordsNothingUntilSomeoneSubscribes() throws {
        let log = EventLog(capacity: 4, clock: ManualClock())
        #expect(!log.isRecording)
        log.emit(draft(1))
        #expect(log.bufferedIDs().isEmpty)
        #expect(log.nextID == 1)
        let sub = try log.subscribe(after: nil) { _ in }
        #expect(log.isRecording)
        log.unsubscribe(sub.token)
        log.emit(draft(2))
        // Still recorded after the last subscriber left, for a client that reconnects.
        #expect(log.bufferedIDs() == [1])
    }

    @Test func observersSeeEventsInIDOrder() {
        let log = EventLog(capacity: 100, clock: ManualClock())
        let seen = Locked<[UInt64]>([])
        let token = log.observe { e in seen.withLock { $0.append(e.id) } }
        for n in 0..<5 { log.emit(draft(n)) }
        #expect(seen.withLock { $0 } == [1, 2, 3, 4, 5])
        log.unsubscribe(token)
        log.emit(draft(6))
        #expect(seen.withLock { $0 } == [1, 2, 3, 4, 5])
    }

    @Test func ringKeepsTheNewestCapacityEvents() {
        let log = EventLog(capacity: 3, clock: ManualClock())
        _ = log.observe { _ in }
        for n in 0..<7 { log.emit(draft(n)) }
        #expect(log.bufferedIDs() == [5, 6, 7])
        #expect(log.buffered().map { $0.subject.payload?["n"] } == [.int(4), .int(5), .int(6)])
    }

    @Test func replaysAfterALastEventIDWithoutGapOrOverlap() throws {
        let encoder = Encoder()
        let log = EventLog(capacity: 5, clock: ManualClock(), encode: encoder.encode)
        _ = log.observe { _ in }
        for n in 0..<4 { log.emit(draft(n)) }
        let resumed = try log.subscribe(after: 2) { _ in }
        #expect(!resumed.gap && resumed.firstID == 3)
        #expect(drain(log, resumed.token).ids == [3, 4])
        log.emit(draft(5))
        #expect(drain(log, resumed.token).ids == [5])
        let upToDate = try log.subscribe(after: 5) { _ in }
        #expect(!upToDate.gap)
        #expect(drain(log, upToDate.token).ids.isEmpty)
    }

    @Test func reportsAGapWhenTheIDIsOlderThanTheRing() throws {
        let log = EventLog(capacity: 3, clock: ManualClock(), encode: Encoder().encode)
        _ = log.observe { _ in }
        for n in 0..<6 { log.emit(draft(n)) }  // ids 1...6, ring holds 4...6
        let justInTime = try log.subscribe(after: 3) { _ in }
        #expect(!justInTime.gap && drain(log, justInTime.token).ids == [4, 5, 6])
        let tooOld = try log.subscribe(after: 1) { _ in }
        #expect(tooOld.gap && tooOld.firstID == 4)
        #expect(drain(log, tooOld.token).ids == [4, 5, 6])
        // An id from the future (a restarted server): a gap, and everything buffered.
        let future = try log.subscribe(after: 99) { _ in }
        #expect(future.gap && drain(log, future.token).ids == [4, 5, 6])
    }

    /// A replay storm: many reconnects with an old `Last-Event-ID`
    /// that read nothing make no frame; the frames are made once, by the
    /// first reader, whatever the number of readers.
    @Test func replayCostsWhatIsReadAndFramesAreMadeOnce() throws {
        let encoder = Encoder()
        let log = EventLog(clock: ManualClock(), encode: encoder.encode)
        _ = log.observe { _ in }
        for n in 0..<40 { log.emit(draft(n, size: 1000)) }
        for _ in 0..<2000 {
            let sub = try log.subscribe(after: 1) { _ in }
            log.unsubscribe(sub.token)
        }
        #expect(encoder.made.withLock { $0.isEmpty })
        #expect(log.subscriberCount == 0)
        let readers = try (0..<3).map { _ in try log.subscribe(after: 1) { _ in } }
        // Only what was asked for: a few bytes of event 2.
        guard case .bytes(let first) = log.read(readers[0].token, max: 10) else {
            Issue.record("no bytes")
            return
        }
        #expect(first.count == 10 && encoder.made.withLock { $0 } == [2])
        for r in readers {
            #expect(drain(log, r.token, max: 4096).ids.count == (r.token == readers[0].token ? 38 : 39))
        }
        #expect(encoder.made.withLock { $0 } == Array(2...40))
    }

    /// Once encoded, an event is charged its frame instead of its estimate.
    @Test func theRingIsChargedItsFrames() throws {
        let budget = StorageBudget()
        let encoder = Encoder()
        let log = EventLog(clock: ManualClock(), budget: budget, encode: encoder.encode)
        let sub = try log.subscribe(after: nil) { _ in }
        log.emit(draft(1, size: 5000))
        #expect(
            budget.usedBytes
                == StorageBudget.cost("queue", "q", "granted", payload: .string(String(repeating: "x", count: 5000))))
        #expect(drain(log, sub.token).ids == [1])
        #expect(budget.usedBytes == StorageBudget.cost("queue", "q") + "1;".utf8.count + 5016)
        #expect(log.buffered().isEmpty && log.bufferedIDs() == [1])
    }

    @Test func filtersSkipOtherEventsAndWakeOnlyForTheirOwn() throws {
        let log = EventLog(clock: ManualClock(), encode: Encoder().encode)
        let signals = Signals()
        let sub = try log.subscribe(after: nil, filter: EventFilter(kind: "queue", name: "b"), signal: signals.handler)
        #expect(log.read(sub.token, max: 100).isWait)
        log.emit(draft(1, name: "a"))
        #expect(signals.wakes == 0)
        log.emit(draft(2, name: "b"))
        #expect(signals.wakes == 1)
        #expect(drain(log, sub.token).ids == [2])
    }

    @Test func anIdleSubscriberGetsOnePingPerHeartbeat() throws {
        let log = EventLog(clock: ManualClock(), encode: Encoder().encode)
        let signals = Signals()
        let sub = try log.subscribe(after: nil, signal: signals.handler)
        log.heartbeat()  // not waiting yet: nothing
        #expect(signals.wakes == 0)
        #expect(log.read(sub.token, max: 100).isWait)
        log.heartbeat()
        log.heartbeat()
        #expect(signals.wakes == 1)
        guard case .ping = log.read(sub.token, max: 100) else {
            Issue.record("no ping")
            return
        }
        #expect(log.read(sub.token, max: 100).isWait)
    }

    /// A subscriber that stops reading is ended past the lag limit (after the
    /// event it is sending), and cut off at twice the limit; it holds no bytes.
    @Test func aLaggingSubscriberIsEndedThenCut() throws {
        let log = EventLog(clock: ManualClock(), lagLimit: 10_000, encode: Encoder().encode)
        let signals = Signals()
        let sub = try log.subscribe(after: nil, signal: signals.handler)
        log.emit(draft(1, size: 4000))
        guard case .bytes = log.read(sub.token, max: 100) else {
            Issue.record("no bytes")
            return
        }  // part of event 1
        for n in 2...3 { log.emit(draft(n, size: 4000)) }
        #expect(signals.cuts == 0)
        // The rest of event 1, then the end: it is past the limit.
        let (ids, end) = drain(log, sub.token)
        #expect(ids.isEmpty)  // the first slice held the id
        guard case .lagging(let last) = end else {
            Issue.record("\(end)")
            return
        }
        #expect(last == 1)
        for n in 4...6 { log.emit(draft(n, size: 4000)) }
        #expect(signals.cuts == 1)
    }

    @Test func aSubscriberBehindTheRingIsEnded() throws {
        let log = EventLog(capacity: 3, clock: ManualClock(), encode: Encoder().encode)
        let sub = try log.subscribe(after: nil) { _ in }
        log.emit(draft(1))
        #expect(drain(log, sub.token).ids == [1])
        for n in 2...6 { log.emit(draft(n)) }
        guard case .behind(let last) = log.read(sub.token, max: 100) else {
            Issue.record("not behind")
            return
        }
        #expect(last == 1)
    }

    /// An event too large for what the budget has left goes to those who read
    /// it before the next event; a reader part-way through it is broken off.
    @Test func anEventBeyondTheBudgetIsOnlyLive() throws {
        let budget = StorageBudget(limit: 4000)
        let log = EventLog(clock: ManualClock(), budget: budget, encode: Encoder().encode)
        let quick = try log.subscribe(after: nil) { _ in }
        let slow = try log.subscribe(after: nil) { _ in }
        let late = try log.subscribe(after: nil) { _ in }
        log.emit(draft(1, size: 5000))
        #expect(budget.usedBytes == 0)
        #expect(drain(log, quick.token).ids == [1])
        guard case .bytes = log.read(slow.token, max: 100) else {
            Issue.record("no bytes")
            return
        }
        log.emit(draft(2))
        #expect(log.read(slow.token, max: 100).isBroken)
        guard case .behind = log.read(late.token, max: 100) else {
            Issue.record("not behind")
            return
        }
        #expect(drain(log, quick.token).ids == [2])
    }

    @Test func subscribersAreBounded() throws {
        let log = EventLog(clock: ManualClock(), maxSubscribers: 2)
        let a = try log.subscribe(after: nil) { _ in }
        _ = try log.subscribe(after: nil) { _ in }
        #expect(throws: EventLog.TooManySubscribers(limit: 2)) { _ = try log.subscribe(after: nil) { _ in } }
        log.unsubscribe(a.token)
        _ = try log.subscribe(after: nil) { _ in }
    }

    @Test func eventCarriesEveryField() {
        let clock = ManualClock()
        let log = EventLog(capacity: 2, clock: clock)
        _ = log.observe { _ in }
        log.emit(draft(7))
        let event = log.buffered()[0]
        #expect(event.id == 1)
        #expect(event.kind == "queue")
        #expect(event.name == "q")
        #expect(event.type == "granted")
        #expect(event.subject.payload == .object([("n", .int(7))]))
        #expect(event.at == clock.now())
    }

    @Test func queueEmitsGrantAndCompletionThroughTheLog() throws {
        let log = EventLog(clock: ManualClock())
        let seen = Locked<[String]>([])
        _ = log.observe { e in seen.withLock { $0.append("\(e.kind)/\(e.name)/\(e.type)") } }
        let queue = VisitorQueue(name: "q", config: QueueConfig(capacity: 1), clock: ManualClock(), events: log)
        let first = try queue.withIsolation { q throws(QueueError) in try q.enqueue(VisitorRequest()).view }
        _ = try queue.withIsolation { q throws(QueueError) in try q.enqueue(VisitorRequest()) }
        _ = try queue.withIsolation { q throws(QueueError) in try q.complete(id: first.id) }
        #expect(
            seen.withLock { $0 } == ["queue/q/granted", "queue/q/enqueued", "queue/q/completed", "queue/q/granted"])
    }
}

extension EventLog.Read {
    fileprivate var isWait: Bool { if case .wait = self { true } else { false } }
    fileprivate var isBroken: Bool { if case .broken = self { true } else { false } }
}
