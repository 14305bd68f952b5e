import Answers

/// A pipeline, whichever backend holds it: what the routes call. `Pipeline`
/// keeps it in memory and answers at once; a Redis-backed pipeline answers
/// after a round trip. Operations mean what `PipelineEngine`'s do.
package protocol PipelineService: AnyObject, Sendable {
    var name: String { get }
    /// The config: creation filters, patches applied.
    func readConfig() -> Pending<PipelineConfig, PipelineError>
    func pushItem(_ request: PipelinePushRequest) -> Pending<PipelinePushResult, PipelineError>
    func pushItems(_ requests: [PipelinePushRequest]) -> Pending<[PipelinePushResult], PipelineError>
    func takeItems(max: Int, ackSeconds: Double?) -> Pending<[PipelineDelivery], PipelineError>
    func consumeItem(_ id: String, fence: Int64?) -> Pending<PipelineItem, PipelineError>
    func releaseItem(_ id: String, delaySeconds: Double?, fence: Int64?) -> Pending<PipelineItem, PipelineError>
    func extendItem(_ id: String, ackSeconds: Double?, fence: Int64?) -> Pending<PipelineItem, PipelineError>
    func cancelItem(_ id: String) -> Pending<PipelineItem, PipelineError>
    func readItem(_ id: String) -> Pending<PipelineItem, PipelineError>
    func readState(limit: Int, after cursor: PipelineCursor?) -> Pending<PipelineSnapshot, PipelineError>
    func readDead(limit: Int, after cursor: PipelineCursor?) -> Pending<PipelineDeadPage, PipelineError>
    /// Moves dead items back while there is room: how many moved, how many are left.
    func redriveDead() -> Pending<(moved: Int, dead: Int), PipelineError>
    func applyPatch(_ patch: PipelinePatch) -> Pending<PipelineConfig, PipelineError>
    /// The filters that run now.
    func readFilters() -> Pending<PipelineFilters, PipelineError>
    /// True when the filter is new.
    func storeFilter(name: String, _ filter: PipelineFilter) -> Pending<Bool, PipelineError>
    func dropFilter(name: String) -> Pending<Void, PipelineError>
    /// The answer that handed out these items never reached its consumer:
    /// each still in flight under its fence goes back without counting.
    func undeliverItems(_ deliveries: [(id: String, fence: Int64)])
    /// `POST …/take?wait`: items once there are some, or `[]` at `deadline`
    /// (or when the task is cancelled).
    func parkTake(max: Int, ackSeconds: Double?, until deadline: Timestamp) async throws(PipelineError)
        -> [PipelineDelivery]
    /// `GET …/items/{id}?wait`: the item once it has moved from `earlier`'s
    /// status and delivery (`PipelineItem.hasMoved`), or as it is at `deadline`.
    func parkUntilChange(id: String, from earlier: PipelineItem, until deadline: Timestamp) async throws(PipelineError)
        -> PipelineItem
    /// `POST …/items?wait` on a full pipeline: the push once there is room, or `.full` at `deadline`.
    func parkPush(_ request: PipelinePushRequest, until deadline: Timestamp) async throws(PipelineError)
        -> PipelinePushResult
}

/// A page of the dead list, oldest first, and how many items it holds.
package struct PipelineDeadPage: Sendable, Hashable {
    package var dead: Int
    package var items: [PipelineItem]
    /// Where the page resumes after each item.
    package var cursors: [String]
    package var more: Bool

    package init(dead: Int, items: [PipelineItem], cursors: [String], more: Bool) {
        self.dead = dead
        self.items = items
        self.cursors = cursors
        self.more = more
    }
}

extension Pipeline: PipelineService {
    package nonisolated func readConfig() -> Pending<PipelineConfig, PipelineError> {
        .ready(.success(withIsolation { $0.config }))
    }

    package nonisolated func pushItem(_ request: PipelinePushRequest) -> Pending<PipelinePushResult, PipelineError> {
        .now { () throws(PipelineError) in try withIsolation { p throws(PipelineError) in try p.push(request) } }
    }

    package nonisolated func pushItems(_ requests: [PipelinePushRequest]) -> Pending<
        [PipelinePushResult], PipelineError
    > {
        .now { () throws(PipelineError) in try withIsolation { p throws(PipelineError) in try p.pushBatch(requests) } }
    }

