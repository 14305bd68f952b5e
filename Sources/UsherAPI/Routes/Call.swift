import Answers
import Foundation
import HTTPServer
import UsherCore

/// One routed request with its path parameters, and the parsing every route
/// shares: names, query parameters (unknown ones are 400) and the JSON body.
package struct Call: Sendable {
    /// The request.
    package let request: HTTPRequest
    /// Path parameters by name.
    package let parameters: PathParameters
    /// The application serving it.
    let app: UsherApp

    var maxWaitSeconds: Double { app.config.maxWaitSeconds }

    /// A path parameter that must be a valid name, else 400.
    package func name(_ parameter: String) throws(APIError) -> String {
        let value = parameters[parameter] ?? ""
        guard Names.isValid(value) else {
            throw APIError.badRequest(
                "'\(value)' is not a valid name (^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$)", field: parameter)
        }
        return value
    }

    /// The query parameters, checked against the ones this route accepts (a
    /// handful: a scan of a list, no hashing).
    package func query(allowing allowed: [String]) throws(APIError) -> Query {
        var values: [String: String] = [:]
        for (name, value) in request.query {
            guard allowed.contains(name) else {
                let accepted = allowed.isEmpty ? "none" : allowed.sorted().joined(separator: ", ")
                throw APIError.badRequest("unknown query parameter '\(name)' (accepted: \(accepted))", field: name)
            }
            guard values[name] == nil else {
                throw APIError.badRequest("query parameter '\(name)' given twice", field: name)
            }
            values[name] = value
        }
        return Query(values: values, maxWaitSeconds: maxWaitSeconds)
    }

    /// The body as a JSON object reader; an empty body reads as `{}`.
    package func body() throws(APIError) -> FieldReader {
        let value = try bodyValue()
        do throws(FieldError) { return try FieldReader(value) } catch { throw APIError(error) }
    }

    /// Reads the body with `read`, then rejects any member `read` did not ask
    /// for; a field error becomes a 400 naming the field.
    func readBody<T>(_ read: (inout FieldReader) throws(FieldError) -> T) throws(APIError) -> T {
        var reader = try body()
        do throws(FieldError) {
            let value = try read(&reader)
            try reader.finish()
            return value
        } catch { throw APIError(error) }
    }

    /// The body as JSON (at most `max_json_depth` deep), or nil when empty.
    func bodyValue() throws(APIError) -> JSONValue? {
        let blank = request.body.withUnsafeBytes { bytes in
            bytes.allSatisfy { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }
        }
        if blank { return nil }
        do throws(JSONSyntaxError) {
            return try JSONValue.parse(request.body, maxDepth: app.config.jsonLimits.maxDepth)
        } catch { throw APIError(error) }
    }
}

/// Checked query parameters.
package struct Query: Sendable {
    let values: [String: String]
    let maxWaitSeconds: Double

    /// The raw value.
    package subscript(name: String) -> String? { values[name] }

    /// `wait=S` in seconds, capped at `max_wait_seconds`; nil when absent or 0.
    func wait() throws(APIError) -> Double? {
        guard let raw = values["wait"] else { return nil }
        guard let s = Double(raw), s.isFinite, s >= 0 else {
            throw APIError.badRequest("wait must be a number of seconds >= 0", field: "wait")
        }
        let capped = min(s, maxWaitSeconds)
        return capped > 0 ? capped : nil
    }

    /// `on_disconnect`: what a client's hang-up (or an answer that never
    /// reaches it) takes back. `withdraw` (the default) or `keep`.
    func onDisconnect() throws(APIError) -> DisconnectPolicy {
        guard let raw = values["on_disconnect"] else { return .withdraw }
        guard let policy = DisconnectPolicy(rawValue: raw) else {
            throw APIError.badRequest("on_disconnect must be withdraw or keep", field: "on_disconnect")
        }
        return policy
    }

    /// `on_timeout`: what becomes of a visitor still waiting when its
    /// request's wait ends. `keep` (the default) or `cancel`.
    func onTimeout() throws(APIError) -> TimeoutPolicy {
        guard let raw = values["on_timeout"] else { return .keep }
        guard let policy = TimeoutPolicy(rawValue: raw) else {
            throw APIError.badRequest("on_timeout must be keep or cancel", field: "on_timeout")
        }
        return policy
    }

    /// An integer parameter within `range`.
    package func int(_ name: String, in range: ClosedRange<Int>) throws(APIError) -> Int? {
        guard let raw = values[name] else { return nil }
        guard let i = Int(raw), range.contains(i) else {
            throw APIError.badRequest(
                "\(name) must be an integer between \(range.lowerBound) and \(range.upperBound)", field: name)
        }
        return i
    }

    /// A boolean parameter (`true` or `false`).
    package func bool(_ name: String) throws(APIError) -> Bool? {
        guard let raw = values[name] else { return nil }
        switch raw {
        case "true", "1": return true
        case "false", "0": return false
        default: throw APIError.badRequest("\(name) must be true or false", field: name)
        }
    }
}

