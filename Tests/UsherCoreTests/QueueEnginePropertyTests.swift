import Testing

@testable import UsherCore

/// The engine against a brute-force model of docs/api.md, Queues (arrays, full scans,
/// sorting on every question) over seeded random operation sequences:
/// statuses, positions, grants, fences, links, counts and history must agree
/// after every step.
@Suite struct QueueEnginePropertyTests {
    typealias F = QueueFixtures

    struct Scenario: Sendable, CustomStringConvertible {
        var seed: UInt64
        var dedup: DedupMode
        var history: Int
        var keep = DedupKeep.first
        var dedupSeconds = 0.0
        var description: String {
            "seed \(seed), \(dedup), history \(history), keep \(keep), dedup_seconds \(dedupSeconds)"
        }
    }

    static let scenarios: [Scenario] = [
        Scenario(seed: 11, dedup: .key, history: 150),
        Scenario(seed: 12, dedup: .adjacent, history: 150),
        Scenario(seed: 13, dedup: .off, history: 150),
        Scenario(seed: 14, dedup: .key, history: 5),
        Scenario(seed: 15, dedup: .adjacent, history: 0),
        Scenario(seed: 16, dedup: .key, history: 40),
        Scenario(seed: 17, dedup: .key, history: 150, keep: .latest),
        Scenario(seed: 18, dedup: .adjacent, history: 40, keep: .latest),
        Scenario(seed: 19, dedup: .key, history: 3, dedupSeconds: 4),
        Scenario(seed: 20, dedup: .off, history: 0, keep: .latest, dedupSeconds: 1.5),
    ]

    @Test(arguments: scenarios)
    func engineMatchesTheModel(_ s: Scenario) throws {
        var rng = SeededGenerator(seed: s.seed)
        let config = QueueConfig(
            capacity: 2, maxWaiting: 25, holdSeconds: 6, dedup: s.dedup, dedupKeep: s.keep,
            opposites: [["like", "unlike"]], history: s.history, dedupSeconds: s.dedupSeconds, idleSeconds: 0,
            claimSeconds: 0)
        var engine = F.engine(config)
        var model = QueueModel(config: config, createdAt: F.t0.micros)
        var now = F.t0.micros
        let keys: [String?] = [nil, "a", "b", "c"]
        let actions: [String?] = [nil, "like", "unlike", "share"]
        let modes = DedupMode.allCases

        for step in 0..<1200 {
            now += [0, 0, 250_000, 500_000, 1_000_000, 3_000_000].randomElement(using: &rng)!
            let t = Timestamp(micros: now)
            let known = model.knownIDs
            // Mostly act on visitors that are still in play, sometimes on finished or unknown ones.
            func pick(_ preferred: [String]) -> String {
                switch Int.random(in: 0..<10, using: &rng) {
                case 0: "unknown"
                case 1, 2: known.randomElement(using: &rng) ?? "unknown"
                default: preferred.randomElement(using: &rng) ?? known.randomElement(using: &rng) ?? "unknown"
                }
            }
            let roll = Int.random(in: 0..<100, using: &rng)
            let what: String
            let expected: Result<String, QueueError>
            let actual: Result<String, QueueError>
            switch roll {
            case 0..<45:
                var r = VisitorRequest(
                    key: keys.randomElement(using: &rng)!, action: actions.randomElement(using: &rng)!,
                    priority: [0, 0, 0, 1, 5, -1].randomElement(using: &rng)!)
                if Int.random(in: 0..<4, using: &rng) == 0 {
                    r.holdSeconds = Double(Int.random(in: 1...6, using: &rng))
                }
                if Int.random(in: 0..<5, using: &rng) == 0 {
                    r.delaySeconds = [0.5, 1, 2, 3].randomElement(using: &rng)!
                }
                if Int.random(in: 0..<6, using: &rng) == 0 {
                    r.id = known.randomElement(using: &rng) ?? "client-\(step)"
                }
                what = "enqueue \(r)"
                expected = model.enqueue(r, now: now)
                actual = Result { () throws(QueueError) in try engine.enqueue(r, now: t).view.id }
            case 45..<60:
                let id = pick(model.ids(.granted))
                what = "complete \(id)"
                expected = model.complete(id, now: now)
                actual = Result { () throws(QueueError) in try engine.complete(id: id, now: t).id }
            case 60..<75:
                let id = pick(model.ids(.granted, .waiting, .delayed))
                what = "remove \(id)"
                expected = model.remove(id, now: now)
                actual = Result { () throws(QueueError) in try engine.remove(id: id, now: t).id }
            case 75..<82:
                let id = pick(model.ids(.granted))
                let hold: Double? = Bool.random(using: &rng) ? nil : Double(Int.random(in: 1...6, using: &rng))
                what = "extend \(id) \(String(describing: hold))"
                expected = model.extend(id, hold: hold, now: now)
                actual = Result { () throws(QueueError) in try engine.extend(id: id, holdSeconds: hold, now: t).id }
            case 82..<86:
                var patch = QueuePatch(capacity: Int.random(in: 0...3, using: &rng))
                if Int.random(in: 0..<3, using: &rng) == 0 { patch.dedup = modes.randomElement(using: &rng)! }
                if Int.random(in: 0..<6, using: &rng) == 0 {
                    patch.dedupKeep = DedupKeep.allCases.randomElement(using: &rng)!
                }
                what = "patch \(patch)"
                model.apply(patch, now: now)
                engine.apply(patch, now: t)
                expected = .success("")
                actual = .success("")
            default:
                what = "advance"
                model.begin(now: now)
                engine.advance(to: t)
                expected = .success("")
                actual = .success("")
            }
            let context = "step \(step): \(what)"
            switch (expected, actual) {
            case (.success(let a), .success(let b)):
                if a != b { Issue.record("\(context): ids \(a) vs \(b)") }
            case (.failure(let a), .failure(let b)):
                if !Self.sameError(a, b) { Issue.record("\(context): errors \(a) vs \(b)") }
            default:
                Issue.record("\(context): model \(expected) vs engine \(actual)")
            }
            guard compare(&engine, model, context: context) else { return }
        }
    }

