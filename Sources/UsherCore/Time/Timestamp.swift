import Foundation

/// A point in time: microseconds since the Unix epoch (UTC).
///
/// All of Usher's timing is in this unit: deadlines, fences (which start at a
/// resource's creation time in microseconds) and the times shown in responses.
package struct Timestamp: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Microseconds since 1970-01-01T00:00:00Z.
    package var micros: Int64

    /// Creates a timestamp from microseconds since the epoch.
    package init(micros: Int64) { self.micros = micros }

    /// Creates a timestamp from seconds since the epoch.
    package init(seconds: Double) { self.micros = Int64((seconds * 1_000_000).rounded()) }

    /// Seconds since the epoch.
    package var seconds: Double { Double(micros) / 1_000_000 }

    /// This time moved by a number of seconds (may be negative).
    package func adding(seconds: Double) -> Timestamp {
        Timestamp(micros: micros &+ Timestamp.micros(fromSeconds: seconds))
    }

    /// Seconds from `self` to `later` (negative when `later` is earlier).
    package func seconds(until later: Timestamp) -> Double {
        Double(later.micros - micros) / 1_000_000
    }

    /// Converts a duration in seconds to whole microseconds (rounded).
    package static func micros(fromSeconds seconds: Double) -> Int64 {
        Int64((seconds * 1_000_000).rounded())
    }

    package static func < (lhs: Timestamp, rhs: Timestamp) -> Bool { lhs.micros < rhs.micros }

    /// RFC 3339 UTC with milliseconds, e.g. `2026-11-30T03:24:02.123Z`.
    package var rfc3339: String {
        String(unsafeUninitializedCapacity: 24) { buffer in
            writeRFC3339(into: UnsafeMutableRawBufferPointer(buffer))
            return 24
        }
    }

    /// Appends `rfc3339` to `out` without making a `String`.
    func writeRFC3339(to out: inout [UInt8]) {
        withUnsafeTemporaryAllocation(byteCount: 24, alignment: 1) { buffer in
            writeRFC3339(into: buffer)
            out.append(contentsOf: buffer)
        }
    }

    /// Writes the 24 bytes of `rfc3339` at the start of `buffer`.
    /// Whole seconds since the epoch (rounded down) and the milliseconds past
    /// them, as `rfc3339` shows them.
    var secondAndMillis: (second: Int64, millis: Int) {
        let totalMillis = micros >= 0 ? micros / 1000 : (micros - 999) / 1000
        let secs = totalMillis >= 0 ? totalMillis / 1000 : (totalMillis - 999) / 1000
        return (secs, Int(totalMillis - secs * 1000))
    }

    func writeRFC3339(into buffer: UnsafeMutableRawBufferPointer) {
        let (secs, millis) = secondAndMillis
        let days = secs >= 0 ? secs / 86_400 : (secs - 86_399) / 86_400
        let secOfDay = Int(secs - days * 86_400)
        let (y, m, d) = Timestamp.civil(fromDays: days)
        // Written digit by digit: this runs several times per response, and
        // String(format:) costs microseconds each time.
        Self.put(y, 4, at: 0, in: buffer)
        buffer[4] = 0x2D
        Self.put(m, 2, at: 5, in: buffer)
        buffer[7] = 0x2D
        Self.put(d, 2, at: 8, in: buffer)
        buffer[10] = 0x54
        Self.put(secOfDay / 3600, 2, at: 11, in: buffer)
        buffer[13] = 0x3A
        Self.put((secOfDay / 60) % 60, 2, at: 14, in: buffer)
        buffer[16] = 0x3A
        Self.put(secOfDay % 60, 2, at: 17, in: buffer)
        buffer[19] = 0x2E
        Self.put(millis, 3, at: 20, in: buffer)
        buffer[23] = 0x5A
    }

    package var description: String { rfc3339 }

    /// Writes `value` as `width` decimal digits at `offset` (a plain function:
    /// a nested one capturing the buffer would allocate a closure per call).
    private static func put(_ value: Int, _ width: Int, at offset: Int, in buffer: UnsafeMutableRawBufferPointer) {
        var v = value
        var i = offset + width - 1
        while i >= offset {
            buffer[i] = UInt8(truncatingIfNeeded: 0x30 + v % 10)
            v /= 10
            i -= 1
        }
    }

    /// Days since the epoch to a proleptic Gregorian date (H. Hinnant's algorithm).
    private static func civil(fromDays z0: Int64) -> (Int, Int, Int) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (Int(m <= 2 ? y + 1 : y), Int(m), Int(d))
    }
}