    package nonisolated func takeItems(max: Int, ackSeconds: Double?) -> Pending<[PipelineDelivery], PipelineError> {
        .now { () throws(PipelineError) in
            try withIsolation { p throws(PipelineError) in try p.take(max: max, ackSeconds: ackSeconds) }
        }
    }

    package nonisolated func consumeItem(_ id: String, fence: Int64?) -> Pending<PipelineItem, PipelineError> {
        .now { () throws(PipelineError) in
            try withIsolation { p throws(PipelineError) in try p.consume(id, fence: fence) }
        }
    }

    package nonisolated func releaseItem(_ id: String, delaySeconds: Double?, fence: Int64?) -> Pending<
        PipelineItem, PipelineError
    > {
        .now { () throws(PipelineError) in
            try withIsolation { p throws(PipelineError) in try p.release(id, delaySeconds: delaySeconds, fence: fence) }
        }
    }

    package nonisolated func extendItem(_ id: String, ackSeconds: Double?, fence: Int64?) -> Pending<
        PipelineItem, PipelineError
    > {
        .now { () throws(PipelineError) in
            try withIsolation { p throws(PipelineError) in try p.extend(id, ackSeconds: ackSeconds, fence: fence) }
        }
    }

    package nonisolated func cancelItem(_ id: String) -> Pending<PipelineItem, PipelineError> {
        .now { () throws(PipelineError) in try withIsolation { p throws(PipelineError) in try p.cancel(id) } }
    }

    package nonisolated func readItem(_ id: String) -> Pending<PipelineItem, PipelineError> {
        .now { () throws(PipelineError) in try withIsolation { p throws(PipelineError) in try p.item(id) } }
    }

    package nonisolated func readState(limit: Int, after cursor: PipelineCursor?) -> Pending<
        PipelineSnapshot, PipelineError
    > {
        .ready(.success(withIsolation { $0.state(limit: limit, after: cursor) }))
    }

    package nonisolated func readDead(limit: Int, after cursor: PipelineCursor?) -> Pending<
        PipelineDeadPage, PipelineError
    > {
        .ready(
            .success(
                withIsolation { p in
                    let page = p.deadPage(limit: limit, after: cursor)
                    return PipelineDeadPage(
                        dead: p.engine.deadCount, items: page.items, cursors: page.cursors, more: page.more)
                }))
    }

    package nonisolated func redriveDead() -> Pending<(moved: Int, dead: Int), PipelineError> {
        .now { () throws(PipelineError) in
            try withIsolation { p throws(PipelineError) in (try p.redrive(), p.engine.deadCount) }
        }
    }

    package nonisolated func applyPatch(_ patch: PipelinePatch) -> Pending<PipelineConfig, PipelineError> {
        .now { () throws(PipelineError) in try withIsolation { p throws(PipelineError) in try p.apply(patch) } }
    }

    package nonisolated func readFilters() -> Pending<PipelineFilters, PipelineError> {
        .ready(.success(withIsolation { $0.engine.filters }))
    }

    package nonisolated func storeFilter(name: String, _ filter: PipelineFilter) -> Pending<Bool, PipelineError> {
        .now { () throws(PipelineError) in
            try withIsolation { p throws(PipelineError) in try p.putFilter(name: name, filter) }
        }
    }

    package nonisolated func dropFilter(name: String) -> Pending<Void, PipelineError> {
        .now { () throws(PipelineError) in
            try withIsolation { p throws(PipelineError) in try p.removeFilter(name: name) }
        }
    }

    package nonisolated func undeliverItems(_ deliveries: [(id: String, fence: Int64)]) {
        withIsolation { _ = $0.undeliver(deliveries) }
    }

    package func parkTake(max: Int, ackSeconds: Double?, until deadline: Timestamp) async throws(PipelineError)
        -> [PipelineDelivery]
    {
        try await takeWaiting(max: max, ackSeconds: ackSeconds, until: deadline)
    }

    package func parkPush(_ request: PipelinePushRequest, until deadline: Timestamp) async throws(PipelineError)
        -> PipelinePushResult
    {
        try await pushWaiting(request, until: deadline)
    }

    package func parkUntilChange(id: String, from earlier: PipelineItem, until deadline: Timestamp)
        async throws(PipelineError) -> PipelineItem
    {
        try await waitForChange(id: id, from: earlier, until: deadline)
    }
}
