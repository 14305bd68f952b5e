import Synchronization

/// The server-wide budget for what clients store (`max_stored_bytes`):
/// visitors, items, leases, elements, dead items, machine history and
/// buffered events all draw from it, each priced by `StorageBudget.cost`.
///
/// One instance is injected into every manager, as the clock and the event
/// log are. A lock-free counter: a charge is one compare-and-swap.
package final class StorageBudget: Sendable {
    /// The bytes one stored record costs besides its strings and payload
    /// (the slab entry, index entries and tree node it needs).
    static let recordOverhead = 192
    /// The bytes one JSON value costs besides its strings (its enum cell and
    /// container slot).
    static let valueOverhead = 16

    /// The most that may be stored, in bytes.
    package let limit: Int
    private let used = Atomic<Int>(0)

    /// A budget of `limit` bytes (default: no limit, for tests and tools).
    package init(limit: Int = .max) {
        self.limit = limit
    }

    /// The bytes charged now.
    package var usedBytes: Int { used.load(ordering: .relaxed) }

    /// Takes `bytes`, or throws `StorageFull` and takes nothing.
    package func reserve(_ bytes: Int) throws(StorageFull) {
        var current = used.load(ordering: .relaxed)
        while true {
            guard bytes <= limit - current else { throw StorageFull(used: current, limit: limit, requested: bytes) }
            let (done, seen) = used.compareExchange(expected: current, desired: current + bytes, ordering: .relaxed)
            if done { return }
            current = seen
        }
    }

    /// Takes `bytes` even beyond the limit: for what an operation that has
    /// already been admitted must store (a lease recording its element).
    func charge(_ bytes: Int) {
        used.wrappingAdd(bytes, ordering: .relaxed)
    }

    /// Gives `bytes` back.
    package func release(_ bytes: Int) {
        used.wrappingSubtract(bytes, ordering: .relaxed)
    }

    /// What a record with these strings and this payload costs: the fixed
    /// overhead, the strings' UTF-8 bytes and the payload's `size(of:)`.
    static func cost(_ a: String?, _ b: String? = nil, _ c: String? = nil, payload: JSONValue? = nil) -> Int {
        recordOverhead + (a?.utf8.count ?? 0) + (b?.utf8.count ?? 0) + (c?.utf8.count ?? 0) + size(of: payload)
    }

    /// A JSON value's stored size: its strings' and keys' UTF-8 bytes plus
    /// `valueOverhead` per value and per key. Iterative, so a deep value
    /// cannot exhaust the stack.
    package static func size(of value: JSONValue?) -> Int {
        guard let value else { return 0 }
        // Scalars without the walk's allocation (most payloads).
        switch value {
        case .null, .bool, .int, .double: return valueOverhead
        case .string(let s): return valueOverhead + s.utf8.count
        case .array, .object: break
        }
        var total = 0
        var pending = [value]
        while let v = pending.popLast() {
            total += valueOverhead
            switch v {
            case .null, .bool, .int, .double: break
            case .string(let s): total += s.utf8.count
            case .array(let items): pending.append(contentsOf: items)
            case .object(let members):
                for (k, m) in members {
                    total += valueOverhead + k.utf8.count
                    pending.append(m)
                }
            }
        }
        return total
    }
}

/// 507 `storage_full`: storing `requested` more bytes would pass the limit.
package struct StorageFull: Error, Sendable, Equatable, CustomStringConvertible {
    /// The bytes stored when the write was refused.
    package var used: Int
    /// `max_stored_bytes`.
    package var limit: Int
    /// What the write needed.
    package var requested: Int

    init(used: Int, limit: Int, requested: Int) {
        self.used = used
        self.limit = limit
        self.requested = requested
    }

    package var description: String {
        "storing \(requested) more bytes would pass max_stored_bytes (\(used) of \(limit) used)"
    }
}

/// One owner's share of a `StorageBudget`: what it has charged, so that
/// deleting the owner gives all of it back at once.
package struct StorageAccount: Sendable {
    /// The shared budget.
    let budget: StorageBudget
    /// The bytes this owner holds now.
    private(set) var bytes = 0

    init(_ budget: StorageBudget) {
        self.budget = budget
    }

    /// Takes `n` bytes or throws, taking nothing.
    mutating func reserve(_ n: Int) throws(StorageFull) {
        try budget.reserve(n)
        bytes += n
    }

    /// Takes `n` bytes even beyond the limit.
    mutating func charge(_ n: Int) {
        budget.charge(n)
        bytes += n
    }

    /// Gives `n` bytes back.
    mutating func release(_ n: Int) {
        budget.release(n)
        bytes -= n
    }

    /// Gives back everything this owner holds (it was deleted).
    mutating func releaseAll() {
        budget.release(bytes)
        bytes = 0
    }
}
