@testable import HTTPServer
import Testing
import Locking

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
            let time = self.time, closed = self.closedSockets
            table = ConnectionTable(
                limits: limits, now: { time.value.withLock { $0 } },
                close: { s in closed.value.withLock { $0.append(s) } })
        }

        func advance(_ seconds: Double) { time.value.withLock { $0 += seconds } }
        var closed: [Int32] { closedSockets.value.withLock { $0 } }
    }

    private let home = ConnectionTable.Address(high: 0, low: 1)
    private let other = ConnectionTable.Address(high: 0, low: 2)

    @Test func aFullTableClosesTheLongestIdleConnectionToAdmitANewOne() {
        let f = Fixture(.init(maxConnections: 3))
        for i in 1...3 {
            #expect(f.table.admit(home))
            f.table.opened(UInt(i), socket: Int32(i), address: home)
            f.advance(1)
        }
        for i in 1...3 { f.table.moved(UInt(i), to: .busy) }
        f.table.moved(2, to: .idle)
        f.advance(1)
        f.table.moved(3, to: .idle)
        #expect(f.table.admit(home))
        #expect(f.closed == [2])
        // The one closing does not count; the next admission takes the other idle one.
        f.table.opened(4, socket: 4, address: home)
        #expect(f.table.admit(home))
        #expect(f.closed == [2, 3])
    }

    @Test func idleGoesBeforeAWaitingHeadBeforeAHeadInProgress() {
        let f = Fixture(.init(maxConnections: 3))
        f.table.opened(1, socket: 1, address: home)
        f.table.opened(2, socket: 2, address: home)
        f.table.moved(2, to: .head)
        f.table.opened(3, socket: 3, address: home)
        f.table.moved(3, to: .busy)
        f.table.moved(3, to: .idle)
        for next in 4...6 {
            #expect(f.table.admit(nil))
            f.table.opened(UInt(next), socket: Int32(next), address: nil)
            f.table.moved(UInt(next), to: .busy)
        }
        #expect(f.closed == [3, 1, 2])
    }

    @Test func connectionsWithRequestsInProgressAreNeverClosedToMakeRoom() {
        let f = Fixture(.init(maxConnections: 2))
        f.table.opened(1, socket: 1, address: home)
        f.table.moved(1, to: .busy)
        f.table.opened(2, socket: 2, address: home)
        f.table.moved(2, to: .body)
        #expect(!f.table.admit(home))
        #expect(f.closed.isEmpty)
    }

    @Test func stalledHeadsBodiesAndIdleConnectionsAreReaped() {
        let f = Fixture(.init(maxConnections: 10, headTimeout: 10, bodyTimeout: 30, idleTimeout: 90))
        f.table.opened(1, socket: 1, address: home)  // never sends a head
        f.table.opened(2, socket: 2, address: home)
        f.advance(5)
        f.table.moved(2, to: .head)  // a fresh connection's head keeps the clock from accept
        f.table.opened(3, socket: 3, address: home)
        f.table.moved(3, to: .body)
        f.table.opened(4, socket: 4, address: home)
        f.table.moved(4, to: .busy)  // parked: never reaped
        f.table.opened(5, socket: 5, address: home)
        f.table.moved(5, to: .idle)
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
        f.table.moved(4, to: .idle)
        f.advance(80)
        f.table.moved(4, to: .head)
        f.advance(9)
        f.table.reap()
        #expect(!f.closed.contains(4))
    }

    @Test func thePerAddressLimitCountsOpenConnections() {
        let f = Fixture(.init(maxConnections: 100, perAddress: 2))
        f.table.opened(1, socket: 1, address: home)
        f.table.opened(2, socket: 2, address: home)
        #expect(!f.table.admit(home))
        #expect(f.table.admit(other))
        #expect(f.table.admit(nil))
        f.table.closed(1)
        #expect(f.table.admit(home))
    }
}
