import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import HTTPServer
@testable import UsherCore

/// A Server-Sent Events reader over a raw socket.
final class SSEReader {
    struct Event {
        var id: UInt64?
        var type: String
        var data: [String: Any]
    }

    let client: TestHTTPClient
    let head: TestHTTPClient.Response
    private var text = ""
    private var ended = false

    /// Opens `GET path` with `headers`; the response head is read at once.
    /// A read that waits `timeoutSeconds` for a byte fails.
    init(
        port: UInt16, _ path: String = "/v1/events", headers: [String: String] = [:], timeoutSeconds: Int = 5
    ) throws {
        client = TestHTTPClient(port: port, timeoutSeconds: timeoutSeconds)
        var request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (k, v) in headers { request += "\(k): \(v)\r\n" }
        try client.sendRaw(Data((request + "\r\n").utf8))
        head = try client.readResponse(headOnly: true)
    }

    /// The next event (comments skipped); nil when the stream ended, and
    /// from then on without reading again.
    func next() throws -> Event? {
        while !ended {
            while text.range(of: "\n\n") == nil {
                guard let chunk = try client.readChunk() else {
                    ended = true
                    return nil
                }
                text += String(decoding: chunk, as: UTF8.self)
            }
            let end = text.range(of: "\n\n")!
            let block = String(text[..<end.lowerBound])
            text = String(text[end.upperBound...])
            var event = Event(id: nil, type: "message", data: [:])
            var isComment = true
            for line in block.split(separator: "\n") {
                if line.hasPrefix(":") { continue }
                isComment = false
                if line.hasPrefix("id: ") { event.id = UInt64(line.dropFirst(4)) }
                if line.hasPrefix("event: ") { event.type = String(line.dropFirst(7)) }
                if line.hasPrefix("data: ") {
                    event.data =
                        (try? JSONSerialization.jsonObject(with: Data(line.dropFirst(6).utf8))) as? [String: Any] ?? [:]
                }
            }
            if !isComment { return event }
        }
        return nil
    }

    /// The next `n` events as `kind/name/type`.
    func next(_ n: Int) throws -> [String] {
        try (0..<n).map { _ in
            guard let e = try next() else { return "end" }
            return "\(e.data["kind"] as? String ?? "-")/\(e.data["name"] as? String ?? "-")/\(e.type)"
        }
    }
}

/// `SSEReader` from async tests: each read on a thread of its own.
final class AsyncSSEReader: @unchecked Sendable {
    private let reader: SSEReader

    init(port: UInt16, _ path: String = "/v1/events") async throws {
        reader = try await onThread { try UncheckedBox(SSEReader(port: port, path)) }.value
    }

    func next() async throws -> SSEReader.Event? {
        try await onThread { UncheckedBox(try self.reader.next()) }.value
    }

    func next(_ n: Int) async throws -> [String] {
        try await onThread { try self.reader.next(n) }
    }
}

/// Carries a value that is used by one thread at a time across threads.
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T

    init(_ value: T) { self.value = value }
}

