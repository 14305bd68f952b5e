import Foundation

/// One visitor as the checker sees it after a run: its final view (times as
/// the API gives them, RFC 3339 with milliseconds, here in ms since the epoch;
/// every one of them is Redis `TIME`, one clock for all processes) and the
/// delay its creator asked for (the view does not show it).
struct VisitorOutcome: Sendable {
    var id: String
    var status: String
    var priority: Int
    var enqueuedAt: Int64
    var delayMicros: Int64 = 0
    var grantedAt: Int64?
    var finishedAt: Int64?
    var expiresAt: Int64?
    var fence: Int64?
    var reason: String?
    var cancelledWith: String?

    /// The view of `GET /v1/queues/{q}/visitors/{id}`.
    init?(view: [String: Any], delayMicros: Int64) {
        guard let id = view["id"] as? String, let status = view["status"] as? String,
            let priority = (view["priority"] as? NSNumber)?.intValue,
            let enqueued = (view["created_at"] as? String).flatMap(rfc3339Milliseconds)
        else { return nil }
        self.id = id
        self.status = status
        self.priority = priority
        self.enqueuedAt = enqueued
        self.delayMicros = delayMicros
        grantedAt = (view["granted_at"] as? String).flatMap(rfc3339Milliseconds)
        finishedAt = (view["finished_at"] as? String).flatMap(rfc3339Milliseconds)
        expiresAt = (view["expires_at"] as? String).flatMap(rfc3339Milliseconds)
        fence = (view["fence"] as? NSNumber)?.int64Value
        reason = view["reason"] as? String
        cancelledWith = view["cancelled_with"] as? String
    }

    /// A fabricated visitor, for the checker's own tests.
    init(
        id: String, status: String, priority: Int = 0, enqueuedAt: Int64, delayMicros: Int64 = 0,
        grantedAt: Int64? = nil, finishedAt: Int64? = nil, expiresAt: Int64? = nil, fence: Int64? = nil,
        reason: String? = nil, cancelledWith: String? = nil
    ) {
        self.id = id
        self.status = status
        self.priority = priority
        self.enqueuedAt = enqueuedAt
        self.delayMicros = delayMicros
        self.grantedAt = grantedAt
        self.finishedAt = finishedAt
        self.expiresAt = expiresAt
        self.fence = fence
        self.reason = reason
        self.cancelledWith = cancelledWith
    }

    /// When it entered the waiting line, in µs: its enqueue, or the end of
    /// its delay; an interval because the view's times are in milliseconds.
    var entry: ClosedRange<Int64> {
        let start = enqueuedAt * 1000 + delayMicros
        return start...(start + 999)
    }
}

/// Checks a queue's history against what issue 17 asks of a shared queue:
///
/// 1. **Final**: every visitor ends `completed`, `released`, `expired`,
///    `cancelled` or `merged`; the first three have a grant, the last two none.
/// 2. **Capacity**: never more than `capacity` holders, each holding from
///    `granted_at` to `finished_at` (at equal milliseconds an end counts
///    before a grant: an overlap shorter than 1 ms is not seen).
/// 3. **Fences**: unique, strictly increasing in grant order (any two grants
///    in different milliseconds), and time-based (`fence` ≥ `granted_at` in µs).
/// 4. **Holds begin after the line and end by their expiry**: no grant before
///    the visitor's entry, `finished_at` ≤ `expires_at`, and an
///    `expired` visitor ends at its `expires_at`.
/// 5. **Order**: no visitor B is granted while a visitor A that is ahead of
///    it is still in the line. A is ahead of B when both entered the line
///    (at its POST, or when its delay ended) and either they share a priority
///    and A entered first, or A's priority is higher and A entered before B's
///    grant. "First" and "before" must be certain despite the milliseconds
///    (the entry intervals do not overlap). A is still in the line at B's
///    grant when A's own grant has the higher fence, or A left ungranted
///    (cancelled) in a later millisecond than B's grant. A hold that expired
///    is applied at its expiry instant, but the grant it frees is dated when
///    the script runs (the next operation or timer, milliseconds later, so
///    that the holder gets its whole hold): B's grant may have been decided
///    at an expiry up to `catchUpMilliseconds` before its date, so a higher
///    priority A that entered after such an expiry (and B before it) is not
///    counted as ahead. Visitors that never
///    entered the line (merged; the newcomer of an opposite pair; cancelled
///    while delayed) are left out, and so are the few whose entry cannot be
///    told apart from their partner's or their cancel (counted as `unsure`).
struct QueueHistoryChecker {
    let capacity: Int
    /// How long after an expiry its freed slot's grant may be dated.
    var catchUpMilliseconds: Int64 = 1000

