/// A pipeline's state at one moment, as `GET /v1/pipelines/{name}` shows it.
package struct PipelineSnapshot: Sendable, Hashable {
    /// The pipeline's name.
    package var name: String
    /// The config (creation filters; patches applied).
    package var config: PipelineConfig
    /// The current capacity.
    package var capacity: Int
    /// Items waiting to be handed out.
    package var ready: Int
    /// Items handed out, not yet consumed or released.
    package var inFlight: Int
    /// Items waiting for their delay to end.
    package var delayed: Int
    /// Items on the dead list.
    package var dead: Int
    /// Hand-outs are stopped (`PATCH {"paused": true}`).
    package var paused = false
    /// The latest fence handed out.
    package var fence: Int64
    /// Parked `takeWaiting` and `pushWaiting` calls.
    package var waitingConsumers: Int
    /// Parked `pushWaiting` calls.
    package var waitingProducers: Int
    /// The live filters, in the order they run.
    package var filters: PipelineFilters
    /// The first ready items in hand-out order (stored payloads).
    package var items: [PipelineItem]
    /// Where the page resumes after each listed item; not part of the JSON.
    package var cursors: [String] = []
    /// True when more ready items follow the last one listed.
    package var more = false
    /// Where the next page starts (`next_cursor`), or nil on the last page.
    package var nextCursor: String?
    /// Running totals.
    package var counts: PipelineCounts
    /// Nil when the pipeline has no source.
    package var source: PipelineSourceStatus?
}
