import UsherCore

/// One resource's numbers at scrape time.
struct ResourceSample {
    var kind: ResourceKind
    var name: String
    /// Gauges by field name as the state route shows it (`waiting`, `in_flight`, …).
    var gauges: [(field: String, value: Int)] = []
    /// Lifetime counts by event (`enqueued` for `enqueued_total`, …).
    var events: [(event: String, value: Int)] = []
    /// The oldest waiting visitor / queued item / waiting fetcher / ready item.
    var oldestSince: Timestamp?
    /// False where the backend does not know `oldestSince` (some Redis-backed
    /// kinds): the age series is left out rather than shown as 0.
    var oldestKnown = true
    var wait: WaitHistogram?
    /// Machines: the current state, version, and when the state was entered.
    var machine: (state: String, version: Int64, enteredAt: Timestamp)?
    /// Machines: transactions ended so far, by outcome (nil where not kept: Redis).
    var transactions: TransactionCounts?

    init(_ kind: ResourceKind, _ name: String) {
        self.kind = kind
        self.name = name
    }

    /// A pool's numbers from its state (either backend).
    init(pool name: String, _ state: PoolState) {
        self.init(.pools, name)
        gauges.append(("size", state.size))
        add(.pool(state))
    }

    /// A pipeline's numbers from its state (either backend).
    init(pipeline name: String, _ state: PipelineSnapshot) {
        self.init(.pipelines, name)
        gauges += [("capacity", state.capacity), ("paused", state.paused ? 1 : 0)]
        add(.pipeline(state))
    }

    /// Takes a counts object's members: `*_total` ones as events, the
    /// others as gauges.
    mutating func add(_ counts: CountsBody) {
        for (name, value) in counts.members {
            if name.hasSuffix("_total") {
                events.append((String(name.dropLast(6)), value))
            } else {
                gauges.append((name, value))
            }
        }
    }
}

/// A manager that `GET /metrics` can sample (through `withIsolation`: no
/// cost on the request path).
protocol MetricsSampled {
    func metricsSample() -> ResourceSample?
}

extension VisitorQueue: MetricsSampled {
    nonisolated func metricsSample() -> ResourceSample? {
        withIsolation { q in
            var s = ResourceSample(.queues, q.name)
            s.gauges.append(("capacity", q.config.capacity))
            s.add(.queue(q.counts))
            s.oldestSince = q.oldestWaitingSince
            s.wait = q.waitHistogram
            return s
        }
    }
}

extension WindowSlot: MetricsSampled {
    nonisolated func metricsSample() -> ResourceSample? {
        withIsolation { w in
            var s = ResourceSample(.windows, w.name)
            s.add(.window(w.counts))
            s.oldestSince = w.oldestWaitingSince
            s.wait = w.waitHistogram
            return s
        }
    }
}

extension LeasePool: MetricsSampled {
    nonisolated func metricsSample() -> ResourceSample? {
        withIsolation { p in
            guard let state = try? p.state(limit: 0) else { return nil }
            var s = ResourceSample(pool: p.name, state)
            s.oldestSince = p.oldestWaitingSince
            s.wait = p.waitHistogram
            return s
        }
    }
}

extension Pipeline: MetricsSampled {
    nonisolated func metricsSample() -> ResourceSample? {
        withIsolation { p in
            let state = p.state(limit: 0)
            var s = ResourceSample(pipeline: p.name, state)
            if let source = state.source {
                s.events.append(("source_pulled", source.pulledTotal))
                s.events.append(("source_errors", source.errorsTotal))
            }
            s.oldestSince = p.oldestReadySince
            s.wait = p.waitHistogram
            return s
        }
    }
}

extension StateMachine: MetricsSampled {
    nonisolated func metricsSample() -> ResourceSample? {
        let (snapshot, transactions) = withIsolation { ($0.snapshot(), $0.transactionCounts) }
        var s = ResourceSample(.machines, snapshot.name)
        s.machine = (snapshot.state, snapshot.version, snapshot.enteredAt)
        s.transactions = transactions
        return s
    }
}

/// Writes the per-resource families.
enum ResourceMetrics {
    /// The gauge family for a kind's field, e.g. `usher_queue_waiting`.
    static func gaugeName(_ kind: ResourceKind, _ field: String) -> String { "usher_\(kind.noun)_\(field)" }

