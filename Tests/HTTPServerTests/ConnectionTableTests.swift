import Testing

@testable import HTTPServer
@testable import Locking

/// The table's decisions with a hand-driven clock and a recorded `close`.
@Suite struct ConnectionTableTests {
    private final class Box<Value: Sendable>: Sendable {
        let value: Locked<Value>
        init(_ value: Value) { self.value = Locked(value) }
    }

    private struct Fixture {
        let time = Box(0.0)
        let closedSockets = Box<[Int32]>([])
        let table: ConnectionTable

        init(_ limits: ConnectionTable.Limits) {
            let time = self.time
            let closed = self.closedSockets
            table = ConnectionTable(
                limits: limits, now: { time.value.withLock { $0 } },
                close: { s in closed.value.withLock { $0.append(s) } })
        }

        let entries = Box<[UInt: ConnectionTable.Entry]>([:])

        func advance(_ seconds: Double) { time.value.withLock { $0 += seconds } }

        func open(_ key: UInt, address: ConnectionTable.Address?) {
            let entry = table.opened(key, socket: Int32(key), address: address)
            entries.value.withLock { $0[key] = entry }
        }

        func move(_ key: UInt, to phase: ConnectionTable.Phase) {
            guard let entry = entries.value.withLock({ $0[key] }) else { return }
            table.moved(entry, to: phase)
        }
        var closed: [Int32] { closedSockets.value.withLock { $0 } }
    }

    private let home = ConnectionTable.Address(high: 0, low: 1)
    private let other = ConnectionTable.Address(high: 0, low: 2)

    /// Times whose milliseconds do not survive a round trip through a
    /// `Double` when truncated (16706.171 × 1000 is 16706170.999…): the table
    /// still closes such a connection, to make room and when it stalls.
    @Test func everyMillisecondOfTheClockCanBeClosed() {
        let f = Fixture(ConnectionTable.Limits(maxConnections: 1, headTimeout: 1))
        var missed: [Double] = []
        for millis in 16_706_000..<16_706_500 {
            let start = Double(millis) / 1000
            f.time.value.withLock { $0 = start }
            f.open(1, address: nil)
            f.move(1, to: .head)
            if !f.table.admit(nil) { missed.append(start) }
            f.table.closed(1)
        }
        #expect(missed.isEmpty, "first misses: \(missed.prefix(3))")
        f.time.value.withLock { $0 = 16706.171 }
        f.open(2, address: nil)
        f.move(2, to: .head)
        f.advance(1.5)
        f.table.reap()
        #expect(f.closed.last == 2)
    }

    @Test func aFullTableClosesTheLongestIdleConnectionToAdmitANewOne() {
        let f = Fixture(.init(maxConnections: 3))
        for i in 1...3 {
            #expect(f.table.admit(home))
            f.open(UInt(i), address: home)
            f.advance(1)
        }
        for i in 1...3 { f.move(UInt(i), to: .busy) }
        f.move(2, to: .idle)
        f.advance(1)
        f.move(3, to: .idle)
        #expect(f.table.admit(home))
        #expect(f.closed == [2])
        // The one closing does not count; the next admission takes the other idle one.
        f.open(4, address: home)
        #expect(f.table.admit(home))
        #expect(f.closed == [2, 3])
    }

    @Test func idleGoesBeforeAWaitingHeadBeforeAHeadInProgress() {
        let f = Fixture(.init(maxConnections: 3))
        f.open(1, address: home)
        f.open(2, address: home)
        f.move(2, to: .head)
        f.open(3, address: home)
        f.move(3, to: .busy)
        f.move(3, to: .idle)
        for next in 4...6 {
            #expect(f.table.admit(nil))
            f.open(UInt(next), address: nil)
            f.move(UInt(next), to: .busy)
        }
        #expect(f.closed == [3, 1, 2])
    }

    @Test func connectionsWithRequestsInProgressAreNeverClosedToMakeRoom() {
        let f = Fixture(.init(maxConnections: 2))
        f.open(1, address: home)
        f.move(1, to: .busy)
        f.open(2, address: home)
        f.move(2, to: .body)
        #expect(!f.table.admit(home))
        #expect(f.closed.isEmpty)
    }

    @Test func stalledHeadsBodiesAndIdleConnectionsAreReaped() {
        let f = Fixture(.init(maxConnections: 10, headTimeout: 10, bodyTimeout: 30, idleTimeout: 90))
        f.open(1, address: home)  // never sends a head
        f.open(2, address: home)
        f.advance(5)
        f.move(2, to: .head)  // a fresh connection's head keeps the clock from accept
        f.open(3, address: home)
        f.move(3, to: .body)
        f.open(4, address: home)
        f.move(4, to: .busy)  // parked: never reaped
        f.open(5, address: home)
        f.move(5, to: .idle)
        f.advance(5.5)
        f.table.reap()
        #expect(Set(f.closed) == [1, 2])
        f.advance(25)
        f.table.reap()
        #expect(Set(f.closed) == [1, 2, 3])
        f.advance(60)
        f.table.reap()
        #expect(Set(f.closed) == [1, 2, 3, 5])
        #expect(f.table.count(.busy) == 1)
        // A kept-alive connection's head is timed from its request line.
        f.move(4, to: .idle)
        f.advance(80)
        f.move(4, to: .head)
        f.advance(9)
        f.table.reap()
        #expect(!f.closed.contains(4))
    }

    @Test func thePerAddressLimitCountsOpenConnections() {
        let f = Fixture(.init(maxConnections: 100, perAddress: 2))
        f.open(1, address: home)
        f.open(2, address: home)
        #expect(!f.table.admit(home))
        #expect(f.table.admit(other))
        #expect(f.table.admit(nil))
        f.table.closed(1)
        #expect(f.table.admit(home))
    }
}