    struct Report: Sendable {
        var violations: [String] = []
        var maxHolders = 0
        var grants = 0
        var byStatus: [String: Int] = [:]
        var byReason: [String: Int] = [:]
        /// Pairs of the same priority where one was certainly ahead of the other.
        var fifoPairs = 0
        /// Pairs where the higher priority was certainly waiting at the other's grant.
        var priorityPairs = 0
        /// Visitors left out of the order check because their entry is unsure.
        var unsure = 0

        var summary: String {
            let statuses = byStatus.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            let reasons = byReason.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            return
                "grants \(grants), max holders \(maxHolders); \(statuses); reasons: \(reasons); "
                + "order pairs checked: fifo \(fifoPairs), priority \(priorityPairs); unsure \(unsure); "
                + "violations \(violations.count)"
        }
    }

    static let finalStatuses: Set<String> = ["completed", "released", "expired", "cancelled", "merged"]

    func check(_ visitors: [VisitorOutcome]) -> Report {
        var report = Report()
        for v in visitors {
            report.byStatus[v.status, default: 0] += 1
            if let reason = v.reason { report.byReason[reason, default: 0] += 1 }
        }
        checkFinal(visitors, &report)
        let granted = visitors.filter { $0.grantedAt != nil && $0.fence != nil }
        report.grants = granted.count
        checkCapacity(granted, &report)
        checkFences(granted, &report)
        checkExpiry(granted, &report)
        checkOrder(visitors, &report)
        return report
    }

    private func checkFinal(_ visitors: [VisitorOutcome], _ report: inout Report) {
        for v in visitors {
            guard Self.finalStatuses.contains(v.status) else {
                report.violations.append("\(v.id) ended \(v.status), not in a final status")
                continue
            }
            let needsGrant = ["completed", "released", "expired"].contains(v.status)
            if needsGrant != (v.grantedAt != nil && v.fence != nil) {
                report.violations.append(
                    "\(v.id) is \(v.status) with granted_at \(v.grantedAt.map(String.init) ?? "nil")")
            }
            if v.finishedAt == nil {
                report.violations.append("\(v.id) is \(v.status) without finished_at")
            }
        }
    }

    private func checkCapacity(_ granted: [VisitorOutcome], _ report: inout Report) {
        // (time, +1 grant / -1 end); ends first at equal times.
        var events: [(Int64, Int)] = []
        for v in granted {
            events.append((v.grantedAt!, 1))
            events.append((v.finishedAt ?? .max, -1))
        }
        events.sort { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 }
        var holders = 0
        for (time, change) in events {
            holders += change
            if holders > report.maxHolders { report.maxHolders = holders }
            if change > 0, holders > capacity {
                report.violations.append("\(holders) holders at \(time) ms, capacity \(capacity)")
            }
        }
    }

    private func checkFences(_ granted: [VisitorOutcome], _ report: inout Report) {
        let sorted = granted.sorted { ($0.grantedAt!, $0.fence!) < ($1.grantedAt!, $1.fence!) }
        var seen: [Int64: String] = [:]
        // The highest fence of the grants in earlier milliseconds, and who had it.
        var earlier: (fence: Int64, id: String)?
        var current: (ms: Int64, fence: Int64, id: String)?
        for v in sorted {
            let (ms, fence) = (v.grantedAt!, v.fence!)
            if let other = seen[fence] { report.violations.append("fence \(fence) given to \(other) and \(v.id)") }
            seen[fence] = v.id
            if fence < ms * 1000 {
                report.violations.append("\(v.id): fence \(fence) before its grant at \(ms) ms")
            }
            if let c = current, c.ms < ms {
                if earlier == nil || c.fence > earlier!.fence { earlier = (c.fence, c.id) }
                current = nil
            }
            if let e = earlier, fence <= e.fence {
                report.violations.append(
                    "\(v.id) granted at \(ms) ms with fence \(fence), after \(e.id) with \(e.fence)")
            }
            if current == nil || fence > current!.fence { current = (ms, fence, v.id) }
        }
    }

    private func checkExpiry(_ granted: [VisitorOutcome], _ report: inout Report) {
        for v in granted {
            if v.grantedAt! * 1000 + 999 < v.entry.lowerBound {
                report.violations.append("\(v.id) granted before it entered the line")
            }
            guard let end = v.finishedAt, let expiry = v.expiresAt else { continue }
            if end > expiry { report.violations.append("\(v.id) held until \(end) ms, past its expiry \(expiry)") }
            if v.status == "expired", end != expiry {
                report.violations.append("\(v.id) expired at \(end) ms, its expiry was \(expiry)")
            }
        }
    }

