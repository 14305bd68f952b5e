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

/// What a handler does with a request.
package enum HTTPHandlerResult: Sendable {
    /// Answer now, on the server thread (no suspend/resume).
    case respond(HTTPResponse)
    /// Answer later: the connection is suspended (no server thread is held)
    /// while the work runs as a task, then resumed with its response. When the
    /// client hangs up while parked, the task is cancelled: the work should
    /// withdraw what it waits for and return at once.
    /// `finished`, when given, sees the response first, synchronously (metrics,
    /// logs: a callback instead of another async wrapper, whose frame a parked
    /// request would carry for as long as it waits).
    case deferred(@Sendable () async -> HTTPResponse, finished: (@Sendable (HTTPResponse) -> Void)? = nil)
    /// Answer later without a task: the connection is suspended, then `start`
    /// is called with the function to answer through (once, from any thread),
    /// e.g. straight from the thread that read a Redis reply. For work that
    /// does not wait on anything else: a hang-up cannot cancel it. `finished`
    /// as for `.deferred`.
    case handedOver(
        _ start: @Sendable (@escaping @Sendable (HTTPResponse) -> Void) -> Void,
        finished: (@Sendable (HTTPResponse) -> Void)? = nil)

    /// True for an answer that comes after the handler returns.
    package var isDeferred: Bool {
        switch self {
        case .deferred, .handedOver: true
        case .respond, .stream: false
        }
    }

    /// `self` with `observer` also told the response of a deferred answer
    /// (after any earlier observer); other results are returned as they are.
    package func observingDeferred(_ observer: @escaping @Sendable (HTTPResponse) -> Void) -> HTTPHandlerResult {
        func both(_ earlier: (@Sendable (HTTPResponse) -> Void)?) -> @Sendable (HTTPResponse) -> Void {
            guard let earlier else { return observer }
            return { response in
                earlier(response)
                observer(response)
            }
        }
        switch self {
        case .deferred(let work, let earlier): return .deferred(work, finished: both(earlier))
        case .handedOver(let start, let earlier): return .handedOver(start, finished: both(earlier))
        case .respond, .stream: return self
        }
    }
    /// Answer with a body written over time (e.g. Server-Sent Events): the
    /// connection is suspended whenever the stream has nothing buffered.
    case stream(HTTPStream)
}

/// The application side of the server.
package protocol HTTPHandler: Sendable {
    /// Called on a server thread once the whole body has arrived.
    /// Must not block: return `.deferred` for anything that waits.
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