    static func sameError(_ a: QueueError, _ b: QueueError) -> Bool {
        switch (a, b) {
        case (.full, .full), (.invalid, .invalid): true
        default: a == b
        }
    }

    /// Everything the model knows must match the engine; stops at the first difference.
    func compare(_ engine: inout QueueEngine, _ model: QueueModel, context: String) -> Bool {
        guard engine.counts == model.counts else {
            Issue.record("\(context): counts \(engine.counts) vs model \(model.counts)")
            return false
        }
        guard engine.balanced else {
            Issue.record("\(context): accounting invariant broken")
            return false
        }
        // The holders' expiry tree (wait estimates) holds exactly the holders' expiries.
        let expiries = model.visitors.values.filter { $0.status == .granted }.compactMap(\.expiresAt).sorted()
        let ranked = (0..<engine.holderExpiries.count).map { engine.holderExpiries.deadline(rank: $0 + 1) }
        guard ranked == expiries else {
            Issue.record("\(context): holder expiries \(ranked) vs model \(expiries)")
            return false
        }
        let waiting = model.waitingInOrder
        for v in model.visitors.values {
            guard let view = engine.currentView(id: v.id) else {
                Issue.record("\(context): engine forgot \(v.id)")
                return false
            }
            let position = waiting.firstIndex(of: v.id).map { $0 + 1 }
            let ok =
                view.status == v.status && view.position == position && view.fence == v.fence
                && view.grantedAt?.micros == v.grantedAt && view.expiresAt?.micros == v.expiresAt
                && view.finishedAt?.micros == v.finishedAt && view.mergedInto == v.mergedInto
                && view.cancelledWith == v.cancelledWith
            if !ok {
                Issue.record("\(context): \(v.id) engine \(view) vs model \(v)")
                return false
            }
        }
        for id in model.forgotten where engine.currentView(id: id) != nil {
            Issue.record("\(context): engine still remembers \(id)")
            return false
        }
        let deadline = model.nextDeadline
        guard engine.nextDeadline?.micros == deadline else {
            Issue.record(
                "\(context): next deadline \(String(describing: engine.nextDeadline)) vs \(String(describing: deadline))"
            )
            return false
        }
        return true
    }
}

/// docs/api.md's queue rules restated as simply as possible: no indexes, every question answered by a scan.
struct QueueModel {
    struct Visitor: CustomStringConvertible {
        var id: String
        var key: String?
        var action: String?
        var priority: Int
        var hold: Int64?
        var status: VisitorStatus
        var created: Int
        var seq = 0
        var delayEnd: Int64 = 0
        var grantedAt: Int64?
        var expiresAt: Int64?
        var finishedAt: Int64?
        var fence: Int64?
        var mergedInto: String?
        var cancelledWith: String?
        var description: String {
            "\(id) \(status) seq \(seq) fence \(String(describing: fence)) expires \(String(describing: expiresAt))"
        }
    }

