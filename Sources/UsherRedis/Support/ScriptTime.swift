import UsherCore

/// Where a script takes its `now` from: Redis `TIME` (every instance agrees
/// on deadlines), or a clock of the caller's (tests with an injected clock).
package enum ScriptTime: Sendable {
    case server
    case clock(any UsherClock)

    /// `ARGV[2]`: empty for `TIME`, else the clock's now in µs.
    var argument: String {
        switch self {
        case .server: ""
        case .clock(let clock): String(clock.now().micros)
        }
    }
}
