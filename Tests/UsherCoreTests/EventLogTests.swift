import Testing

@testable import Locking
@testable import UsherCore

@Suite struct EventLogTests {
    private func draft(_ n: Int) -> ResourceEvent.Draft {
        ResourceEvent.Draft(kind: "queue", name: "q", type: "granted", subject: .summary(.object([("n", .int(n))])))
    }

    @Test func recordsNothingUntilSomeoneSubscribes() {
        let log = EventLog(capacity: 4, clock: ManualClock())
        #expect(!log.isRecording)
        log.emit(draft(1))
        #expect(log.buffered().isEmpty)
        #expect(log.nextID == 1)
        let sub = log.subscribe(after: nil) { _ in }
        #expect(log.isRecording)
        log.unsubscribe(sub.token)
        log.emit(draft(2))
        // Still recorded after the last subscriber left, for a client that reconnects.
        #expect(log.buffered().map(\.id) == [1])
    }

    @Test func handsEventsToSubscribersInIDOrder() {
        let log = EventLog(capacity: 100, clock: ManualClock())
        let seen = Locked<[UInt64]>([])
        let sub = log.subscribe(after: nil) { e in seen.withLock { $0.append(e.id) } }
        #expect(sub.replay.isEmpty && !sub.gap)
        for n in 0..<5 { log.emit(draft(n)) }
        #expect(seen.withLock { $0 } == [1, 2, 3, 4, 5])
        log.unsubscribe(sub.token)
        log.emit(draft(6))
        #expect(seen.withLock { $0 } == [1, 2, 3, 4, 5])
        #expect(log.subscriberCount == 0)
    }

    @Test func ringKeepsTheNewestCapacityEvents() {
        let log = EventLog(capacity: 3, clock: ManualClock())
        _ = log.subscribe(after: nil) { _ in }
        for n in 0..<7 { log.emit(draft(n)) }
        #expect(log.buffered().map(\.id) == [5, 6, 7])
        #expect(log.buffered().map { $0.subject.payload?["n"] } == [.int(4), .int(5), .int(6)])
    }

    @Test func replaysAfterALastEventIDWithoutGapOrOverlap() {
        let log = EventLog(capacity: 5, clock: ManualClock())
        _ = log.subscribe(after: nil) { _ in }
        for n in 0..<4 { log.emit(draft(n)) }
        let resumed = log.subscribe(after: 2) { _ in }
        #expect(resumed.replay.map(\.id) == [3, 4])
        #expect(!resumed.gap)
        let upToDate = log.subscribe(after: 4) { _ in }
        #expect(upToDate.replay.isEmpty && !upToDate.gap)
    }

    @Test func reportsAGapWhenTheIDIsOlderThanTheRing() {
        let log = EventLog(capacity: 3, clock: ManualClock())
        _ = log.subscribe(after: nil) { _ in }
        for n in 0..<6 { log.emit(draft(n)) }  // ids 1...6, ring holds 4...6
        let justInTime = log.subscribe(after: 3) { _ in }
        #expect(justInTime.replay.map(\.id) == [4, 5, 6] && !justInTime.gap)
        let tooOld = log.subscribe(after: 1) { _ in }
        #expect(tooOld.gap)
        #expect(tooOld.replay.map(\.id) == [4, 5, 6])
        // An id from the future (a restarted server): a gap, and everything buffered.
        let future = log.subscribe(after: 99) { _ in }
        #expect(future.gap)
        #expect(future.replay.map(\.id) == [4, 5, 6])
    }

    @Test func eventCarriesEveryField() {
        let clock = ManualClock()
        let log = EventLog(capacity: 2, clock: clock)
        _ = log.subscribe(after: nil) { _ in }
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
        _ = log.subscribe(after: nil) { e in seen.withLock { $0.append("\(e.kind)/\(e.name)/\(e.type)") } }
        let queue = VisitorQueue(name: "q", config: QueueConfig(capacity: 1), clock: ManualClock(), events: log)
        let first = try queue.withIsolation { q throws(QueueError) in try q.enqueue(VisitorRequest()).view }
        _ = try queue.withIsolation { q throws(QueueError) in try q.enqueue(VisitorRequest()) }
        _ = try queue.withIsolation { q throws(QueueError) in try q.complete(id: first.id) }
        #expect(
            seen.withLock { $0 } == ["queue/q/granted", "queue/q/enqueued", "queue/q/completed", "queue/q/granted"])
    }
}