    var config: QueueConfig
    var visitors: [String: Visitor] = [:]
    var forgotten: Set<String> = []
    var finishedOrder: [String] = []
    var counts = QueueCounts()
    var nextFence: Int64
    var seq = 0
    var created = 0
    var lastServerID: Int64

    init(config: QueueConfig, createdAt: Int64) {
        self.config = config
        self.nextFence = createdAt
        self.lastServerID = createdAt
    }

    var knownIDs: [String] { visitors.keys.sorted() }

    func ids(_ statuses: VisitorStatus...) -> [String] {
        visitors.values.filter { statuses.contains($0.status) }.map(\.id).sorted()
    }

    var waitingInOrder: [String] {
        visitors.values.filter { $0.status == .waiting }
            .sorted { $0.priority != $1.priority ? $0.priority > $1.priority : $0.seq < $1.seq }
            .map(\.id)
    }

    var nextDeadline: Int64? {
        visitors.values.compactMap { v in
            v.status == .delayed ? v.delayEnd : v.status == .granted ? v.expiresAt : nil
        }.min()
    }

    var queueHold: Int64 { Int64(config.holdSeconds * 1_000_000) }

    mutating func begin(now: Int64) {
        let dedupMicros = Int64(config.dedupSeconds * 1_000_000)
        while finishedOrder.count > config.history, visitors[finishedOrder[0]]!.finishedAt! + dedupMicros <= now {
            let id = finishedOrder.removeFirst()
            visitors[id] = nil
            forgotten.insert(id)
        }
        while let t = nextDeadline, t <= now {
            let ending = visitors.values.filter { $0.status == .delayed && $0.delayEnd == t }.sorted {
                $0.created < $1.created
            }
            for v in ending {
                counts.delayed -= 1
                enter(v.id, at: t)
            }
            let expiring = visitors.values.filter { $0.status == .granted && $0.expiresAt == t }.sorted {
                $0.fence! < $1.fence!
            }
            for v in expiring { end(v.id, as: .expired, at: t) }
            grant(now: now)
        }
    }

    enum Outcome {
        case join
        case merge(String)
        case replace(String)
        case cancel(String)
    }

    func outcome(key: String?, action: String?) -> Outcome {
        guard let key, config.dedup != .off else { return .join }
        let waiting = visitors.values.filter { $0.status == .waiting }
        func opposite(_ a: String?, _ b: String?) -> Bool {
            guard let a, let b else { return false }
            return config.opposites.contains { Set($0) == Set([a, b]) }
        }
        if config.dedup == .key {
            if let d = waiting.filter({ $0.key == key && $0.action == action }).max(by: { $0.seq < $1.seq }) {
                return config.dedupKeep == .first ? .merge(d.id) : .replace(d.id)
            }
            if let last = waiting.filter({ $0.key == key }).max(by: { $0.seq < $1.seq }), opposite(last.action, action)
            {
                return .cancel(last.id)
            }
            return .join
        }
        guard let last = waiting.max(by: { $0.seq < $1.seq }), last.key == key else { return .join }
        if last.action == action { return config.dedupKeep == .first ? .merge(last.id) : .replace(last.id) }
        return opposite(last.action, action) ? .cancel(last.id) : .join
    }

    mutating func enter(_ id: String, at t: Int64) {
        let v = visitors[id]!
        switch outcome(key: v.key, action: v.action) {
        case .join:
            visitors[id]!.status = .waiting
            visitors[id]!.seq = seq
            seq += 1
            counts.waiting += 1
        case .merge(let into):
            visitors[id]!.mergedInto = into
            settle(id, as: .merged, at: t)
        case .replace(let old):
            visitors[id]!.status = .waiting
            visitors[id]!.seq = visitors[old]!.seq
            visitors[id]!.priority = visitors[old]!.priority
            visitors[old]!.mergedInto = id
            settle(old, as: .merged, at: t)
        case .cancel(let other):
            visitors[id]!.cancelledWith = other
            visitors[other]!.cancelledWith = id
            end(other, as: .cancelled, at: t)
            settle(id, as: .cancelled, at: t)
        }
    }

    mutating func grant(now: Int64) {
        while counts.holding < config.capacity, let id = waitingInOrder.first {
            counts.waiting -= 1
            counts.holding += 1
            counts.grantedTotal += 1
            visitors[id]!.status = .granted
            visitors[id]!.grantedAt = now
            visitors[id]!.fence = nextFence
            nextFence += 1
            let hold = effectiveHold(visitors[id]!)
            visitors[id]!.expiresAt = hold > 0 ? now + hold : nil
        }
    }

