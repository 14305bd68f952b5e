import UsherCore

/// A resource's `counts` object: live gauges and `*_total` lifetime counts,
/// by their wire names. `GET /metrics` reads the same list, so a count's
/// metric and its member in the state answer cannot drift apart.
struct CountsBody: Encodable {
    let members: [(name: String, value: Int)]

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: WireKey.self)
        for (name, value) in members { try container.encode(value, forKey: WireKey(name)) }
    }

    static func queue(_ c: QueueCounts) -> CountsBody {
        CountsBody(members: [
            ("waiting", c.waiting), ("holding", c.holding), ("delayed", c.delayed),
            ("enqueued_total", c.enqueuedTotal), ("granted_total", c.grantedTotal),
            ("completed_total", c.completedTotal), ("released_total", c.releasedTotal),
            ("expired_total", c.expiredTotal), ("cancelled_total", c.cancelledTotal),
            ("merged_total", c.mergedTotal), ("timed_out_total", c.timedOutTotal),
            ("abandoned_total", c.abandonedTotal), ("unclaimed_total", c.unclaimedTotal),
        ])
    }

    static func window(_ c: WindowCounts) -> CountsBody {
        CountsBody(members: [
            ("showing", c.showing), ("queued", c.queued), ("delayed", c.delayed),
            ("received_total", c.receivedTotal), ("shown_total", c.shownTotal),
            ("dismissed_total", c.dismissedTotal), ("expired_total", c.expiredTotal),
            ("merged_total", c.mergedTotal),
        ])
    }

    /// A pool's gauges (from its state) and totals.
    static func pool(_ state: PoolState) -> CountsBody {
        let c = state.counts
        return CountsBody(members: [
            ("available", state.available), ("leased", state.leased), ("waiting", state.waiting),
            ("fetched_total", c.fetchedTotal), ("recycled_total", c.recycledTotal),
            ("expired_total", c.expiredTotal), ("revoked_total", c.revokedTotal), ("grown_total", c.grownTotal),
            ("abandoned_total", c.abandonedTotal), ("unclaimed_total", c.unclaimedTotal),
        ])
    }

    /// A pipeline's gauges (from its state) and totals.
    static func pipeline(_ state: PipelineSnapshot) -> CountsBody {
        let c = state.counts
        return CountsBody(members: [
            ("ready", state.ready), ("in_flight", state.inFlight), ("delayed", state.delayed), ("dead", state.dead),
            ("waiting_consumers", state.waitingConsumers), ("waiting_producers", state.waitingProducers),
            ("pushed_total", c.pushedTotal), ("delivered_total", c.deliveredTotal),
            ("consumed_total", c.consumedTotal), ("filtered_total", c.filteredTotal),
            ("redelivered_total", c.redeliveredTotal), ("dead_total", c.deadTotal),
            ("dead_dropped_total", c.deadDroppedTotal), ("cancelled_total", c.cancelledTotal),
            ("extended_total", c.extendedTotal), ("deduplicated_total", c.deduplicatedTotal),
        ])
    }
}
