/// What `GET /metrics` reads from the managers at scrape time: nothing here
/// runs on the request path.
extension WindowSlot {
    /// When the item that has been queued longest entered the queue.
    package var oldestWaitingSince: Timestamp? { engine.oldestWaitingSince }
    /// Waits from entering the queue to being shown.
    package var waitHistogram: WaitHistogram { engine.waitHistogram }
}

extension LeasePool {
    /// When the fetcher that has waited longest started waiting.
    package var oldestWaitingSince: Timestamp? { engine.oldestWaitingSince }
    /// Waits from the fetch to the lease (immediate leases count as 0).
    package var waitHistogram: WaitHistogram { engine.waitHistogram }
}

extension VisitorQueue {
    /// Waits from entering the line to the grant.
    package var waitHistogram: WaitHistogram { engine.waitHistogram }
}

extension Pipeline {
    /// Waits from push to first delivery.
    package var waitHistogram: WaitHistogram { engine.waitHistogram }
    /// When the ready item pushed longest ago was pushed (a scan of the
    /// items: scrape time only).
    package var oldestReadySince: Timestamp? { engine.oldestReadySince }
}
