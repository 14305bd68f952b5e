/// What the clients of a shared-pipeline run saw, and what the pipeline
/// said at the end.
struct PipelineHistory: Sendable {
    /// One hand-out a consumer received.
    struct Delivery: Sendable, Equatable {
        var id: String
        var fence: Int64
        var process: Int
    }

    /// One consume a consumer sent: `status` 200 means acknowledged.
    struct Ack: Sendable, Equatable {
        var id: String
        var fence: Int64
        var status: Int
    }

    /// Ids whose push was answered 201 or 200 (a retry of the same id).
    var pushed: Set<String>
    var deliveries: [Delivery]
    var acks: [Ack]
    /// The pipeline's state at the end: ready, delayed, in flight, dead.
    var left: [String: Int]
    /// Its totals at the end (`pushed_total`, `consumed_total`, …).
    var counts: [String: Int]
}

/// The invariants of the shared-pipeline scenario: every pushed item is
/// consumed exactly once (one acknowledged consume), none is lost, none is
/// left, nothing unknown is consumed, every hand-out has a fence of its own,
/// and an acknowledged item is never handed out again.
struct PipelineHistoryChecker {
    struct Report: Sendable {
        var violations: [String] = []
        var acked = 0
        var deliveries = 0
        /// Items handed out more than once (missed acks, redelivered).
        var redelivered = 0
        /// Consumes refused because a later hand-out held the item.
        var staleAcks = 0

        var summary: String {
            "\(acked) acked once, \(deliveries) hand-outs, \(redelivered) items redelivered, "
                + "\(staleAcks) stale consumes refused, \(violations.count) violations"
        }
    }

    func check(_ h: PipelineHistory) -> Report {
        var report = Report()
        report.deliveries = h.deliveries.count
        var fenceOwner: [Int64: String] = [:]
        var handOuts: [String: [Int64]] = [:]
        for d in h.deliveries {
            if let other = fenceOwner[d.fence] {
                report.violations.append("fence \(d.fence) handed out twice (\(other), \(d.id))")
            }
            fenceOwner[d.fence] = d.id
            handOuts[d.id, default: []].append(d.fence)
            if !h.pushed.contains(d.id) { report.violations.append("\(d.id) handed out but never pushed") }
        }
        report.redelivered = handOuts.values.count { $0.count > 1 }
        var acked: [String: Int64] = [:]
        for a in h.acks {
            guard a.status == 200 else {
                if a.status == 409 { report.staleAcks += 1 }
                continue
            }
            if acked[a.id] != nil { report.violations.append("\(a.id) acknowledged twice") }
            acked[a.id] = a.fence
            if !h.pushed.contains(a.id) { report.violations.append("\(a.id) acknowledged but never pushed") }
            if !(handOuts[a.id] ?? []).contains(a.fence) {
                report.violations.append("\(a.id) acknowledged with fence \(a.fence), never handed out")
            }
        }
        report.acked = acked.count
        for (id, fence) in acked {
            let later = (handOuts[id] ?? []).filter { $0 > fence }
            if !later.isEmpty { report.violations.append("\(id) handed out again (fence \(later[0])) after its ack") }
        }
        let lost = h.pushed.subtracting(acked.keys)
        if !lost.isEmpty {
            report.violations.append("\(lost.count) pushed items never acknowledged: \(lost.sorted().prefix(5))")
        }
        for part in ["ready", "delayed", "in_flight", "dead"] where (h.left[part] ?? 0) != 0 {
            report.violations.append("\(h.left[part] ?? 0) items left \(part)")
        }
        if let pushed = h.counts["pushed_total"], pushed != h.pushed.count {
            report.violations.append("pushed_total \(pushed), \(h.pushed.count) ids pushed")
        }
        if let consumed = h.counts["consumed_total"], consumed != acked.count {
            report.violations.append("consumed_total \(consumed), \(acked.count) acknowledged")
        }
        return report
    }
}
