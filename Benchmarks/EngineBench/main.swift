// In-process benchmark of the queue engine (no HTTP, no actor):
//
//   swift run -c release usher-engine-bench [--count N] [--keyless]
//
// One queue with capacity 1, so every visitor but the first waits:
//   1. N enqueues (each with its own key, unless --keyless);
//   2. N position lookups of random visitors;
//   3. N/2 removals of random waiting visitors (from anywhere in the line);
//   4. completes until the line is empty (each one grants the next).
// Prints ns/op and ops/s per phase, peak RSS (VmHWM) and the RSS growth per
// waiting visitor after phase 1.

import Foundation
import UsherCore

struct Options {
    var count = 1_000_000
    var keyed = true

    init(_ args: [String]) {
        var i = 1
        while i < args.count {
            switch args[i] {
            case "--count" where i + 1 < args.count:
                count = max(1, Int(args[i + 1]) ?? count)
                i += 1
            case "--keyless":
                keyed = false
            default:
                print("usage: usher-engine-bench [--count N] [--keyless]")
                exit(2)
            }
            i += 1
        }
    }
}

/// SplitMix64, so runs are repeatable.
struct Generator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// `VmRSS` and `VmHWM` from /proc/self/status, in bytes (0 where unavailable).
func memory() -> (rss: Int, peak: Int) {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return (0, 0) }
    func field(_ name: String) -> Int {
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return 0 }
        return (Int(line.split(separator: " ").dropFirst().first { !$0.isEmpty } ?? "") ?? 0) * 1024
    }
    return (field("VmRSS"), field("VmHWM"))
}

func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

func mib(_ bytes: Int) -> String { String(format: "%.1f MiB", Double(bytes) / 1_048_576) }

/// Runs `body`, then prints its ops count, ns/op and ops/s.
func phase(_ name: String, ops: Int, _ body: () throws -> Void) rethrows {
    let start = monotonicNanos()
    try body()
    let elapsed = Double(monotonicNanos() - start)
    let perOp = elapsed / Double(max(ops, 1))
    print(
        String(
            format: "%-34@ %9d ops  %8.0f ns/op  %10.0f ops/s  (%.2f s)",
            name as NSString, ops, perOp, 1e9 / perOp, elapsed / 1e9))
}

/// The server ids the engine hands out: `v` + base 36, from 1.
func serverID(_ i: Int) -> String { "v" + String(i + 1, radix: 36) }

let options = Options(CommandLine.arguments)
let n = options.count
let t0 = Timestamp(micros: 1_767_225_600_000_000)
var engine = QueueEngine(
    name: "bench",
    config: QueueConfig(capacity: 1, maxWaiting: 10_000_000, holdSeconds: 0, history: 1000),
    createdAt: t0)
var rng = Generator(state: 42)

print("usher-engine-bench: \(n) visitors, capacity 1, \(options.keyed ? "a distinct key each" : "no keys")")
let before = memory()

try phase("enqueue", ops: n) {
    for i in 0..<n {
        let r = VisitorRequest(key: options.keyed ? "key-\(i)" : nil, action: options.keyed ? "run" : nil)
        _ = try engine.enqueue(r, now: Timestamp(micros: t0.micros + Int64(i)))
    }
}
let filled = memory()
let counts = engine.counts
precondition(counts.waiting == n - 1 && counts.holding == 1)

let now = Timestamp(micros: t0.micros + Int64(n))
var checksum = 0
try phase("position (random visitor)", ops: n) {
    for _ in 0..<n {
        let v = try engine.visitor(id: serverID(Int.random(in: 0..<n, using: &rng)), now: now)
        checksum &+= v.position ?? 0
    }
}

var order = Array(1..<n)
order.shuffle(using: &rng)
let removals = n / 2
try phase("remove (random waiting visitor)", ops: removals) {
    for i in order.prefix(removals) {
        _ = try engine.remove(id: serverID(i), now: now)
    }
}

var holder = serverID(0)
var completes = 0
try phase("complete (grants the next)", ops: n - removals) {
    while true {
        _ = try engine.complete(id: holder, now: now)
        completes += 1
        guard let next = engine.state(limit: 1, now: now).holding.first else { break }
        holder = next.id
    }
}
precondition(engine.counts.waiting == 0 && engine.counts.holding == 0 && completes == n - removals)

let end = memory()
print("")
print("RSS before: \(mib(before.rss)); after enqueues: \(mib(filled.rss)); at the end: \(mib(end.rss))")
print("peak RSS (VmHWM): \(mib(end.peak))")
print(
    String(
        format: "RSS growth per waiting visitor: %.0f bytes",
        Double(filled.rss - before.rss) / Double(n - 1)))
print("(checksum \(checksum))")
