/// One lease as the end state shows it (times in ms since the epoch, as the
/// API gives them; every one of them is Redis `TIME`, one clock for all processes).
struct LeaseOutcome: Sendable {
    var id: String
    var status: String
    var element: String?
    var grantedAt: Int64?
    var finishedAt: Int64?
    var expiresAt: Int64?
    var fence: Int64?
    /// `undelivered`: recycled because its fetch's answer never reached the client.
    var reason: String?

    init(
        id: String, status: String, element: String? = nil, grantedAt: Int64? = nil, finishedAt: Int64? = nil,
        expiresAt: Int64? = nil, fence: Int64? = nil, reason: String? = nil
    ) {
        self.id = id
        self.status = status
        self.element = element
        self.grantedAt = grantedAt
        self.finishedAt = finishedAt
        self.expiresAt = expiresAt
        self.fence = fence
        self.reason = reason
    }

    /// From a `GET …/leases/{id}` body's `lease`.
    init?(_ lease: [String: Any]) {
        guard let id = lease["id"] as? String, let status = lease["status"] as? String else { return nil }
        self.init(
            id: id, status: status, element: (lease["element"] as? [String: Any])?["id"] as? String,
            grantedAt: (lease["granted_at"] as? String).flatMap(rfc3339Milliseconds),
            finishedAt: (lease["finished_at"] as? String).flatMap(rfc3339Milliseconds),
            expiresAt: (lease["expires_at"] as? String).flatMap(rfc3339Milliseconds),
            fence: (lease["fence"] as? Int).map(Int64.init), reason: lease["reason"] as? String)
    }
}

/// Checks the leases of the pool scenario once the load has stopped and
/// every lease had time to end:
///
/// 1. **Every lease ends**: each one is `recycled`, `expired` or `revoked`,
///    with an element, `granted_at`, `finished_at` and a fence.
/// 2. **No element under two leases at once**: per element, the leases in
///    fence order hold it in turn: each begins no earlier than the one before
///    it ended (at equal milliseconds an end counts before a grant).
/// 3. **Fences**: unique, strictly increasing per element in grant order
///    (the grant times of an element's leases in fence order never go
///    back), and time-based (`fence` ≥ `granted_at` in µs).
/// 4. **Leases end by their expiry**: `finished_at` ≤ `expires_at`, and an
///    `expired` lease ends at its `expires_at`.
struct PoolHistoryChecker {
    static let finished: Set<String> = ["recycled", "expired", "revoked"]

    struct Report: Sendable {
        var violations: [String] = []
        var byStatus: [String: Int] = [:]
        /// Leases per element, and the most any element had.
        var perElement: [String: Int] = [:]
        /// Element hand-overs in the same millisecond (an end and the next grant).
        var sameMillisecondHandOvers = 0

        var summary: String {
            let statuses = byStatus.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            return "\(byStatus.values.reduce(0, +)) leases (\(statuses)) on \(perElement.count) elements, "
                + "\(sameMillisecondHandOvers) hand-overs within 1 ms"
        }
    }

    func check(_ leases: [LeaseOutcome]) -> Report {
        var report = Report()
        var byElement: [String: [LeaseOutcome]] = [:]
        var fences: [Int64: String] = [:]
        for l in leases {
            report.byStatus[l.status, default: 0] += 1
            guard Self.finished.contains(l.status) else {
                report.violations.append("\(l.id) did not end: \(l.status)")
                continue
            }
            guard let element = l.element, let grantedAt = l.grantedAt, let finishedAt = l.finishedAt,
                let fence = l.fence
            else {
                report.violations.append("\(l.id) ended without element, times or fence")
                continue
            }
            if let other = fences[fence] { report.violations.append("fence \(fence) given to \(other) and \(l.id)") }
            fences[fence] = l.id
            if fence < grantedAt * 1000 { report.violations.append("\(l.id): fence \(fence) before its grant") }
            if finishedAt < grantedAt { report.violations.append("\(l.id) ended before it began") }
            if let expiresAt = l.expiresAt {
                if finishedAt > expiresAt { report.violations.append("\(l.id) ended after its expiry") }
                if l.status == "expired" && finishedAt != expiresAt {
                    report.violations.append("\(l.id) expired at \(finishedAt), not at its expiry \(expiresAt)")
                }
            }
            byElement[element, default: []].append(l)
        }
        for (element, list) in byElement {
            report.perElement[element] = list.count
            let inFenceOrder = list.sorted { $0.fence! < $1.fence! }
            for (before, after) in zip(inFenceOrder, inFenceOrder.dropFirst()) {
                if after.grantedAt! < before.grantedAt! {
                    report.violations.append(
                        "\(element): \(after.id) (fence \(after.fence!)) granted before \(before.id) "
                            + "(fence \(before.fence!))")
                }
                if after.grantedAt! < before.finishedAt! {
                    report.violations.append(
                        "\(element): \(before.id) and \(after.id) held it at once "
                            + "(\(after.grantedAt!) < \(before.finishedAt!))")
                }
                if after.grantedAt! == before.finishedAt! { report.sameMillisecondHandOvers += 1 }
            }
        }
        return report
    }
}
