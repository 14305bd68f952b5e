/// A pipeline's state at one moment, as `GET /v1/pipelines/{name}` shows it.
public struct PipelineSnapshot: Sendable, Equatable {
    /// The pipeline's name.
    public var name: String
    /// The config (creation filters; patches applied).
    public var config: PipelineConfig
    /// The current capacity.
    public var capacity: Int
    /// Items waiting to be handed out.
    public var ready: Int
    /// Items handed out, not yet consumed or released.
    public var inFlight: Int
    /// Items waiting for their delay to end.
    public var delayed: Int
    /// Items on the dead list.
    public var dead: Int
    /// The latest fence handed out.
    public var fence: Int64
    /// Parked `takeWaiting` and `pushWaiting` calls.
    public var waitingConsumers: Int
    /// Parked `pushWaiting` calls.
    public var waitingProducers: Int
    /// The live filters, in the order they run.
    public var filters: PipelineFilters
    /// The first ready items in hand-out order (stored payloads).
    public var items: [PipelineItem]
    /// Where the page resumes after each listed item; not part of the JSON.
    public var cursors: [String] = []
    /// True when more ready items follow the last one listed.
    public var more = false
    /// Where the next page starts (`next_cursor`), or nil on the last page.
    public var nextCursor: String?
    /// Running totals.
    public var counts: PipelineCounts
    /// Nil when the pipeline has no source.
    public var source: PipelineSourceStatus?
}
