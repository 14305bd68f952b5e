import HTTPServer
import UsherCore

/// An error as the client sees it: an HTTP status and a stable machine code,
/// rendered as RFC 9457 problem details (`application/problem+json`).
package struct APIError: Error, Sendable {
    /// The HTTP status.
    package var status: Int
    /// The stable machine code, e.g. `queue_full`.
    var code: String
    /// A short human title for the code.
    package var title: String
    /// What happened in this case.
    package var detail: String
    /// Extra members that help the client (e.g. `current_status`).
    var extra: [(String, JSONValue)] = []
    /// Extra response headers (e.g. `Retry-After`, `Allow`).
    package var headers: [(name: String, value: String)] = []
    /// For a 404 of a resource this process does not know: its kind and name,
    /// so that it can be looked up in Redis once before the 404 stands.
    var unknownResource: (kind: ResourceKind, name: String)?

    init(
        status: Int, code: String, title: String, detail: String,
        extra: [(String, JSONValue)] = [], headers: [(name: String, value: String)] = []
    ) {
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.extra = extra
        self.headers = headers
    }

    /// The HTTP response carrying the problem.
    package var response: HTTPResponse {
        HTTPResponse(
            status: status, headers: [("Content-Type", "application/problem+json")] + Reply.unstored + headers,
            body: Wire.bytes(ProblemBody(self)))
    }
}

// The error table: every code the API answers with, in one place.
extension APIError {
    static func badRequest(_ detail: String, field: String? = nil) -> APIError {
        APIError(
            status: 400, code: "bad_request", title: "Bad request", detail: detail,
            extra: field.map { [("field", JSONValue.string($0))] } ?? [])
    }
    static func unauthorized() -> APIError {
        APIError(
            status: 401, code: "unauthorized", title: "Unauthorized",
            detail: "this server requires Authorization: Bearer <token>",
            headers: [("WWW-Authenticate", "Bearer")])
    }
    static func originNotAllowed(_ origin: String) -> APIError {
        APIError(
            status: 403, code: "origin_not_allowed", title: "Origin not allowed",
            detail: "requests from pages at \(origin) are not allowed (allowed_origins)")
    }
    static func hostNotAllowed(_ host: String) -> APIError {
        APIError(
            status: 421, code: "host_not_allowed", title: "Host not allowed",
            detail: "Host \(host) is not served here (allowed_hosts)")
    }
    static func notFound(_ detail: String) -> APIError {
        APIError(status: 404, code: "not_found", title: "Not found", detail: detail)
    }
    static func methodNotAllowed(_ method: String, allowed: [String]) -> APIError {
        APIError(
            status: 405, code: "method_not_allowed", title: "Method not allowed",
            detail: "\(method) is not allowed here; allowed: \(allowed.joined(separator: ", "))",
            headers: [("Allow", allowed.joined(separator: ", "))])
    }
    static func conflict(_ code: String, _ title: String, _ detail: String, extra: [(String, JSONValue)] = [])
        -> APIError
    {
        APIError(status: 409, code: code, title: title, detail: detail, extra: extra)
    }
    static func alreadyExists(_ kind: String, _ name: String) -> APIError {
        conflict(
            "already_exists", "Already exists",
            "\(kind) \(name) exists with a different config; change it with PATCH or delete it first")
    }
    static func gone(_ detail: String) -> APIError {
        APIError(status: 410, code: "gone", title: "Gone", detail: detail)
    }
    static func preconditionFailed(_ detail: String, extra: [(String, JSONValue)] = []) -> APIError {
        APIError(status: 412, code: "precondition_failed", title: "Precondition failed", detail: detail, extra: extra)
    }
    static func payloadTooLarge(limit: Int) -> APIError {
        APIError(
            status: 413, code: "payload_too_large", title: "Payload too large",
            detail: "request bodies are limited to \(limit) bytes (max_body_bytes)")
    }
    static func uriTooLong(_ detail: String) -> APIError {
        APIError(status: 414, code: "uri_too_long", title: "URI too long", detail: detail)
    }
    static func headerFieldsTooLarge(_ detail: String) -> APIError {
        APIError(status: 431, code: "header_fields_too_large", title: "Request header fields too large", detail: detail)
    }
    /// 429 `too_many_resources`: `limit` resources exist `counted` (e.g. " in Redis").
    static func tooManyResources(limit: Int, counted: String) -> APIError {
        tooMany(
            "too_many_resources", "Too many resources",
            "at most \(limit) resources may exist\(counted) (max_resources)", retryAfter: nil)
    }
    static func tooMany(_ code: String, _ title: String, _ detail: String, retryAfter: Int?) -> APIError {
        APIError(
            status: 429, code: code, title: title, detail: detail,
            extra: retryAfter.map { [("retry_after_seconds", JSONValue.int($0))] } ?? [],
            headers: retryAfter.map { [("Retry-After", String($0))] } ?? [])
    }
    static func notImplemented(_ detail: String) -> APIError {
        APIError(status: 501, code: "not_implemented", title: "Not implemented", detail: detail)
    }
    static func storageFull(_ full: StorageFull) -> APIError {
        APIError(
            status: 507, code: "storage_full", title: "Storage full",
            detail: "\(full.description); delete something or raise max_stored_bytes",
            extra: [
                ("used_bytes", .int(full.used)), ("limit_bytes", .int(full.limit)),
                ("requested_bytes", .int(full.requested)),
            ])
    }
    /// `max_event_subscribers` event streams are open.
    static func tooManySubscribers(limit: Int) -> APIError {
        APIError(
            status: 503, code: "too_many_subscribers", title: "Too many event streams",
            detail: "\(limit) event streams are open (max_event_subscribers)",
            extra: [("retry_after_seconds", .int(1))], headers: [("Retry-After", "1")])
    }
    static func shuttingDown() -> APIError {
        APIError(
            status: 503, code: "shutting_down", title: "Shutting down",
            detail: "the server is shutting down", headers: [("Connection", "close")])
    }
    /// Redis (the backend of the resource) did not answer in time: retry shortly.
    static func backendUnavailable(_ why: String) -> APIError {
        APIError(
            status: 503, code: "backend_unavailable", title: "Backend unavailable",
            detail: "the resource's backend (Redis) is unavailable: \(why)", headers: [("Retry-After", "1")])
    }
    static func internalError(_ detail: String) -> APIError {
        APIError(status: 500, code: "internal_error", title: "Internal error", detail: detail)
    }
}
