// In-process benchmark of every manager (no HTTP):
//
//   swift run -c release usher-engine-bench [--count N] [--quick] [--keyless] [--only LIST]
//
// Sections (--only takes a comma-separated list of them; default: all):
//   queue-engine  the queue engine alone (a value type, no actor, no clock):
//                 N enqueues into a queue of capacity 1 (each with its own key,
//                 unless --keyless), N position lookups of random visitors,
//                 N/2 removals from anywhere in the line, completes until empty.
//   queue, window, pool, pipeline, machine
//                 the managers as the HTTP routes drive them: actors on their
//                 ResourceExecutor, each operation one synchronous
//                 `withIsolation` call (the lock the request path takes), the
//                 system clock, timers armed as configured. Payloads are
//                 {"n":1} like Benchmarks/wrk's, no keys.
//
// Every phase prints ops, ns/op and ops/s (one thread, no contention). Memory
// phases print the bytes per waiting visitor / queued item / ready item /
// element / machine, twice: the heap growth (glibc mallinfo2 `uordblks`, what
// malloc handed out) and the RSS growth (VmRSS), each divided by the count.
// The heap figure is the steadier one: RSS also moves with pages malloc keeps
// or returns from earlier phases. Peak RSS (VmHWM) is printed at the end.
//
// With several sections, each runs in a child process of its own
// (`--only SECTION`), and its memory phase comes first, so that it does not
// fill memory an earlier phase freed.
//
// N: --count (default 1,000,000); --quick sets 20,000 (a smoke run of a few
// seconds). Pools hold at most 100,000 elements, so the pool's element and
// lease phases use min(N, 100,000); machines: N/10 instances, N events.

import Foundation
import UsherCore

#if canImport(Glibc)
    import Glibc
#endif

struct Options {
    var count = 1_000_000
    var keyed = true
    var sections: Set<String> = ["queue-engine", "queue", "window", "pool", "pipeline", "machine"]
    static let allSections = ["queue-engine", "queue", "window", "pool", "pipeline", "machine"]

