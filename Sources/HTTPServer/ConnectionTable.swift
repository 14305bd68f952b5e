import Dispatch
import Foundation
import Locking
import Synchronization

/// Every open connection: what it is doing and since when. It closes
/// connections that stall (a head or a body too slow, an idle one past its
/// time) and, when the table is full, makes room for a new connection by
/// closing one that has no request in progress, idle ones first and oldest
/// first, so a health probe always gets in. It also bounds connections per
/// client address.
///
/// Closing means `shutdown(2)` on the socket: libmicrohttpd sees the error
/// and closes the connection itself. A socket leaves the table in
/// libmicrohttpd's closed notification, before libmicrohttpd closes it, and
/// the table shuts sockets down only under its lock: a number is never shut
/// down after it was reused.
final class ConnectionTable: @unchecked Sendable {
    /// What a connection is doing.
    enum Phase: Equatable {
        /// Accepted; its first request's head has not arrived.
        case awaitingHead
        /// The request line arrived; the rest of the head has not.
        case head
        /// The head was accepted; the body is arriving.
        case body
        /// A request is with the handler, parked, or being answered.
        case busy
        /// Between requests (keep-alive).
        case idle
        /// Shut down by the table; libmicrohttpd has yet to close it.
        case closing
    }

    /// The limits the table applies, in seconds (0 for `perAddress`: none).
    struct Limits: Sendable {
        var maxConnections = 10_000
        var perAddress = 0
        var headTimeout = 10.0
        var bodyTimeout = 30.0
        var idleTimeout = 90.0
    }

    /// A client address (IPv4 or IPv6), for the per-address limit.
    struct Address: Hashable, Sendable {
        let high: UInt64
        let low: UInt64

        /// The address in a `sockaddr`, nil for other families.
        init?(_ address: UnsafePointer<sockaddr>) {
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                let v4 = UnsafeRawPointer(address).load(as: sockaddr_in.self)
                high = 0
                low = UInt64(v4.sin_addr.s_addr)
            case AF_INET6:
                let v6 = UnsafeRawPointer(address).load(as: sockaddr_in6.self)
                let bytes = withUnsafeBytes(of: v6.sin6_addr) { Array($0) }
                high = bytes[0..<8].reduce(0) { $0 << 8 | UInt64($1) }
                low = bytes[8..<16].reduce(0) { $0 << 8 | UInt64($1) }
            default:
                return nil
            }
        }

