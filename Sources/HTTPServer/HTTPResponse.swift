import Answers
import Foundation

/// A complete response: status, headers and body.
package struct HTTPResponse: Sendable {
    /// The status code, e.g. 200.
    package var status: Int
    /// Extra headers, in order. `Content-Type` goes here too.
    var headers: [(name: String, value: String)]
    /// The body bytes.
    package var body: [UInt8]
    /// Called when this answer to a deferred request could not be handed to
    /// its client (the client hung up first, or libmicrohttpd reported the
    /// answer failed): undoes what the answer gave away (a grant, a lease,
    /// a delivery).
    package var undelivered: (@Sendable () -> Void)?

    package init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A response with a UTF-8 text body and the given content type.
    package init(status: Int, contentType: String, text: String, headers: [(name: String, value: String)] = []) {
        self.status = status
        self.headers = [("Content-Type", contentType)] + headers
        self.body = Array(text.utf8)
    }
}

/// An answer to a request: ready now, on the server thread (no
/// suspend/resume); later, the connection suspended (no server thread held)
/// while the work runs as a task, which a hang-up while parked cancels (the
/// work should withdraw what it waits for and return at once); or handed
/// back, the connection suspended and the work started with the function to
/// answer through (once, from any thread, e.g. the one that read a Redis
/// reply), for work that waits on nothing else: a hang-up cannot cancel it.
package typealias HTTPAnswer = Pending<HTTPResponse, Never>

/// What a handler does with a request.
package enum HTTPHandlerResult: Sendable {
    /// Answer with a complete response. `finished`, when given, sees a
    /// response that comes later first, synchronously (metrics, logs: a
    /// callback instead of another async wrapper, whose frame a parked
    /// request would carry for as long as it waits).
    case answer(HTTPAnswer, finished: (@Sendable (HTTPResponse) -> Void)? = nil)
    /// Answer with a body written over time (e.g. Server-Sent Events): the
    /// connection is suspended whenever the stream has nothing buffered.
    case stream(HTTPStream)

    /// Answer `response` now.
    package static func respond(_ response: HTTPResponse) -> HTTPHandlerResult {
        .answer(.ready(.success(response)))
    }

    /// Answer with what `work` returns, the connection parked meanwhile.
    package static func deferred(_ work: @escaping @Sendable () async -> HTTPResponse) -> HTTPHandlerResult {
        .answer(.later { .success(await work()) })
    }

    /// The response when it is ready now.
    package var immediate: HTTPResponse? {
        guard case .answer(.ready(.success(let response)), _) = self else { return nil }
        return response
    }

    /// True for an answer that comes after the handler returns.
    package var isDeferred: Bool {
        switch self {
        case .answer(.ready, _), .stream: false
        case .answer(.later, _), .answer(.handedBack, _): true
        }
    }

    /// `self` with `observer` also told the response of a deferred answer
    /// (after any earlier observer); other results are returned as they are.
    package func observingDeferred(_ observer: @escaping @Sendable (HTTPResponse) -> Void) -> HTTPHandlerResult {
        guard isDeferred, case .answer(let answer, let earlier) = self else { return self }
        guard let earlier else { return .answer(answer, finished: observer) }
        return .answer(
            answer,
            finished: { response in
                earlier(response)
                observer(response)
            })
    }

    /// The response, awaited when it comes later (`finished` told first).
    package func response(orForAStream refusal: @autoclosure () -> HTTPResponse) async -> HTTPResponse {
        switch self {
        case .answer(.ready(let result), _): return result.get()
        case .answer(let answer, let finished):
            let response = await answer.result().get()
            finished?(response)
            return response
        case .stream: return refusal()
        }
    }
}

/// The application side of the server.
package protocol HTTPHandler: Sendable {
    /// Called on a server thread once the whole body has arrived.
    /// Must not block: answer later (`.answer(.later…)`) for anything that waits.
    func handle(_ request: HTTPRequest) -> HTTPHandlerResult

    /// The answer to a request refused before routing (a malformed head or
    /// framing, a body over the limit); the server closes the connection after it.
    func refusal(_ refusal: HTTPRefusal) -> HTTPResponse

    /// The answer to a request that sent `Expect: 100-continue`, when it is
    /// refused whatever its body (access, routing), or nil to let the body
    /// come. Called with the head only (`body` empty), before libmicrohttpd
    /// would answer `100 Continue`; the server closes the connection after it.
    func refusalBeforeBody(_ request: HTTPRequest) -> HTTPResponse?
}

extension HTTPHandler {
    /// A plain-text refusal, for handlers that need no other.
    func refusal(_ refusal: HTTPRefusal) -> HTTPResponse {
        let detail =
            switch refusal {
            case .badRequest(let reason), .notImplemented(let reason), .uriTooLong(let reason),
                .headerFieldsTooLarge(let reason):
                reason
            case .payloadTooLarge(let limit): "request bodies are limited to \(limit) bytes"
            }
        return HTTPResponse(status: refusal.status, contentType: "text/plain", text: detail)
    }

    /// No request is refused before its body, for handlers that need no check.
    func refusalBeforeBody(_ request: HTTPRequest) -> HTTPResponse? { nil }
}