    /// Whether `v` entered the line; nil when that cannot be told.
    private func enteredLine(_ v: VisitorOutcome, _ byID: [String: VisitorOutcome]) -> Bool? {
        if v.grantedAt != nil { return true }
        switch v.status {
        case "merged": return false
        case "cancelled" where v.reason == "opposite":
            // The victim waited; the newcomer that cancelled it never entered.
            guard let partner = v.cancelledWith.flatMap({ byID[$0] }) else { return nil }
            if v.entry.upperBound < partner.entry.lowerBound { return true }
            if v.entry.lowerBound > partner.entry.upperBound { return false }
            return nil
        case "cancelled":
            guard v.delayMicros > 0, let end = v.finishedAt else { return true }
            if end * 1000 >= v.entry.upperBound { return true }
            if end * 1000 + 999 < v.entry.lowerBound { return false }
            return nil
        default: return nil
        }
    }

    /// Whether `b`'s grant (dated `grantMs`) may have been decided at an
    /// expiry that came certainly after `b` entered and before `a` did.
    private func decidedAtAnExpiry(
        before a: VisitorOutcome, forGrantAt grantMs: Int64, of b: VisitorOutcome, _ expiries: [Int64]
    ) -> Bool {
        expiries.contains { x in
            x <= grantMs && grantMs - x <= catchUpMilliseconds && b.entry.upperBound <= x * 1000
                && (x + 1) * 1000 <= a.entry.lowerBound
        }
    }

    private func checkOrder(_ visitors: [VisitorOutcome], _ report: inout Report) {
        let byID = Dictionary(visitors.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        var inLine: [VisitorOutcome] = []
        for v in visitors {
            switch enteredLine(v, byID) {
            case true?: inLine.append(v)
            case false?: break
            case nil: report.unsure += 1
            }
        }
        let grantedInLine = inLine.filter { $0.grantedAt != nil && $0.fence != nil }
        let expiries = visitors.filter { $0.status == "expired" }.compactMap(\.finishedAt).sorted()
        for b in grantedInLine {
            let (grantMs, grantFence) = (b.grantedAt!, b.fence!)
            for a in inLine where a.id != b.id && a.priority >= b.priority {
                let ahead: Bool
                if a.priority == b.priority {
                    ahead = a.entry.upperBound < b.entry.lowerBound
                } else {
                    ahead =
                        a.entry.upperBound < grantMs * 1000
                        && !decidedAtAnExpiry(before: a, forGrantAt: grantMs, of: b, expiries)
                }
                guard ahead else { continue }
                if a.priority == b.priority { report.fifoPairs += 1 } else { report.priorityPairs += 1 }
                let stillWaiting: Bool
                if let fence = a.fence, a.grantedAt != nil {
                    stillWaiting = fence > grantFence
                } else {
                    stillWaiting = (a.finishedAt ?? .max) > grantMs
                }
                if stillWaiting {
                    let kind = a.priority == b.priority ? "FIFO" : "priority"
                    report.violations.append(
                        "\(kind): \(b.id) (priority \(b.priority)) granted at \(grantMs) ms while \(a.id) "
                            + "(priority \(a.priority), in line since \(a.entry.lowerBound) µs) still waited")
                }
            }
        }
    }
}

/// Milliseconds since the epoch of an RFC 3339 UTC time with milliseconds
/// (`2026-11-30T04:10:00.123Z`), the form every time in Usher's answers has.
func rfc3339Milliseconds(_ text: String) -> Int64? {
    let parts = text.split(whereSeparator: { "-T:.Z".contains($0) }).map { Int64($0) }
    guard parts.count == 7, text.hasSuffix("Z"), parts.allSatisfy({ $0 != nil }) else { return nil }
    let (y, m, d) = (parts[0]!, parts[1]!, parts[2]!)
    // Days from 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
    let year = m <= 2 ? y - 1 : y
    let era = (year >= 0 ? year : year - 399) / 400
    let yearOfEra = year - era * 400
    let dayOfYear = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1
    let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
    let days = era * 146_097 + dayOfEra - 719_468
    let seconds = ((days * 24 + parts[3]!) * 60 + parts[4]!) * 60 + parts[5]!
    return seconds * 1000 + parts[6]!
}