@Suite(.serialized) struct EventLiveTests {
    static let config = #"""
        {"queues": {"q": {"capacity": 1}}, "pools": {"gpus": {"elements": ["g1"]}},
         "pipelines": {"p": {}},
         "definitions": {"door": {"initial": "closed",
           "transitions": [{"event": "open", "from": "closed", "to": "opened"}]}},
         "machines": {"m": {"definition": "door"}}}
        """#

    @Test func streamsEveryKindsChanges() throws {
        let s = try LiveServer(Self.config)
        let events = try SSEReader(port: s.port)
        #expect(events.head.status == 200)
        #expect(events.head.headers["content-type"] == "text/event-stream")
        #expect(events.head.headers["cache-control"] == "no-store")

        let visitor = try s.call("POST", "/v1/queues/q/visitors", "{}")
        let id = try #require(visitor.json["id"] as? String)
        #expect(try s.call("POST", "/v1/queues/q/visitors/\(id)/complete").status == 200)
        #expect(try events.next(2) == ["queue/q/granted", "queue/q/completed"])

        #expect(try s.call("POST", "/v1/pools/gpus/fetch").status == 201)
        #expect(try events.next(1) == ["pool/gpus/leased"])

        let pushed = try s.call("POST", "/v1/pipelines/p/items", #"{"payload": 1}"#)
        let item = try #require(pushed.json["id"] as? String)
        let taken = try s.call("POST", "/v1/pipelines/p/take")
        let fence = try #require((taken.json["items"] as? [[String: Any]])?.first?["fence"] as? Int)
        #expect(try s.call("POST", "/v1/pipelines/p/items/\(item)/consume", #"{"fence": \#(fence)}"#).status < 300)
        #expect(try events.next(3) == ["pipeline/p/pushed", "pipeline/p/delivered", "pipeline/p/consumed"])

        #expect(try s.call("POST", "/v1/machines/m/events/open").status == 200)
        let transition = try #require(try events.next())
        #expect(transition.type == "transition")
        #expect(transition.data["kind"] as? String == "machine")
        #expect((transition.data["data"] as? [String: Any])?["to"] as? String == "opened")
        #expect(transition.id == 7)
    }

    /// A window's and a pool's events carry the object their own routes
    /// answer (the item, the lease), not the queue engine's visitor.
    @Test func eventsCarryTheObjectOfTheirOwnKind() throws {
        let s = try LiveServer(#"{"windows": {"w": {}}, "pools": {"gpus": {"elements": [{"id": "g1", "data": 7}]}}}"#)
        let events = try SSEReader(port: s.port)

        let posted = try s.call("POST", "/v1/windows/w/show", #"{"title": "Hi", "payload": {"n": 1}}"#)
        let shown = try #require(try events.next())
        #expect(shown.type == "shown")
        #expect(NSDictionary(dictionary: shown.data["data"] as? [String: Any] ?? [:]).isEqual(to: posted.json))
        #expect((shown.data["data"] as? [String: Any])?["status"] as? String == "showing")

        let fetched = try s.call("POST", "/v1/pools/gpus/fetch", #"{"holder": "me"}"#)
        let lease = fetched.json
        let leased = try #require(try events.next())
        #expect(leased.type == "leased")
        #expect(NSDictionary(dictionary: leased.data["data"] as? [String: Any] ?? [:]).isEqual(to: lease))
        let leaseID = try #require(lease["id"] as? String)
        let recycled = try s.call("POST", "/v1/pools/gpus/recycle", #"{"lease": "\#(leaseID)"}"#)
        #expect(recycled.status == 200, "\(recycled.json)")
        let ended = try #require(try events.next())
        #expect(ended.type == "recycled")
        #expect(
            NSDictionary(dictionary: ended.data["data"] as? [String: Any] ?? [:]).isEqual(
                to: recycled.json))
        #expect(((ended.data["data"] as? [String: Any])?["element"] as? [String: Any])?["data"] as? Int == 7)
    }

    /// Every way an item enters or leaves has its event: a take with `wait`
    /// that finds an item at once, and an item a file source pulls.
    @Test func aWaitingTakeAndASourcePullAreEvents() throws {
        let dir = try temporaryDirectory("events")
        defer { try? FileManager.default.removeItem(at: dir) }
        try #"{"n": 1}"#.write(to: dir.appendingPathComponent("in.ndjson"), atomically: true, encoding: .utf8)
        let s = try LiveServer(#"{"data_dir": "\#(dir.path)", "pipelines": {"p": {}}}"#)
        // The source's first pull may come late on a loaded machine.
        let events = try SSEReader(port: s.port, "/v1/events?kind=pipelines", timeoutSeconds: 15)
        #expect(try s.call("POST", "/v1/pipelines/p/items", #"{"payload": 1}"#).status == 201)
        #expect(try s.call("POST", "/v1/pipelines/p/take?wait=5").status == 200)
        #expect(try events.next(2) == ["pipeline/p/pushed", "pipeline/p/delivered"])

        let created = try s.call("PUT", "/v1/pipelines/fed", #"{"source": {"kind": "file", "path": "in.ndjson"}}"#)
        #expect(created.status == 201)
        #expect(try events.next(2) == ["pipeline/fed/created", "pipeline/fed/pushed"])
    }

    /// Starting to wait is an event of its own (`enqueued`, `queued`,
    /// `waiting`), and so is a `PATCH` that changes something (`updated`,
    /// with the changed fields); a `PATCH` that changes nothing is not.
    @Test func waitingAndPatchesAreEvents() throws {
        let s = try LiveServer(
            #"{"queues": {"q": {"capacity": 1}}, "windows": {"w": {}}, "pools": {"gpus": {"elements": ["g1"]}}}"#)
        let events = try SSEReader(port: s.port)
        #expect(try s.call("POST", "/v1/queues/q/visitors", #"{"id": "a"}"#).status == 201)
        #expect(try s.call("POST", "/v1/queues/q/visitors", #"{"id": "b"}"#).status == 201)
        #expect(try s.call("POST", "/v1/windows/w/show", #"{"title": "one"}"#).status == 201)
        #expect(try s.call("POST", "/v1/windows/w/show", #"{"title": "two"}"#).status == 201)
        #expect(try s.call("POST", "/v1/pools/gpus/fetch", "{}").status == 201)
        let parked = s.inBackground { try s.call("POST", "/v1/pools/gpus/fetch?wait=0.3", "{}") }
        #expect(
            try events.next(6) == [
                "queue/q/granted", "queue/q/enqueued", "window/w/shown", "window/w/queued", "pool/gpus/leased",
                "pool/gpus/waiting",
            ])
        _ = parked()
        #expect(try events.next(1) == ["pool/gpus/cancelled"])

        #expect(try s.call("PATCH", "/v1/queues/q", #"{"capacity": 1}"#).status == 200)
        #expect(try s.call("PATCH", "/v1/queues/q", #"{"capacity": 3, "hold_seconds": 1.5}"#).status == 200)
        #expect(try events.next(1) == ["queue/q/granted"])  // the room the PATCH made, then the PATCH
        let updated = try #require(try events.next())
        #expect(updated.type == "updated" && updated.data["kind"] as? String == "queue")
        let changes = try #require(updated.data["data"] as? [String: Any])
        #expect(changes.count == 2 && changes["capacity"] as? Int == 3 && changes["hold_seconds"] as? Double == 1.5)
        #expect(try s.call("PATCH", "/v1/windows/w", #"{"display_seconds": 5}"#).status == 200)
        #expect(try s.call("PATCH", "/v1/pools/gpus", #"{"grow": {"max_size": 2}}"#).status == 200)
        let window = try #require(try events.next())
        let pool = try #require(try events.next())
        #expect((window.data["data"] as? [String: Any])?["display_seconds"] as? Int == 5)
        #expect(((pool.data["data"] as? [String: Any])?["grow"] as? [String: Any])?["max_size"] as? Int == 2)
    }

    @Test(arguments: [TestBackend.memory, .redis]) func resourcesCreatedAndDeletedAreEvents(_ backend: TestBackend)
        async throws
    {
        let s = try await BackendLiveServer(backend, #"{"queues": {"q": {}}}"#)
        let all = try await AsyncSSEReader(port: s.live.port)
        let onlyNew = try await AsyncSSEReader(port: s.live.port, "/v1/events?kind=queue&name=new")
        #expect(try await s.call("PUT", "/v1/queues/new", s.put(#"{"capacity": 3}"#)).status == 201)
        // The same PUT again changes nothing: no event.
        #expect(try await s.call("PUT", "/v1/queues/new", s.put(#"{"capacity": 3}"#)).status == 200)
        #expect(try await s.call("PUT", "/v1/machines/m", #"{"definition": "player"}"#).status == 201)
        #expect(try await s.call("DELETE", "/v1/queues/new").status == 204)
        let created = try #require(try await all.next())
        #expect(created.type == "created")
        #expect(created.data["kind"] as? String == "queue")
        // A Redis queue's created event carries its name and backend (its counts are in Redis).
        let data = created.data["data"] as? [String: Any]
        switch backend {
        case .memory: #expect(data?["capacity"] as? Int == 3)
        case .redis: #expect(data?["backend"] as? String == "redis" && data?["name"] as? String == "new")
        }
        #expect(try await all.next(2) == ["machine/m/created", "queue/new/deleted"])
        #expect(try await onlyNew.next(2) == ["queue/new/created", "queue/new/deleted"])
        // Each once: the next event is the next change's.
        #expect(try await s.call("PUT", "/v1/machines/m2", #"{"definition": "player"}"#).status == 201)
        #expect(try await all.next(1) == ["machine/m2/created"])
    }

    @Test(arguments: [TestBackend.memory, .redis]) func deletingEndsWhatItHeldAndSaysSo(_ backend: TestBackend)
        async throws
    {
        let s = try await BackendLiveServer(backend)
        for (path, body) in [
            ("/v1/queues/q", #"{"capacity": 1}"#), ("/v1/pools/p", #"{"elements": ["e1", "e2"]}"#),
            ("/v1/windows/w", "{}"),
        ] {
            #expect(try await s.call("PUT", path, s.put(body)).status == 201)
        }
        _ = try await s.call("POST", "/v1/queues/q/visitors", #"{"id": "a"}"#)
        _ = try await s.call("POST", "/v1/queues/q/visitors", #"{"id": "b"}"#)
        _ = try await s.call("POST", "/v1/pools/p/fetch", #"{"id": "l1", "holder": "ann"}"#)
        _ = try await s.call("POST", "/v1/windows/w/show", #"{"id": "i1"}"#)
        let events = try await AsyncSSEReader(port: s.live.port)
        for path in ["/v1/queues/q", "/v1/pools/p", "/v1/windows/w"] {
            #expect(try await s.call("DELETE", path).status == 204)
        }
        var seen: [String] = []
        while seen.count < 6, let e = try await events.next() {
            let object = e.data["data"] as? [String: Any]
            let id = object?["id"] as? String ?? ""
            let reason = object?["reason"] as? String ?? "-"
            seen.append("\(e.data["kind"] ?? "")/\(e.type)/\(e.type == "deleted" ? "" : "\(id):\(reason)")")
        }
        // Only holders: the waiting visitor b is not granted in a's place, nor told (its wait gets 410).
        #expect(
            seen == [
                "queue/released/a:deleted", "queue/deleted/", "pool/revoked/l1:deleted", "pool/deleted/",
                "window/dismissed/i1:deleted", "window/deleted/",
            ], "\(seen)")
    }

    @Test func filtersByKindAndNameAndRejectsUnknownKinds() throws {
        let s = try LiveServer(#"{"queues": {"a": {}, "b": {}}, "pipelines": {"p": {}}}"#)
        let onlyB = try SSEReader(port: s.port, "/v1/events?kind=queue&name=b")
        let pipelines = try SSEReader(port: s.port, "/v1/events?kind=pipeline")
        #expect(try s.call("POST", "/v1/queues/a/visitors", "{}").status == 201)
        #expect(try s.call("POST", "/v1/pipelines/p/items", #"{"payload": 1}"#).status == 201)
        #expect(try s.call("POST", "/v1/queues/b/visitors", "{}").status == 201)
        #expect(try onlyB.next(1) == ["queue/b/granted"])
        #expect(try pipelines.next(1) == ["pipeline/p/pushed"])

        let bad = try s.call("GET", "/v1/events?kind=queuez")
        #expect(bad.status == 400)
        #expect(try s.call("GET", "/v1/events?knd=queue").status == 400)
        #expect(try s.call("GET", "/v1/events", headers: ["Last-Event-ID": "x"]).status == 400)
    }

    @Test func kindFilterTakesThePluralNamesOfURLs() throws {
        let s = try LiveServer(#"{"queues": {"a": {}}, "pipelines": {"p": {}}}"#)
        let queues = try SSEReader(port: s.port, "/v1/events?kind=queues")
        let pipelines = try SSEReader(port: s.port, "/v1/events?kind=pipelines&name=p")
        #expect(try s.call("POST", "/v1/pipelines/p/items", #"{"payload": 1}"#).status == 201)
        #expect(try s.call("POST", "/v1/queues/a/visitors", "{}").status == 201)
        #expect(try queues.next(1) == ["queue/a/granted"])
        #expect(try pipelines.next(1) == ["pipeline/p/pushed"])
    }

    @Test func resumesWithLastEventIDAndSignalsAReset() throws {
        let s = try LiveServer(#"{"queues": {"q": {"capacity": 100}}}"#)
        let first = try SSEReader(port: s.port)
        for _ in 0..<3 { #expect(try s.call("POST", "/v1/queues/q/visitors", "{}").status == 201) }
        let seen = try (0..<3).map { _ in try #require(try first.next()?.id) }
        #expect(seen == [1, 2, 3])
        first.client.disconnect()
        for _ in 0..<2 { #expect(try s.call("POST", "/v1/queues/q/visitors", "{}").status == 201) }

        let resumed = try SSEReader(port: s.port, headers: ["Last-Event-ID": "3"])
        #expect(try resumed.next()?.id == 4)
        #expect(try resumed.next()?.id == 5)

        // Older than the buffer (here: unknown, from the future): reset, then what is buffered.
        let lost = try SSEReader(port: s.port, headers: ["Last-Event-ID": "999"])
        let reset = try #require(try lost.next())
        #expect(reset.type == "reset")
        #expect(reset.data["last_event_id"] as? Int == 999)
        #expect(reset.data["oldest_event_id"] as? Int == 1)
        #expect(try lost.next()?.id == 1)
    }

    @Test func aClientThatNeverReadsIsDroppedWithoutMemoryGrowth() throws {
        let s = try LiveServer()
        let slow = try SSEReader(port: s.port)
        #expect(eventually { s.server.openStreams == 1 })
        // 64 MB of events against a 1 MiB buffer and the kernel's socket buffers.
        let payload = JSONValue.string(String(repeating: "x", count: 8192))
        var emitted = 0
        while s.server.openStreams > 0 && emitted < 8192 {
            s.app.events.emit(
                ResourceEvent.Draft(kind: "queue", name: "q", type: "waiting", subject: .summary(payload)))
            emitted += 1
        }
        #expect(eventually { s.server.openStreams == 0 }, "the slow client was never dropped")
        #expect(emitted < 8192)
        #expect(s.app.events.subscriberCount == 0)
        slow.client.disconnect()
    }

    @Test func shutdownEndsOpenStreams() throws {
        let s = try LiveServer()
        let readers = try (0..<2).map { _ in try SSEReader(port: s.port) }
        #expect(eventually { s.server.openStreams == 2 })
        #expect(s.shutdown())
        for r in readers { #expect(try r.next() == nil) }
        #expect(s.server.openStreams == 0)
        #expect(s.server.suspendedRequests == 0)
    }
}

/// Polls `condition` for up to `seconds`.
private func eventually(_ seconds: Double = 5, _ condition: () -> Bool) -> Bool {
    pollBlocking(seconds, condition)
}
