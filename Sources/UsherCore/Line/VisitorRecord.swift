/// One visitor as the engine stores it: a slab entry addressed by an `Int32`
/// handle, with the intrusive links that put it in the engine's lists, so a
/// waiting visitor costs one struct, one tree node and its index entries.
/// (`merged_into`/`cancelled_with` live in the engine's `related` table: only
/// finished visitors have one.)
struct VisitorRecord: Sendable {
    /// Marks an absent time or fence.
    static let noTime = Int64.min
    /// The absent handle.
    static let none: Int32 = -1

    // Field order packs the small fields into the payload's padding (184 bytes).
    var id: String
    var key: String?
    var action: String?
    var payload: JSONValue?
    var status: VisitorStatus
    var reason: FinishReason?
    /// A later request named this id again (a retry): which request's answer
    /// reached the client is unknown, so no `undoGrant` takes its grant back.
    var retried = false
    var priority: Int32 = 0
    var enqueuedAt: Int64
    var grantedAt: Int64 = noTime
    /// Delayed: when the delay ends. Waiting: when it entered the line (the
    /// same instant, for a visitor that was delayed). Granted and after: when
    /// the hold expires (`expires_at`), or `noTime` for no limit.
    var deadline: Int64 = noTime
    var finishedAt: Int64 = noTime
    /// From the grant on: the grant's fence. While delayed: its delay's order
    /// (below every fence, never shown). With `deadline`, it names the
    /// visitor's current timeline entry, so no stale entry of an earlier
    /// visitor in this slot, or of an earlier deadline, matches it.
    var fence: Int64 = noTime
    /// The hold the visitor asked for, in µs; -1 when it asked for none.
    var hold: Int64 = -1
    /// Until when its client counts as heard of: the last call naming it, or
    /// the end of a wait parked on it (idle_seconds count from here).
    var heard: Int64
    /// Waiting: when its idle check is due; granted: its claim deadline
    /// (`noTime` once claimed). With `watchOrder`, names its timeline entry.
    var watch: Int64 = noTime
    /// Unique to this record: its watch entries' order in the timeline.
    var watchOrder: Int64 = noTime
    /// Waiting visitors with the same key, in arrival order.
    var keyPrev: Int32 = none
    var keyNext: Int32 = none
    /// Waiting visitors with the same key and action, in arrival order.
    var pairPrev: Int32 = none
    var pairNext: Int32 = none
    /// While waiting: all waiting visitors in arrival order. While granted:
    /// the holders in grant order (a visitor is never in both lists).
    var linePrev: Int32 = none
    var lineNext: Int32 = none

    init(id: String, enqueuedAt: Int64, status: VisitorStatus) {
        self.id = id
        self.enqueuedAt = enqueuedAt
        self.heard = enqueuedAt
        self.status = status
    }

    /// What an evicted slot holds until it is reused: nothing that owns memory.
    static let vacant = VisitorRecord(id: "", enqueuedAt: noTime, status: .completed)
}

/// Why a visitor finished as it did (`reason` in its JSON), where the
/// status alone does not say.
enum FinishReason: String, Sendable {
    /// Cancelled: it and a waiting visitor with the opposite action cancelled each other.
    case opposite
    /// Cancelled or released: the client removed it (`DELETE`).
    case client
    /// Cancelled: the client hung up while its request waited for the grant.
    case disconnected
    /// Cancelled: its request's wait ended first (`on_timeout=cancel`, a try-acquire).
    case timeout
    /// Released (a pool: recycled): the answer that granted it never reached its client.
    case undelivered
    /// Cancelled: waiting, its client was not heard of for `idle_seconds`.
    case abandoned
    /// Released (a pool: recycled): granted while no client was parked on
    /// it, and not claimed within `claim_seconds`.
    case unclaimed
    /// Merged with `dedup_keep: "latest"`: a newer duplicate took its place in line.
    case replaced
    /// Released (a pool: revoked; a window: dismissed): its resource was deleted.
    case deleted
}

/// A key with an action: the index for duplicates in `key` mode.
struct KeyAction: Hashable, Sendable {
    var key: String
    var action: String?
}

/// A first-in first-out list of handles (finished visitors, oldest first).
struct HandleFIFO: Sendable {
    private var items: [Int32] = []
    private var head = 0

    var count: Int { items.count - head }

    /// The oldest handle, if any.
    var first: Int32? { head < items.count ? items[head] : nil }

    mutating func append(_ h: Int32) { items.append(h) }

    mutating func popFirst() -> Int32? {
        guard head < items.count else { return nil }
        let h = items[head]
        head += 1
        if head >= 1024 && head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return h
    }
}

/// The last 100 finished holds (grant to finish), for wait estimates and Retry-After.
struct HoldStatistics: Sendable {
    static let window = 100
    private var ring: [Int64] = []
    private var next = 0
    private var sum: Int64 = 0

    mutating func record(_ micros: Int64) {
        let d = max(0, micros)
        if ring.count < Self.window {
            ring.append(d)
        } else {
            sum -= ring[next]
            ring[next] = d
            next = (next + 1) % Self.window
        }
        sum += d
    }

    /// Mean hold in µs, or nil before the first hold ends.
    var mean: Double? { ring.isEmpty ? nil : Double(sum) / Double(ring.count) }
}