        init(high: UInt64, low: UInt64) {
            self.high = high
            self.low = low
        }
    }

    /// One open connection. Its phase and the time it began share one atomic
    /// word, so the request path moves it without the table's lock and the
    /// reaper never sees a new phase with an old time.
    final class Entry: Sendable {
        let socket: Int32
        let address: Address?
        /// Phase in the low 8 bits, its start in milliseconds above them.
        private let word: Atomic<UInt64>
        /// Where the current request's target starts in libmicrohttpd's read
        /// buffer (only the connection's server thread touches it).
        let target = Atomic<UInt>(0)

        fileprivate init(socket: Int32, address: Address?, phase: Phase, since: Double) {
            self.socket = socket
            self.address = address
            word = Atomic(Self.pack(phase, since))
        }

        fileprivate var state: (phase: Phase, since: Double) { Self.unpack(word.load(ordering: .relaxed)) }

        /// Moves to `phase` at `time` unless the table is closing it; a
        /// head keeps the clock of a fresh connection's wait for it.
        fileprivate func move(to phase: Phase, at time: Double) {
            var current = word.load(ordering: .relaxed)
            while true {
                let (old, since) = Self.unpack(current)
                if old == .closing { return }
                let start = phase == .head && old == .awaitingHead ? since : time
                let (exchanged, actual) = word.compareExchange(
                    expected: current, desired: Self.pack(phase, start), ordering: .relaxed)
                if exchanged { return }
                current = actual
            }
        }

        /// Marks it closing if it is still as `seen`; false when it moved meanwhile.
        fileprivate func close(ifStill seen: (phase: Phase, since: Double)) -> Bool {
            word.compareExchange(
                expected: Self.pack(seen.phase, seen.since), desired: Self.pack(.closing, seen.since),
                ordering: .relaxed
            ).exchanged
        }

        private static let phases: [Phase] = [.awaitingHead, .head, .body, .busy, .idle, .closing]

        /// Rounded, not truncated: a time read back from a word packs into the
        /// same word (16706.171 × 1000 is 16706170.999…), or a compare-and-swap
        /// against what was seen would fail and the connection never close.
        private static func pack(_ phase: Phase, _ since: Double) -> UInt64 {
            UInt64((max(0, since) * 1000).rounded()) << 8 | UInt64(phases.firstIndex(of: phase)!)
        }

        private static func unpack(_ word: UInt64) -> (Phase, Double) {
            (phases[Int(word & 0xFF)], Double(word >> 8) / 1000)
        }
    }

    private struct State {
        var entries: [UInt: Entry] = [:]
        var perAddress: [Address: Int] = [:]
    }

    let limits: Limits
    private let state = Locked(State())
    private let now: @Sendable () -> Double
    private let close: @Sendable (Int32) -> Void
    private var timer: (any DispatchSourceTimer)?

    /// A table applying `limits`; `now` and `close` are injected for tests
    /// (the server passes the monotonic clock and `shutdown(2)`).
    init(
        limits: Limits, now: @escaping @Sendable () -> Double = ConnectionTable.monotonicSeconds,
        close: @escaping @Sendable (Int32) -> Void = { _ = shutdown($0, Int32(SHUT_RDWR)) }
    ) {
        self.limits = limits
        self.now = now
        self.close = close
    }

    /// Checks the table four times a second until `stop()`.
    func startReaping() {
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "usher.http.reaper"))
        timer.schedule(deadline: .now() + 0.25, repeating: 0.25, leeway: .milliseconds(50))
        timer.setEventHandler { [weak self] in self?.reap() }
        timer.resume()
        self.timer = timer
    }

    func stop() {
        timer?.cancel()
        timer = nil
    }

    /// Whether to accept a new connection from `address`. At the limit,
    /// closes one without a request in progress to make room (the server
    /// gives libmicrohttpd some headroom over `maxConnections` for the
    /// moments until it is gone); false when none can be closed.
    func admit(_ address: Address?) -> Bool {
        state.withLock { s in
            if limits.perAddress > 0, let address, s.perAddress[address, default: 0] >= limits.perAddress {
                return false
            }
            var open = 0
            // The one to close to make room: idle before awaiting a head before
            // a head in progress, the longest in its phase first.
            var best: (entry: Entry, seen: (phase: Phase, since: Double), rank: Int)?
            for entry in s.entries.values {
                let seen = entry.state
                guard seen.phase != .closing else { continue }
                open += 1
                guard let rank = Self.evictionRank(seen.phase) else { continue }
                if best == nil || (rank, seen.since) < (best!.rank, best!.seen.since) { best = (entry, seen, rank) }
            }
            guard open >= limits.maxConnections else { return true }
            guard let best, best.entry.close(ifStill: best.seen) else { return false }
            close(best.entry.socket)
            return true
        }
    }

    private static func evictionRank(_ phase: Phase) -> Int? {
        switch phase {
        case .idle: 0
        case .awaitingHead: 1
        case .head: 2
        case .body, .busy, .closing: nil
        }
    }

    /// A connection was accepted: its entry, which the request path moves.
    @discardableResult
    func opened(_ connection: UInt, socket: Int32, address: Address?) -> Entry {
        let entry = Entry(socket: socket, address: address, phase: .awaitingHead, since: now())
        state.withLock { s in
            s.entries[connection] = entry
            if let address { s.perAddress[address, default: 0] += 1 }
        }
        return entry
    }

    /// A connection is gone (before libmicrohttpd closes its socket).
    func closed(_ connection: UInt) {
        state.withLock { s in
            guard let entry = s.entries.removeValue(forKey: connection), let address = entry.address else { return }
            let left = s.perAddress[address, default: 1] - 1
            s.perAddress[address] = left > 0 ? left : nil
        }
    }

    /// A connection moved to `phase` (no lock: one atomic word).
    func moved(_ entry: Entry, to phase: Phase) {
        entry.move(to: phase, at: now())
    }

    /// Closes every connection past its phase's time.
    func reap() {
        let time = now()
        state.withLock { s in
            for entry in s.entries.values {
                let seen = entry.state
                let limit: Double
                switch seen.phase {
                case .awaitingHead, .head: limit = limits.headTimeout
                case .body: limit = limits.bodyTimeout
                case .idle: limit = limits.idleTimeout
                case .busy, .closing: continue
                }
                guard time - seen.since > limit, entry.close(ifStill: seen) else { continue }
                close(entry.socket)
            }
        }
    }

    /// Open connections by phase (for tests and figures).
    func count(_ phase: Phase) -> Int {
        state.withLock { $0.entries.values.count { $0.state.phase == phase } }
    }

    /// Open connections.
    var count: Int { state.withLock { $0.entries.count } }

    @Sendable static func monotonicSeconds() -> Double {
        Double(DispatchTime.now().uptimeNanoseconds) / 1e9
    }
}