/// What a client that hangs up keeps (`on_disconnect`).
enum DisconnectPolicy: String, Sendable {
    /// Nothing: its wait is withdrawn (a visitor cancelled, a fetch, take or
    /// push dropped), and what an answer it never got gave away is taken back.
    case withdraw
    /// What it had: a hang-up only ends the wait, and an answer it never got stands.
    case keep
}

/// What a wait that ends before its visitor is granted leaves (`on_timeout`).
enum TimeoutPolicy: String, Sendable {
    /// The visitor: it stays in line, as after any wait that ended.
    case keep
    /// Nothing: the visitor is cancelled, reason `timeout` (a try-acquire).
    case cancel
}

extension HTTPResponse {
    /// `self`, with `undo` run when the server could not hand it to its client
    /// (see `HTTPResponse.undelivered`).
    func undoing(_ undo: @escaping @Sendable () -> Void) -> HTTPResponse {
        var response = self
        response.undelivered = undo
        return response
    }
}

/// JSON responses.
enum Reply {
    /// An answer without a validator: no cache may keep it (a state changes
    /// with every request and with time, and could not be checked again).
    static let unstored: [(name: String, value: String)] = [("Cache-Control", "no-store")]
    /// An answer with an `ETag`: a cache may keep it, and must check it
    /// (`If-None-Match`) before each use.
    static let validated: [(name: String, value: String)] = [("Cache-Control", "no-cache")]
    private static let json = ("Content-Type", "application/json; charset=utf-8")
    private static let plain = [json] + unstored

    /// The cache rule of an answer with `extra` headers: `validated` when
    /// they have an `ETag`, else `unstored`.
    static func cacheRule(_ extra: [(name: String, value: String)]) -> [(name: String, value: String)] {
        extra.contains { $0.name == "ETag" } ? validated : unstored
    }

    /// The content type, the cache rule, then `extra`; the shared array
    /// when there is nothing extra (no allocation).
    static func jsonHeaders(_ extra: [(name: String, value: String)]) -> [(name: String, value: String)] {
        extra.isEmpty ? plain : [json] + cacheRule(extra) + extra
    }

    /// 204 with no body.
    static func noContent() -> HTTPResponse { HTTPResponse(status: 204, headers: unstored) }
}

extension Call {
    /// Answers with `reply` of the value, or the failure's problem: at once
    /// when it is ready (no task, the server thread answers), else once it is
    /// there, the connection parked (a handed-back value is answered from the
    /// thread that has it).
    func answer<T: Sendable>(_ pending: Pending<T, APIError>, _ reply: @escaping @Sendable (T) -> HTTPResponse)
        -> HTTPHandlerResult
    {
        switch pending {
        // The synchronous path spelled out: no closure is kept, nothing generic runs.
        case .ready(.success(let value)): .respond(reply(value))
        case .ready(.failure(let error)): .respond(error.response)
        case .later, .handedBack: .answer(pending.resolving(reply, failure: { $0.response }))
        }
    }
}
