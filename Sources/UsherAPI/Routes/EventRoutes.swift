import Dispatch
import Foundation
import HTTPServer
import Locking
import UsherCore

/// `GET /v1/events`: every state change as Server-Sent Events (docs/api.md, "Event stream").
///
/// Each event is `id: N`, `event: TYPE`, `data: {json}` and a blank line.
/// With `Last-Event-ID` the buffered events after that id come first; when
/// that id is older than the replay buffer (or unknown), an `event: reset`
/// comes before them: the client missed events and should re-read state.
/// The stream reads the log's ring through a cursor (`EventCursor`): what a
/// client does not read costs nothing. An idle stream gets a `: ping`
/// comment every 15 s (one timer for all). A stream that falls behind the
/// ring or `max_event_lag_bytes` behind the live events ends with
/// `event: dropped`.
enum EventRoutes {
    /// `kind=` values, the plural as in URLs and `GET /v1` (the singular is
    /// accepted too), to the `kind` the events carry.
    static let kinds: [String: String] = [
        "queues": "queue", "windows": "window", "pools": "pool", "pipelines": "pipeline", "machines": "machine",
        "queue": "queue", "window": "window", "pool": "pool", "pipeline": "pipeline", "machine": "machine",
    ]
    /// Seconds between heartbeat comments.
    static let heartbeatSeconds = 15
    /// Bytes the stream's own buffer holds: the opening lines and the final notice.
    static let bufferLimit = 64 << 10

    static func add(to router: inout Router<Route>) {
        router.add("GET", "/v1/events", stream)
    }

    /// Opens the stream.
    static func stream(_ call: Call) throws(APIError) -> HTTPHandlerResult {
        let query = try call.query(allowing: ["kind", "name"])
        let rawKind = query.values["kind"]
        let kind = rawKind.flatMap { kinds[$0] }
        if rawKind != nil, kind == nil {
            throw APIError.badRequest("kind must be one of queues, windows, pools, pipelines, machines", field: "kind")
        }
        let name = query.values["name"]
        var after: UInt64?
        if let raw = call.request.header("last-event-id")?.trimmingCharacters(in: .whitespaces), !raw.isEmpty {
            guard let id = UInt64(raw) else {
                throw APIError.badRequest("Last-Event-ID must be an event id", field: "Last-Event-ID")
            }
            after = id
        }
        if call.app.isStopping { throw APIError.shuttingDown() }

        let log = call.app.events
        let cursor = EventCursor(log: log)
        let stream = HTTPStream(
            status: 200,
            headers: [
                ("Content-Type", "text/event-stream"), ("Cache-Control", "no-store"), ("X-Accel-Buffering", "no"),
            ],
            bufferLimit: bufferLimit, source: cursor)
        let subscription: EventLog.Subscription
        do throws(EventLog.TooManySubscribers) {
            subscription = try log.subscribe(after: after, filter: EventFilter(kind: kind, name: name)) { signal in
                switch signal {
                case .wake: stream.wake()
                case .cut: stream.cut()
                }
            }
        } catch {
            throw APIError.tooManySubscribers(limit: error.limit)
        }
        cursor.start(subscription.token)
        // The opening comment and a reset when events were missed go before any event.
        var opening: [UInt8] = Array(": usher events\n\n".utf8)
        if subscription.gap {
            let oldest = subscription.firstID < log.nextID ? subscription.firstID : nil
            opening += notice("reset", EventResetBody(lastEventID: after, oldestEventID: oldest))
        }
        stream.write(opening)
        let token = subscription.token
        let trimmer = call.app.trimmer
        stream.onEnd { _ in
            log.unsubscribe(token)
            // A connection's memory goes back to the system once streams leave.
            trimmer.request()
        }
        return .stream(stream)
    }

    /// An event's SSE frame: `id: N`, `event: TYPE`, `data: {json}` and a
    /// blank line; encoded once per event, by the log.
    @Sendable static func frame(_ event: ResourceEvent) -> [UInt8] {
        Array("id: \(event.id)\nevent: \(event.type)\ndata: ".utf8) + Wire.bytes(EventBody(event: event)) + [10, 10]
    }

    /// A frame without an id (a notice about the stream itself).
    static func notice(_ type: String, _ body: some Encodable) -> [UInt8] {
        Array("event: \(type)\ndata: ".utf8) + Wire.bytes(body) + [10, 10]
    }
}

/// A stream's cursor into the event log: hands libmicrohttpd the ring's
/// frames as it asks for bytes, a keep-alive when the log says so, and the
/// final `event: dropped` when the log ends the stream.
final class EventCursor: HTTPStreamSource {
    private struct State {
        var token: UInt64?
        /// A notice being sent (a ping or the final `dropped`), and how much is out.
        var notice: [UInt8] = []
        var sent = 0
        var endAfterNotice = false
    }

    private let log: EventLog
    private let state = Locked(State())
    private static let ping = Array(": ping\n\n".utf8)

    init(log: EventLog) {
        self.log = log
    }

    /// The subscription is in place: reading may begin.
    func start(_ token: UInt64) {
        state.withLock { $0.token = token }
    }

    func pull(max: Int, finishing: Bool) -> HTTPStreamPull {
        state.withLock { s in
            while true {
                if s.sent < s.notice.count {
                    let end = min(s.notice.count, s.sent + max)
                    let bytes = s.notice[s.sent..<end]
                    s.sent = end
                    return .bytes(bytes)
                }
                if s.endAfterNotice { return .end }
                guard let token = s.token else { return .end }
                switch log.read(token, max: max, finishing: finishing) {
                case .bytes(let bytes): return .bytes(bytes)
                case .wait: return .wait
                case .ended: return .end
                case .broken: return .abort
                case .ping: (s.notice, s.sent) = (Self.ping, 0)
                case .behind(let last):
                    (s.notice, s.sent, s.endAfterNotice) = (Self.dropped(.behind, last, log), 0, true)
                case .lagging(let last):
                    (s.notice, s.sent, s.endAfterNotice) = (Self.dropped(.lagging, last, log), 0, true)
                }
            }
        }
    }

    private static func dropped(_ reason: EventDroppedBody.Reason, _ last: UInt64?, _ log: EventLog) -> [UInt8] {
        EventRoutes.notice(
            "dropped", EventDroppedBody(reason: reason, lastEventID: last, maxLagBytes: log.lagLimit))
    }
}

/// The log's keep-alive timer: one for every stream of one app, cancelled with it.
final class EventHeartbeat: @unchecked Sendable {
    /// Only touched in `init` and `deinit` (Dispatch sources are thread-safe).
    private let timer: any DispatchSourceTimer

    init(every seconds: Int, _ log: EventLog) {
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "usher.events.heartbeat"))
        timer.schedule(deadline: .now() + .seconds(seconds), repeating: .seconds(seconds))
        timer.setEventHandler { [weak log] in log?.heartbeat() }
        timer.resume()
        self.timer = timer
    }

    deinit { timer.cancel() }
}