    static let gaugeHelp: [String: String] = [
        "usher_queue_capacity": "Slots of the queue (config capacity).",
        "usher_queue_waiting": "Visitors in the waiting line now.",
        "usher_queue_holding": "Visitors holding a slot now.",
        "usher_queue_delayed": "Visitors whose requested delay has not ended.",
        "usher_window_showing": "1 while the window shows an item, else 0.",
        "usher_window_queued": "Items waiting for the window.",
        "usher_window_delayed": "Items whose requested delay has not ended.",
        "usher_pool_size": "Elements in the pool.",
        "usher_pool_available": "Elements not leased.",
        "usher_pool_leased": "Elements leased.",
        "usher_pool_waiting": "Fetchers waiting for an element.",
        "usher_pipeline_capacity": "Items the pipeline holds at most (ready, delayed and in flight).",
        "usher_pipeline_ready": "Items waiting to be handed out.",
        "usher_pipeline_in_flight": "Items handed out, not yet consumed or released.",
        "usher_pipeline_delayed": "Items waiting for their delay to end.",
        "usher_pipeline_dead": "Items on the dead list.",
        "usher_pipeline_waiting_consumers": "Parked take long-polls (consumers waiting for an item).",
        "usher_pipeline_waiting_producers": "Parked push long-polls (producers waiting for room).",
        "usher_pipeline_paused": "1 while hand-outs are paused (PATCH paused), else 0.",
    ]

    static func write(
        _ samples: [ResourceSample], counts: [ResourceKind: Int], now: Timestamp, to out: inout PrometheusText
    ) {
        out.family("usher_resources", "gauge", "Resources that exist, by kind.")
        for kind in ResourceKind.allCases {
            out.sample("usher_resources", ["kind": kind.rawValue], Double(counts[kind] ?? 0))
        }

        // Gauges: one family per (kind, field), in the order first seen.
        var families: [String] = []
        var rows: [String: [(labels: [(key: String, value: String)], value: Double)]] = [:]
        for s in samples {
            for (field, value) in s.gauges {
                let name = gaugeName(s.kind, field)
                if rows[name] == nil { families.append(name) }
                rows[name, default: []].append((labels(s), Double(value)))
            }
        }
        for name in families {
            out.family(name, "gauge", gaugeHelp[name] ?? "Resource gauge (see docs/metrics.md).")
            for row in rows[name] ?? [] { out.sample(name, row.labels, row.value) }
        }

        out.family(
            "usher_resource_events_total", "counter",
            "Lifetime counts of the state routes' *_total fields, by kind, name and event (the field without _total).")
        for s in samples {
            for (event, value) in s.events {
                out.sample("usher_resource_events_total", labels(s) + [("event", event)], Double(value))
            }
        }

        out.family(
            "usher_resource_oldest_waiting_age_seconds", "gauge",
            "Age of the oldest waiting visitor (queues), queued item (windows), waiting fetcher (pools) or ready item (pipelines, since push); 0 when none."
        )
        for s in samples where s.kind != .machines && s.oldestKnown {
            let age = s.oldestSince.map { max(0, Double(now.micros - $0.micros) / 1_000_000) } ?? 0
            out.sample("usher_resource_oldest_waiting_age_seconds", labels(s), age)
        }

        out.family(
            "usher_resource_wait_seconds", "histogram",
            "Waits: entering the line to the grant (queues), to being shown (windows), fetch to lease (pools), push to first delivery (pipelines)."
        )
        for s in samples {
            guard let wait = s.wait else { continue }
            out.histogram(
                "usher_resource_wait_seconds", labels(s), bounds: WaitHistogram.bounds,
                counts: wait.buckets, sum: Double(wait.sumMicros) / 1_000_000)
        }

        let machines = samples.filter { $0.machine != nil }
        out.family("usher_machine_state", "gauge", "1 for each machine's current state (label state).")
        for s in machines { out.sample("usher_machine_state", labels(s) + [("state", s.machine!.state)], 1) }
        out.family("usher_machine_version", "gauge", "Each machine's version (its ETag; +1 per transition).")
        for s in machines { out.sample("usher_machine_version", labels(s), Double(s.machine!.version)) }
        out.family("usher_machine_state_age_seconds", "gauge", "Seconds since each machine entered its current state.")
        for s in machines {
            out.sample(
                "usher_machine_state_age_seconds", labels(s),
                max(0, Double(now.micros - s.machine!.enteredAt.micros) / 1_000_000))
        }
        out.family(
            "usher_machine_transactions_total", "counter",
            "Machine transactions ended, by outcome (committed, aborted, expired).")
        for s in machines {
            guard let counts = s.transactions else { continue }
            for (outcome, n) in [
                ("committed", counts.committed), ("aborted", counts.aborted), ("expired", counts.expired),
            ] {
                out.sample("usher_machine_transactions_total", labels(s) + [("outcome", outcome)], Double(n))
            }
        }
    }

    private static func labels(_ s: ResourceSample) -> [(key: String, value: String)] {
        [("kind", s.kind.rawValue), ("name", s.name)]
    }
}
