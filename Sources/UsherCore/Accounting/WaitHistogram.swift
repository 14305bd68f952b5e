/// A fixed-bucket histogram of waits (enqueue → grant, push → first
/// delivery), kept inside an engine and read at scrape time.
///
/// Observing is an index search over a dozen bounds and two additions; the
/// bucket storage is allocated once, with the engine.
package struct WaitHistogram: Sendable, Equatable {
    /// Bucket upper bounds in seconds.
    package static let bounds: [Double] = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800, 3600]
    private static let boundMicros: [Int64] = bounds.map { Int64($0 * 1_000_000) }

    /// Per-bucket (not cumulative) counts; the last is above every bound.
    package private(set) var buckets = [Int](repeating: 0, count: WaitHistogram.bounds.count + 1)
    /// The sum of every observed wait, in µs.
    package private(set) var sumMicros: Int64 = 0
    /// How many waits were observed.
    package private(set) var count = 0

    package init() {}

    /// Records one wait of `micros` µs (negative counts as 0).
    mutating func observe(micros: Int64) {
        let m = max(0, micros)
        var i = 0
        while i < Self.boundMicros.count, m > Self.boundMicros[i] { i += 1 }
        buckets[i] += 1
        sumMicros += m
        count += 1
    }
}
