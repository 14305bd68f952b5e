import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import HTTPServer
@testable import Locking
@testable import UsherAPI
@testable import UsherCore

extension OneAtATime {
    /// A replay storm must not hold up other requests,
    /// and streams that do not read hold no bytes of their own.
    @Suite(.serialized) struct EventStormLiveTests {
        /// Opens a stream so that events are recorded, then posts `count` visitors of `size` bytes.
        private func fill(_ s: LiveServer, count: Int, size: Int) throws -> SSEReader {
            let follower = try SSEReader(port: s.port)
            let body = #"{"payload": "\#(String(repeating: "x", count: size))"}"#
            for _ in 0..<count { #expect(try s.call("POST", "/v1/queues/q/visitors", body).status == 201) }
            return follower
        }

        /// 2,000 reconnects with `Last-Event-ID: 1` against 40 buffered events of
        /// 60 KB, each closed at once: `/healthz` (a new connection each time,
        /// as a probe makes) keeps answering within 50 ms throughout (99% of
        /// probes, and none past 200 ms), and every stream is gone once its
        /// client is.
        @Test func aReplayStormDoesNotHoldUpTheProbes() throws {
            let s = try LiveServer(#"{"queues": {"q": {"capacity": 100}}}"#)
            let follower = try fill(s, count: 40, size: 60_000)
            follower.client.disconnect()
            #expect(waitUntil { s.app.events.subscriberCount == 0 })

            let stormDone = Locked(false)
            let latencies = Locked<[Double]>([])
            let port = s.port
            let probe = Thread {
                while !stormDone.withLock({ $0 }) {
                    let started = Date()
                    let ok = (try? TestHTTPClient.once(port: port, "GET", "/healthz").status) == 200
                    latencies.withLock { $0.append(ok ? Date().timeIntervalSince(started) * 1000 : .infinity) }
                    usleep(5_000)
                }
            }
            probe.start()
            let started = Date()
            let request = Array("GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nLast-Event-ID: 1\r\n\r\n".utf8)
            // At 1,000 reconnects a second: the old replay, encoded per stream, took
            // about 14 ms of server CPU each, so this rate stalled every route.
            for i in 0..<2000 where Date().timeIntervalSince(started) < 30 {
                let due = started.addingTimeInterval(Double(i) / 1000)
                if due > Date() { usleep(UInt32(due.timeIntervalSinceNow * 1_000_000)) }
                let fd = connectLoopback(s.port)
                guard fd >= 0 else { continue }
                _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                close(fd)
            }
            #expect(waitUntil(20) { s.app.events.subscriberCount == 0 && s.server.openStreams == 0 })
            stormDone.withLock { $0 = true }
            while !probe.isFinished { usleep(1_000) }
            let seen = latencies.withLock { $0 }.sorted()
            #expect(seen.count > 10)
            // A stall shows as every probe late; one probe late by scheduling
            // noise on a loaded 2-core machine is not the server's doing.
            let worst = seen.last ?? .infinity
            let late = seen.count(where: { $0 >= 50 })
            #expect(
                late <= seen.count / 100 && worst < 200,
                "\(late) of \(seen.count) /healthz over 50 ms; slowest \(worst) ms; median \(seen[seen.count / 2]) ms"
            )
        }

        /// Streams that never read, while 60 KB events are posted, hold no
        /// bytes of their own (each stream's own buffer has only its opening
        /// line); the log's ring holds each frame once.
        @Test func streamsThatNeverReadHoldNoBytes() throws {
            // The follower reads as the events come, as a live client does, but
            // 40 events of 60 KB are posted faster than it reads them: the lag
            // limit is set past their sum, as this test is about bytes held.
            let s = try LiveServer(
                #"{"queues": {"q": {"capacity": 1000}}, "max_event_lag_bytes": 8388608}"#)
            let follower = try SSEReader(port: s.port, timeoutSeconds: 30)
            let followed = Locked<Result<[String], any Error>?>(nil)
            let reader = UncheckedBox(follower)
            let reading = Thread { followed.withLock { $0 = Result { try reader.value.next(40) } } }
            let request = Array("GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
            let slow = (0..<100).map { _ in connectLoopback(s.port) }
            for fd in slow {
                _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
            #expect(waitUntil { s.app.events.subscriberCount == 101 })
            reading.start()
            let body = #"{"payload": "\#(String(repeating: "x", count: 60_000))"}"#
            var held = 0
            for _ in 0..<40 {
                #expect(try s.call("POST", "/v1/queues/q/visitors", body).status == 201)
                held = max(held, s.server.streamBufferedBytes)
            }
            // Today's own buffers hold the opening line at most.
            #expect(held <= 101 * 64, "streams held \(held) bytes of their own")
            #expect(waitUntil(40) { followed.withLock { $0 != nil } })
            let events = try #require(followed.withLock { $0 }).get()
            #expect(events.allSatisfy { $0 == "queue/q/granted" }, "\(events)")
            // Each frame is charged once, however many streams send it.
            #expect(s.app.storage.usedBytes < 40 * 70_000 * 2)
            for fd in slow { close(fd) }
            follower.client.disconnect()
        }

        /// A stream more than `max_event_lag_bytes` behind the live events is
        /// told so (`event: dropped`, reason `lagging`) after the event it is
        /// sending, and closed; it resumes with `Last-Event-ID` where it stopped.
        @Test func aLaggingStreamIsToldAndResumes() throws {
            let s = try LiveServer(#"{"max_event_lag_bytes": 65536}"#)
            let slow = try SSEReader(port: s.port)
            #expect(waitUntil { s.app.events.subscriberCount == 1 })
            let payload = JSONValue.string(String(repeating: "x", count: 8192))
            s.app.events.emit(
                ResourceEvent.Draft(kind: "queue", name: "q", type: "waiting", subject: .summary(payload)))
            var last = try #require(try slow.next()?.id)
            var emitted = 0
            while s.app.events.laggingSubscribers == 0 && emitted < 2000 {
                s.app.events.emit(
                    ResourceEvent.Draft(kind: "queue", name: "q", type: "waiting", subject: .summary(payload)))
                emitted += 1
            }
            #expect(s.app.events.laggingSubscribers == 1)
            var end: SSEReader.Event?
            while let event = try slow.next() {
                if event.type == "dropped" {
                    end = event
                    break
                }
                last = event.id ?? last
            }
            let dropped = try #require(end)
            #expect(dropped.data["reason"] as? String == "lagging")
            #expect(dropped.data["last_event_id"] as? Int == Int(last))
            #expect(dropped.data["max_event_lag_bytes"] as? Int == 65536)
            #expect(try slow.next() == nil)
            #expect(waitUntil { s.app.events.subscriberCount == 0 })

            let resumed = try SSEReader(port: s.port, headers: ["Last-Event-ID": String(last)])
            #expect(try resumed.next()?.id == last + 1)
        }

        /// One more stream than `max_event_subscribers` is answered 503.
        @Test func eventStreamsAreBounded() throws {
            let s = try LiveServer(#"{"max_event_subscribers": 2}"#)
            let open = try (0..<2).map { _ in try SSEReader(port: s.port) }
            let refused = try s.call("GET", "/v1/events")
            #expect(refused.status == 503 && refused.code == "too_many_subscribers")
            #expect(refused.headers["retry-after"] == "1")
            open[0].client.disconnect()
            #expect(waitUntil { s.app.events.subscriberCount == 1 })
            #expect(try SSEReader(port: s.port).head.status == 200)
        }
    }
}

/// Polls `condition` for up to `seconds`.
private func waitUntil(_ seconds: Double = 5, _ condition: () -> Bool) -> Bool {
    pollBlocking(seconds, condition)
}