    func effectiveHold(_ v: Visitor) -> Int64 {
        if queueHold == 0 { return v.hold ?? 0 }
        guard let own = v.hold, own > 0 else { return queueHold }
        return min(own, queueHold)
    }

    mutating func end(_ id: String, as status: VisitorStatus, at t: Int64) {
        switch visitors[id]!.status {
        case .delayed: counts.delayed -= 1
        case .waiting: counts.waiting -= 1
        case .granted: counts.holding -= 1
        default: return
        }
        settle(id, as: status, at: t)
    }

    mutating func settle(_ id: String, as status: VisitorStatus, at t: Int64) {
        visitors[id]!.status = status
        visitors[id]!.finishedAt = t
        switch status {
        case .completed: counts.completedTotal += 1
        case .released: counts.releasedTotal += 1
        case .expired: counts.expiredTotal += 1
        case .cancelled: counts.cancelledTotal += 1
        case .merged: counts.mergedTotal += 1
        default: break
        }
        finishedOrder.append(id)
    }

    mutating func enqueue(_ r: VisitorRequest, now: Int64) -> Result<String, QueueError> {
        begin(now: now)
        if let id = r.id, visitors[id] != nil { return .success(id) }
        if let h = r.holdSeconds, h > config.holdSeconds || (h == 0 && config.holdSeconds > 0) {
            return .failure(.invalid(field: "hold_seconds", message: ""))
        }
        let delayed = (r.delaySeconds ?? 0) > 0
        let room = counts.waiting + counts.delayed < config.maxWaiting
        if delayed && !room { return .failure(.full(retryAfterSeconds: 1)) }
        if !delayed, case .join = outcome(key: r.key, action: r.action), counts.holding >= config.capacity, !room {
            return .failure(.full(retryAfterSeconds: 1))
        }
        let id = r.id ?? nextServerID(now: now)
        forgotten.remove(id)
        created += 1
        counts.enqueuedTotal += 1
        var v = Visitor(
            id: id, key: r.key, action: r.action, priority: r.priority,
            hold: r.holdSeconds.map { Int64($0 * 1_000_000) }, status: .delayed, created: created)
        if delayed {
            v.delayEnd = now + Int64(r.delaySeconds! * 1_000_000)
            visitors[id] = v
            counts.delayed += 1
        } else {
            visitors[id] = v
            enter(id, at: now)
            grant(now: now)
        }
        return .success(id)
    }

    mutating func nextServerID(now: Int64) -> String {
        while true {
            lastServerID = max(lastServerID + 1, now)
            let id = String(lastServerID)
            if visitors[id] == nil { return id }
        }
    }

    mutating func complete(_ id: String, now: Int64) -> Result<String, QueueError> {
        begin(now: now)
        guard let v = visitors[id] else { return .failure(.notFound("visitor \"\(id)\"")) }
        guard v.status == .granted else { return .failure(.notGranted(current: v.status)) }
        end(id, as: .completed, at: now)
        grant(now: now)
        return .success(id)
    }

    mutating func remove(_ id: String, now: Int64) -> Result<String, QueueError> {
        begin(now: now)
        guard let v = visitors[id] else { return .failure(.notFound("visitor \"\(id)\"")) }
        switch v.status {
        case .delayed, .waiting: end(id, as: .cancelled, at: now)
        case .granted: end(id, as: .released, at: now)
        default: break
        }
        grant(now: now)
        return .success(id)
    }

    mutating func extend(_ id: String, hold: Double?, now: Int64) -> Result<String, QueueError> {
        begin(now: now)
        guard let v = visitors[id] else { return .failure(.notFound("visitor \"\(id)\"")) }
        guard v.status == .granted else { return .failure(.notGranted(current: v.status)) }
        if let hold, hold > config.holdSeconds { return .failure(.invalid(field: "hold_seconds", message: "")) }
        let micros = hold.map { Int64($0 * 1_000_000) } ?? effectiveHold(v)
        // Never shorter: no limit stays, a later expiry stays.
        if let current = v.expiresAt, micros <= 0 || now + micros > current {
            visitors[id]!.expiresAt = micros > 0 ? now + micros : nil
        }
        return .success(id)
    }

    mutating func apply(_ patch: QueuePatch, now: Int64) {
        begin(now: now)
        config = patch.applied(to: config)
        grant(now: now)
    }
}
