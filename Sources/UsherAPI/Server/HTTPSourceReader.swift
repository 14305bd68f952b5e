import Foundation
import HTTPClient
import UsherCore

/// A pipeline's `http` source: one `GET` per pull (docs/api.md, Pipelines). 200 with a JSON
/// body is the next item's payload; 204 means nothing yet (the pipeline backs
/// off); any other status, a body that is not JSON (or nested deeper than
/// `max_json_depth`), a timeout or a refused
/// connection is an error, counted in the pipeline's state, and the pipeline
/// backs off and tries again. Redirects are not followed.
///
/// Whether the URL may leave loopback was decided when the config was parsed
/// (`PipelineSourceConfig.parse`, `allow_remote_sources`); `localhost` is
/// resolved to 127.0.0.1 and ::1 without asking the system resolver.
struct HTTPSourceReader: PipelineSourceReader {
    /// The source's URL.
    let url: String
    /// The longest one pull may take, connect to last byte.
    let timeoutSeconds: Double
    /// Longer bodies are refused (an error, like any other).
    let maxBodyBytes: Int
    /// Bodies nested deeper are refused likewise (`max_json_depth`).
    let maxDepth: Int

    /// How long one pull may take by default.
    static let defaultTimeoutSeconds = 10.0

    func next() async throws -> SourcePull {
        let status: Int
        let body: [UInt8]
        do {
            (status, body) = try await HTTPClient.get(
                url: url, timeoutSeconds: timeoutSeconds, maxBodyBytes: maxBodyBytes)
        } catch {
            throw SourceError(message: "GET \(url): \(error)")
        }
        switch status {
        case 200:
            do throws(JSONSyntaxError) {
                return .item(try JSONValue.parse(Data(body), maxDepth: maxDepth))
            } catch {
                let what = error.isTooDeep ? "nests too deep" : "is not JSON"
                throw SourceError(message: "GET \(url): 200 with a body that \(what) (\(error.message))")
            }
        case 204:
            return .nothing
        default:
            throw SourceError(message: "GET \(url): HTTP \(status) (expected 200 with an item or 204)")
        }
    }

    /// A factory for `http` sources; other kinds are not its business.
    static func factory(
        maxBodyBytes: Int, maxDepth: Int, timeoutSeconds: Double = defaultTimeoutSeconds
    ) -> SourceReaderFactory {
        { config in
            guard case .http(let url) = config.kind else {
                throw SourceError(message: "not an http source")
            }
            return HTTPSourceReader(
                url: url, timeoutSeconds: timeoutSeconds, maxBodyBytes: maxBodyBytes, maxDepth: maxDepth)
        }
    }
}
