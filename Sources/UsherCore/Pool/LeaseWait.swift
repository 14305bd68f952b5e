// `GET /v1/pools/{p}/leases/{id}?wait`: a long-poll on one lease.

/// A finished long-poll on one lease: the lease, or why there is none
/// (boxed for the reason `VisitorWait` gives).
package final class LeaseWait: Sendable {
    private let answer: Result<Lease, PoolError>

    init(_ answer: Result<Lease, PoolError>) {
        self.answer = answer
    }

    /// The lease; throws what ended the wait (`notFound` when the lease was
    /// forgotten meanwhile, or was a waiting fetch that gave up; `gone`,
    /// `shuttingDown`).
    @inline(never)
    package func lease() throws(PoolError) -> Lease {
        try answer.get()
    }
}

extension LeasePool {
    /// `GET …/leases/{id}?wait`: the lease as soon as its status is not
    /// `status` (at once if it already differs, or is final), or as it is at
    /// `deadline`; as `VisitorQueue.parkForChange` does for a visitor.
    func parkForChange(id: String, from status: LeaseStatus, until deadline: Timestamp) async -> LeaseWait {
        // A finished lease never changes again: any status differs from `delayed`, so it answers at once.
        let from = status.liveStatus ?? .delayed
        return settle(await park(.visitor(id), until: .statusDiffers(from), deadline: deadline), id: id)
    }

    /// The lease the wait ended on, with its element's data as it is now.
    /// Out of line, so the views stay out of the parked frame.
    @inline(never)
    func settle(_ answer: QueueWaitAnswer, id: String) -> LeaseWait {
        do throws(QueueError) {
            return LeaseWait(.success(lease(try answer.visitor(id))))
        } catch {
            return LeaseWait(.failure(PoolError(error, lease: id)))
        }
    }
}
