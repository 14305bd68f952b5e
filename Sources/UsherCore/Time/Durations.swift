/// The allowed range of every duration that can repeat: holds, leases,
/// display times, ack limits, delays and machine timeouts. 0 keeps meaning
/// "none" where a field allows it; anything else is at least
/// `minimumSeconds`, so that a cycle of tiny timeouts cannot spin a core.
package enum Durations {
    /// The shortest duration other than 0: 10 ms.
    package static let minimumSeconds = 0.01
    /// The longest: one year.
    package static let maximumSeconds = 31_536_000.0

    /// True for 0 (when `zero` allows it) or a finite duration within
    /// `minimumSeconds...maximumSeconds`.
    package static func isAllowed(_ seconds: Double, zero: Bool = true) -> Bool {
        if seconds == 0 { return zero }
        return seconds.isFinite && seconds >= minimumSeconds && seconds <= maximumSeconds
    }

    /// Seconds as a message shows them: `30`, not `30.0`.
    static func text(_ seconds: Double) -> String {
        seconds.rounded() == seconds && abs(seconds) < 9e15 ? String(Int(seconds)) : String(seconds)
    }

    /// The range in words, for error messages.
    package static func range(zero: Bool = true) -> String {
        zero ? "must be 0 or between 0.01 and 31536000" : "must be between 0.01 and 31536000"
    }
}

extension FieldReader {
    /// A duration in seconds: 0 or `Durations.minimumSeconds` to
    /// `Durations.maximumSeconds` (see `Durations`).
    package mutating func duration(_ key: String) throws(FieldError) -> Double? {
        guard let seconds = try number(key, in: -Double.greatestFiniteMagnitude...Double.greatestFiniteMagnitude) else {
            return nil
        }
        guard Durations.isAllowed(seconds) else { throw FieldError(field: fieldPath(key), message: Durations.range()) }
        return seconds
    }
}
