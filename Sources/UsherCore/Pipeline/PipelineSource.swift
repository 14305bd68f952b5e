/// What one pull from a source gave.
package enum SourcePull: Sendable, Equatable {
    /// The next item's payload.
    case item(JSONValue)
    /// Nothing yet (HTTP 204): back off and try again later.
    case nothing
    /// The source has ended (end of file): it is not pulled again.
    case exhausted
}

/// A passive producer (the seed's `RPipelineInputProtocol`): the pipeline
/// calls `next()` when it runs low, one call at a time. The core does no
/// networking: the HTTP reader lives in another target and comes in through a
/// `SourceReaderFactory`.
///
/// A thrown `SourceRecordError` means one record was bad and skipped: it is
/// counted and the next pull follows at once. Any other error is counted and
/// the pipeline backs off. Errors are never fatal.
package protocol PipelineSourceReader: Sendable {
    /// The next pull.
    func next() async throws -> SourcePull
}

/// Makes the reader for a pipeline's source. Thrown errors are counted like
/// pull errors, and the pipeline tries again after a back-off.
package typealias SourceReaderFactory = @Sendable (PipelineSourceConfig) throws -> any PipelineSourceReader

/// One record of a source was bad (malformed JSON, an over-long line) and
/// was skipped; the reader can go on at once.
struct SourceRecordError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong.
    package var message: String
    /// An error with this message.
    init(message: String) { self.message = message }
    /// The message.
    package var description: String { message }
}

/// A source failure other than one bad record (a missing file, a path that
/// leaves `data_dir`, an unreachable server).
package struct SourceError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong.
    package var message: String
    /// An error with this message.
    package init(message: String) { self.message = message }
    /// The message.
    package var description: String { message }
}

/// Readers for the source kinds.
package enum PipelineSources {
    /// A factory that reads `file` sources under `dataDir` itself and hands
    /// `http` sources to `http` (an error when there is none).
    ///
    /// - Parameters:
    ///   - maxLineBytes: longer lines are skipped and counted as errors
    ///     (use `max_body_bytes`).
    ///   - maxDepth: lines nested deeper are skipped likewise (`max_json_depth`).
    package static func factory(
        dataDir: String, maxLineBytes: Int = 65_536, maxDepth: Int = JSONLimits().maxDepth,
        http: SourceReaderFactory? = nil
    ) -> SourceReaderFactory {
        { config in
            switch config.kind {
            case .file(let path):
                return FileSource(path: path, dataDir: dataDir, maxLineBytes: maxLineBytes, maxDepth: maxDepth)
            case .http:
                guard let http else { throw SourceError(message: "http sources are not available") }
                return try http(config)
            }
        }
    }
}

/// A source's state as `GET` shows it.
package struct PipelineSourceStatus: Sendable, Hashable {
    /// The configured source.
    package var config: PipelineSourceConfig
    /// Items pulled.
    package var pulledTotal = 0
    /// Failed pulls and skipped records.
    package var errorsTotal = 0
    /// The latest error's message.
    package var lastError: String?
    /// The source ended; it is not pulled again.
    package var exhausted = false
    /// While backing off: when the next pull may start.
    package var nextRetryAt: Timestamp?

    /// A source that has not been pulled yet.
    init(config: PipelineSourceConfig) {
        self.config = config
    }
}