    init(_ args: [String]) {
        var i = 1
        while i < args.count {
            switch args[i] {
            case "--count" where i + 1 < args.count:
                count = max(10, Int(args[i + 1]) ?? count)
                i += 1
            case "--quick":
                count = 20_000
            case "--keyless":
                keyed = false
            case "--only" where i + 1 < args.count:
                sections = Set(args[i + 1].split(separator: ",").map(String.init))
                if !sections.isSubset(of: Options.allSections) {
                    print("usher-engine-bench: --only takes \(Options.allSections.joined(separator: ","))")
                    exit(2)
                }
                i += 1
            default:
                print(
                    "usage: usher-engine-bench [--count N] [--quick] [--keyless] [--only \(Options.allSections.joined(separator: ","))]"
                )
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

/// Bytes malloc has handed out and not had back, over every arena (0 where
/// unavailable): glibc's `malloc_info` totals, system "current" minus the free
/// fast and rest chunks plus mmapped chunks. (`mallinfo2` is not in Swift's
/// Glibc module, so `malloc_info` is looked up with dlsym.)
let mallocInfo: (@convention(c) (Int32, UnsafeMutablePointer<FILE>?) -> Int32)? = {
    guard let sym = dlsym(nil, "malloc_info") else { return nil }  // nil: RTLD_DEFAULT
    return unsafeBitCast(sym, to: (@convention(c) (Int32, UnsafeMutablePointer<FILE>?) -> Int32).self)
}()

func heapInUse() -> Int {
    guard let mallocInfo else { return 0 }
    var buffer: UnsafeMutablePointer<CChar>?
    var size = 0
    guard let stream = open_memstream(&buffer, &size) else { return 0 }
    _ = mallocInfo(0, stream)
    fclose(stream)
    guard let buffer else { return 0 }
    defer { free(buffer) }
    let xml = String(cString: buffer)
    /// The size of the last line (the totals follow every heap) that holds `tag`.
    func last(_ tag: String) -> Int {
        guard let line = xml.split(separator: "\n").last(where: { $0.contains(tag) }),
            let r = line.range(of: "size=\"")
        else { return 0 }
        return Int(line[r.upperBound...].prefix { $0.isNumber }) ?? 0
    }
    return last("<system type=\"current\"") - last("<total type=\"fast\"") - last("<total type=\"rest\"")
        + last("<total type=\"mmap\"")
}

func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

func mib(_ bytes: Int) -> String { String(format: "%.1f MiB", Double(bytes) / 1_048_576) }

func pad(_ s: String, _ width: Int = 46) -> String {
    s.count >= width ? s : s + String(repeating: " ", count: width - s.count)
}

/// Runs `body`, then prints its ops count, ns/op and ops/s.
func phase(_ name: String, ops: Int, _ body: () throws -> Void) rethrows {
    let start = monotonicNanos()
    try body()
    let elapsed = Double(monotonicNanos() - start)
    let perOp = elapsed / Double(max(ops, 1))
    let line =
        pad(name)
        + String(
            format: " %9d ops  %8.0f ns/op  %10.0f ops/s  (%.2f s)", ops, perOp, 1e9 / perOp, elapsed / 1e9)
        + "  RSS after: \(mib(memory().rss))"
    print(line)
}

/// Runs `body` (which adds `count` things that stay), then prints the heap and
/// RSS growth per thing.
func footprint(_ what: String, count: Int, _ body: () throws -> Void) rethrows {
    let rss0 = memory().rss
    let heap0 = heapInUse()
    try body()
    let rss1 = memory().rss
    let heap1 = heapInUse()
    let line =
        pad("bytes per " + what)
        + String(
            format: " %9d      heap %6.0f B each    RSS %6.0f B each", count, Double(heap1 - heap0) / Double(count),
            Double(rss1 - rss0) / Double(count)) + "  (RSS now \(mib(rss1)))"
    print(line)
}

func section(_ title: String) {
    print("")
    print("== \(title)")
}

/// The server ids the queue engine hands out: `prefix` + base 36, from 1.
func serverID(_ i: Int, prefix: String = "v") -> String { prefix + String(i + 1, radix: 36) }

let options = Options(CommandLine.arguments)
let n = options.count
let clock = SystemClock()
let payload = JSONValue.object([("n", .int(1))])
if options.sections.count > 1 {
    print(
        "usher-engine-bench: N = \(n), sections: \(Options.allSections.filter(options.sections.contains).joined(separator: ", ")), each in a process of its own"
    )
    fflush(nil)  // every stream: the children write to the same stdout
}

// MARK: - queue engine (value type)

func queueEngineBench() throws {
    section(
        "queue-engine: QueueEngine alone, capacity 1, \(options.keyed ? "a distinct key each" : "no keys"), \(n) visitors"
    )
    let t0 = Timestamp(micros: 1_767_225_600_000_000)
    var engine = QueueEngine(
        name: "bench",
        config: QueueConfig(capacity: 1, maxWaiting: 10_000_000, holdSeconds: 0, history: 1000),
        createdAt: t0)
    var rng = Generator(state: 42)

    try footprint("waiting visitor (engine)", count: n - 1) {
        try phase("enqueue", ops: n) {
            for i in 0..<n {
                let r = VisitorRequest(key: options.keyed ? "key-\(i)" : nil, action: options.keyed ? "run" : nil)
                _ = try engine.enqueue(r, now: Timestamp(micros: t0.micros + Int64(i)))
            }
        }
    }
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
    print("(checksum \(checksum))")
}

// MARK: - queue (actor)

func queueBench() throws {
    section("queue: VisitorQueue actor, capacity 1, hold_seconds 30, dedup off, payload {\"n\":1}")
    let line = VisitorQueue(
        name: "line", config: QueueConfig(capacity: 1, maxWaiting: 10_000_000, holdSeconds: 30, dedup: .off),
        clock: clock)
    try footprint("waiting visitor", count: n - 1) {
        try phase("enqueue (waits)", ops: n) {
            for _ in 0..<n {
                _ = try line.withIsolation { q throws(QueueError) in try q.enqueue(VisitorRequest(payload: payload)) }
            }
        }
    }
    try phase("complete (grants the next)", ops: n) {
        for i in 0..<n {
            _ = try line.withIsolation { q throws(QueueError) in try q.complete(id: serverID(i)) }
        }
    }
    line.withIsolation { $0.close() }
    // Enqueue + complete on an empty queue, with and without a hold timer.
    for (label, hold) in [
        ("enqueue + complete (granted at once)", 30.0), ("enqueue + complete, hold_seconds 0 (no timer)", 0),
    ] {
        let cycling = VisitorQueue(
            name: "cycle", config: QueueConfig(capacity: 1, maxWaiting: 10_000_000, holdSeconds: hold, dedup: .off),
            clock: clock)
        try phase(label, ops: n) {
            for _ in 0..<n {
                let id = try cycling.withIsolation { q throws(QueueError) in
                    try q.enqueue(VisitorRequest(payload: payload)).view.id
                }
                _ = try cycling.withIsolation { q throws(QueueError) in try q.complete(id: id) }
            }
        }
        cycling.withIsolation { $0.close() }
    }

}

// MARK: - window

func windowBench() throws {
    section("window: WindowSlot actor, display_seconds 0, dedup off, payload {\"n\":1}")
    let window = WindowSlot(
        name: "w", config: WindowConfig(maxWaiting: 10_000_000, displaySeconds: 0, dedup: .off), clock: clock)
    try footprint("queued item", count: n - 1) {
        try phase("show (the first shows, the rest queue)", ops: n) {
            for _ in 0..<n {
                _ = try window.withIsolation { w throws(WindowError) in try w.show(ShowRequest(payload: payload)) }
            }
        }
    }
    try phase("dismiss (shows the next)", ops: n) {
        for _ in 0..<n {
            _ = try window.withIsolation { w throws(WindowError) in try w.dismiss() }
        }
    }
    try phase("show + dismiss (empty window)", ops: n) {
        for _ in 0..<n {
            _ = try window.withIsolation { w throws(WindowError) in try w.show(ShowRequest(payload: payload)) }
            _ = try window.withIsolation { w throws(WindowError) in try w.dismiss() }
        }
    }
    window.withIsolation { $0.close() }
}

// MARK: - pool

func poolBench() throws {
    let size = min(n, 100_000)
    section("pool: LeasePool actor, lease_seconds 60, \(size) elements")
    var pool: LeasePool?
    footprint("element (pool creation)", count: size) {
        let elements = (0..<size).map { PoolElementSpec(id: "e\($0)") }
        pool = LeasePool(name: "pl", config: PoolConfig(elements: elements, leaseSeconds: 60), clock: clock)
    }
    guard let pool else { return }
    try phase("fetch + recycle", ops: n) {
        for _ in 0..<n {
            let lease = try pool.withIsolation { p throws(PoolError) in try p.fetch(FetchRequest()) }
            _ = try pool.withIsolation { p throws(PoolError) in try p.recycle(lease: lease.id) }
        }
    }
    let untimed = LeasePool(
        name: "pl0", config: PoolConfig(elements: (0..<16).map { PoolElementSpec(id: "e\($0)") }, leaseSeconds: 0),
        clock: clock)
    try phase("fetch + recycle, lease_seconds 0 (no timer)", ops: n) {
        for _ in 0..<n {
            let lease = try untimed.withIsolation { p throws(PoolError) in try p.fetch(FetchRequest()) }
            _ = try untimed.withIsolation { p throws(PoolError) in try p.recycle(lease: lease.id) }
        }
    }
    untimed.withIsolation { $0.close() }
    var ids: [String] = []
    ids.reserveCapacity(size)
    try footprint("active lease", count: size) {
        try phase("fetch (every element)", ops: size) {
            for _ in 0..<size {
                ids.append(try pool.withIsolation { p throws(PoolError) in try p.fetch(FetchRequest()) }.id)
            }
        }
    }
    try phase("recycle (every lease)", ops: size) {
        for id in ids {
            _ = try pool.withIsolation { p throws(PoolError) in try p.recycle(lease: id) }
        }
    }
    pool.withIsolation { $0.close() }
}

// MARK: - pipeline

func pipelineBench() throws {
    section("pipeline: Pipeline actor, ack_seconds 30, max_in_flight = capacity = N, payload {\"n\":1}")
    let pipeline = Pipeline(
        name: "p", config: PipelineConfig(capacity: n, maxInFlight: n, ackSeconds: 30), clock: clock)
    try footprint("ready item", count: n) {
        try phase("push", ops: n) {
            for _ in 0..<n {
                _ = try pipeline.withIsolation { p throws(PipelineError) in
                    try p.push(PipelinePushRequest(payload: payload))
                }
            }
        }
    }
    var taken: [(String, Int64)] = []
    taken.reserveCapacity(n)
    try phase("take (max 1)", ops: n) {
        for _ in 0..<n {
            let d = try pipeline.withIsolation { p throws(PipelineError) in try p.take(max: 1) }
            taken.append((d[0].id, d[0].fence))
        }
    }
    try phase("consume (with the fence)", ops: n) {
        for (id, fence) in taken {
            _ = try pipeline.withIsolation { p throws(PipelineError) in try p.consume(id, fence: fence) }
        }
    }
    /// Push + take + consume on an empty pipeline, item after item.
    func cycles(_ label: String, on p: Pipeline) throws {
        try phase(label, ops: n) {
            for _ in 0..<n {
                _ = try p.withIsolation { p throws(PipelineError) in try p.push(PipelinePushRequest(payload: payload)) }
                let d = try p.withIsolation { p throws(PipelineError) in try p.take(max: 1) }
                _ = try p.withIsolation { p throws(PipelineError) in try p.consume(d[0].id, fence: d[0].fence) }
            }
        }
        p.withIsolation { $0.close() }
    }
    try cycles("push + take + consume (empty pipeline)", on: pipeline)
    try cycles(
        "push + take + consume, ack_seconds 0",
        on: Pipeline(
            name: "p0", config: PipelineConfig(capacity: 1000, maxInFlight: 1000, ackSeconds: 0), clock: clock))
}

// MARK: - machine

func machineBench() throws {
    let count = max(1, n / 10)
    section("machine: StateMachine actor, a self-loop (idle -tick-> idle), history of 50")
    let ticker = try MachineDefinition(
        initial: "idle", states: ["idle"], transitions: [.init(event: "tick", from: "idle", to: "idle")])
    let one = StateMachine(name: "m", definitionName: "ticker", definition: ticker, clock: clock)
    try phase("event (fire tick)", ops: n) {
        for _ in 0..<n {
            _ = try one.withIsolation { m throws(MachineError) in try m.fire(event: "tick") }
        }
    }
    one.withIsolation { $0.close() }
    var machines: [StateMachine] = []
    machines.reserveCapacity(count)
    footprint("machine (no transition yet)", count: count) {
        phase("create a machine", ops: count) {
            for i in 0..<count {
                machines.append(
                    StateMachine(name: "m\(i)", definitionName: "player", definition: .player, clock: clock))
            }
        }
    }
    footprint("machine's first transition", count: count) {
        for m in machines {
            _ = try? m.withIsolation { m throws(MachineError) in try m.fire(event: "prepare") }
        }
    }
    for m in machines { m.withIsolation { $0.close() } }
}

// With more than one section, each runs in a process of its own (this
// executable, --only SECTION), so that no section fills memory another one
// freed: the bytes-per-thing figures start from a fresh heap every time.
let chosen = Options.allSections.filter(options.sections.contains)
if chosen.count > 1 {
    for name in chosen {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/proc/self/exe")
        child.arguments = ["--only", name, "--count", String(n)] + (options.keyed ? [] : ["--keyless"])
        do {
            try child.run()
        } catch {
            print("usher-engine-bench: cannot start the \(name) section: \(error)")
            exit(1)
        }
        child.waitUntilExit()
        if child.terminationStatus != 0 {
            print("usher-engine-bench: the \(name) section failed (status \(child.terminationStatus))")
            exit(1)
        }
    }
    exit(0)
}

let start = memory()
print("RSS at start: \(mib(start.rss))")
if options.sections.contains("queue-engine") { try queueEngineBench() }
if options.sections.contains("queue") { try queueBench() }
if options.sections.contains("window") { try windowBench() }
if options.sections.contains("pool") { try poolBench() }
if options.sections.contains("pipeline") { try pipelineBench() }
if options.sections.contains("machine") { try machineBench() }
print("")
print("peak RSS (VmHWM): \(mib(memory().peak))")
