/// Server-made ids, one scheme for every kind (visitors, window items, leases,
/// pipeline items, machine transactions): the time of making in µs since the
/// Unix epoch, or one more than the last id when the clock has not moved on
/// (`max(last + 1, now)`), written as 16 decimal digits (zero-padded).
///
/// Seeded with the resource's creation time, so a resource never hands out an
/// id twice, also when deleted and created again under the same name (the
/// clock has moved on). Ids sort in the order they were made, as strings and
/// as numbers; they are valid names and URL path segments as they are. Redis
/// can make the same from `TIME`.
struct IDGenerator: Sendable {
    /// The length of every id (16 digits last until the year 2286).
    static let length = 16

    /// The last id handed out, in µs (the creation time before the first).
    private(set) var last: Int64

    /// A generator for a resource created at `createdAt`: every id is later.
    init(createdAt: Timestamp) {
        last = createdAt.micros
    }

    /// The next id: `max(last + 1, now)`.
    package mutating func next(now: Timestamp) -> String {
        last = max(last &+ 1, now.micros)
        return Self.format(last)
    }

    /// `micros` as at least 16 decimal digits, written in place (no
    /// intermediate strings); negative values count as 0.
    static func format(_ micros: Int64) -> String {
        let value = UInt64(max(0, micros))
        var digits = 1
        var rest = value / 10
        while rest > 0 {
            rest /= 10
            digits += 1
        }
        let count = max(length, digits)
        return String(unsafeUninitializedCapacity: count) { buffer in
            var v = value
            for i in stride(from: count - 1, through: 0, by: -1) {
                buffer[i] = 0x30 + UInt8(truncatingIfNeeded: v % 10)
                v /= 10
            }
            return count
        }
    }
}
