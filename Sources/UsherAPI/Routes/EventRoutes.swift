import Dispatch
import Foundation
import HTTPServer
import Locking
import UsherCore

/// `GET /v1/events`: every state change as Server-Sent Events (SPEC §7).
///
/// Each event is `id: N`, `event: TYPE`, `data: {json}` and a blank line.
/// With `Last-Event-ID` the buffered events after that id come first; when
/// that id is older than the replay buffer (or unknown), an `event: reset`
/// comes before them: the client missed events and should re-read state.
/// A `: ping` comment every 15 s keeps proxies from closing the stream (and
/// lets the server notice a client that left). A client that does not read
/// is dropped once 1 MiB waits for it.
enum EventRoutes {
    /// `kind=` values, the plural as in URLs and `GET /v1` (the singular is
    /// accepted too), to the `kind` the events carry.
    static let kinds: [String: String] = [
        "queues": "queue", "windows": "window", "pools": "pool", "pipelines": "pipeline", "machines": "machine",
        "queue": "queue", "window": "window", "pool": "pool", "pipeline": "pipeline", "machine": "machine",
    ]
    /// Seconds between heartbeat comments.
    static let heartbeatSeconds = 15
    /// Bytes that may wait for one client before it is dropped.
    static let bufferLimit = 1 << 20
    /// Where heartbeat timers fire (timers, not threads).
    private static let heartbeatQueue = DispatchQueue(label: "usher.events.heartbeat")

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

        let stream = HTTPStream(
            status: 200,
            headers: [
                ("Content-Type", "text/event-stream"), ("Cache-Control", "no-store"), ("X-Accel-Buffering", "no"),
            ],
            bufferLimit: bufferLimit)
        let log = call.app.events
        let frames = call.app.eventFrames
        let matches: @Sendable (ResourceEvent) -> Bool = { e in
            (kind == nil || e.kind == kind) && (name == nil || e.name == name)
        }
        // The opening comment, a reset when events were missed, and the
        // replay are written before any live event can be.
        let subscription = log.subscribe(
            after: after,
            start: { sub in
                var opening: [UInt8] = Array(": usher events\n\n".utf8)
                if sub.gap {
                    let reset = EventResetBody(lastEventID: after, oldestEventID: sub.replay.first?.id)
                    opening += Array("event: reset\ndata: ".utf8) + Wire.bytes(reset) + Array("\n\n".utf8)
                }
                for event in sub.replay where matches(event) { opening += frames.frame(event) }
                stream.write(opening)
            },
            deliver: { event in
                if matches(event) { stream.write(frames.frame(event)) }
            })

        let heartbeat = Heartbeat(every: heartbeatSeconds, on: heartbeatQueue) {
            stream.write(Array(": ping\n\n".utf8))
        }
        let token = subscription.token
        stream.onEnd { _ in
            log.unsubscribe(token)
            heartbeat.cancel()
        }
        return .stream(stream)
    }

}

/// Events in SSE form, each encoded once however many streams send it: the
/// log hands an event to its subscribers one after another under its lock,
/// so keeping the last frame serves them all.
final class EventFrames: Sendable {
    private let last = Locked<(id: UInt64, bytes: [UInt8])?>(nil)

    /// `id: N`, `event: TYPE`, `data: {json}` and a blank line.
    func frame(_ event: ResourceEvent) -> [UInt8] {
        if let cached = last.withLock({ $0?.id == event.id ? $0?.bytes : nil }) { return cached }
        let bytes =
            Array("id: \(event.id)\nevent: \(event.type)\ndata: ".utf8) + Wire.bytes(EventBody(event: event)) + [
                10, 10,
            ]
        last.withLock { $0 = (event.id, bytes) }
        return bytes
    }
}

/// A repeating Dispatch timer (a timer, not a thread), cancelled once.
private final class Heartbeat: @unchecked Sendable {
    /// Only touched in `init` and `cancel` (Dispatch sources are thread-safe).
    private let timer: any DispatchSourceTimer

    init(every seconds: Int, on queue: DispatchQueue, _ action: @escaping @Sendable () -> Void) {
        timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + .seconds(seconds), repeating: .seconds(seconds))
        timer.setEventHandler(handler: action)
        timer.resume()
    }

    func cancel() { timer.cancel() }
}
