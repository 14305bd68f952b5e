import Foundation
import HTTPTestClient
import Synchronization
import TestSupport
import Testing

@testable import HTTPServer
@testable import Locking
@testable import UsherAPI
@testable import UsherCore

/// No answer came in time.
private struct NoAnswer: Error {}

/// A request running on its own thread (a parked producer or consumer).
private final class Background: Sendable {
    private let result = Locked<Result<TestHTTPClient.Response, any Error>?>(nil)
    private let done = DispatchSemaphore(value: 0)

    init(_ body: @escaping @Sendable () throws -> TestHTTPClient.Response) {
        Thread { [self] in
            let r = Result { try body() }
            result.withLock { $0 = r }
            done.signal()
        }.start()
    }

    /// The response, or a failure after `seconds`.
    func response(within seconds: Double = 5) throws -> TestHTTPClient.Response {
        guard done.wait(timeout: .now() + seconds) == .success else { throw NoAnswer() }
        return try result.withLock { $0! }.get()
    }
}

/// An `http` source for a pipeline: answers each GET with the next scripted
/// response, then 204 for ever, and counts the requests.
private final class ScriptedSource: HTTPHandler {
    private let script: Locked<[HTTPResponse]>
    private let count = Atomic(0)

    init(_ script: [HTTPResponse]) { self.script = Locked(script) }

    var requests: Int { count.load(ordering: .relaxed) }

    func handle(_ request: HTTPRequest) -> HTTPHandlerResult {
        count.add(1, ordering: .relaxed)
        let next = script.withLock { $0.isEmpty ? nil : $0.removeFirst() }
        return .respond(next ?? HTTPResponse(status: 204))
    }

    static func json(_ text: String) -> HTTPResponse {
        HTTPResponse(status: 200, contentType: "application/json", text: text)
    }
}

extension TestHTTPClient.Response {
    /// `items` of a take, a state or the dead list.
    fileprivate var items: [[String: Any]] { json["items"] as? [[String: Any]] ?? [] }
    fileprivate var source: [String: Any] { json["source"] as? [String: Any] ?? [:] }
}

extension OneAtATime {
    @Suite struct PipelineLiveTests {
        /// Polls `condition` every 5 ms for up to `seconds`.
        private func eventually(_ seconds: Double = 3, _ condition: () throws -> Bool) rethrows -> Bool {
            try pollBlocking(seconds, condition)
        }

        private func state(_ s: any UsherUnderTest, _ name: String = "p") throws -> TestHTTPClient.Response {
            try s.call("GET", "/v1/pipelines/\(name)")
        }

        // Source pulls run as tasks on Swift's cooperative pool. A synchronous
        // test blocks one of its threads (two on this machine) while it waits, so
        // the tests that wait for a pull are async and make their blocking HTTP
        // calls on threads of their own.

        private func state(_ s: any UsherUnderTest, _ name: String = "p") async throws -> TestHTTPClient.Response {
            try await s.callAsync("GET", "/v1/pipelines/\(name)")
        }

        // MARK: - Lifecycle and errors

        @Test func lifecycle() throws {
            let s = try AppTester()
            let created = try s.call("PUT", "/v1/pipelines/p", #"{"capacity": 10, "max_in_flight": 2}"#)
            #expect(created.status == 201)
            #expect(created.json["capacity"] as? Int == 10)
            let config = try #require(created.json["config"] as? [String: Any])
            #expect(config["ack_seconds"] as? Int == 30)
            #expect(config["max_deliveries"] as? Int == 5)
            // The same config after defaults: 200; a different one: 409.
            #expect(
                try s.call("PUT", "/v1/pipelines/p", #"{"capacity": 10, "max_in_flight": 2, "ack_seconds": 30}"#).status
                    == 200)
            let clash = try s.call("PUT", "/v1/pipelines/p", #"{"capacity": 11}"#)
            #expect(clash.status == 409)
            #expect(clash.code == "already_exists")
            // Filters added later do not count when comparing.
            #expect(try s.call("PUT", "/v1/pipelines/p/filters/f", #"{"action": "drop"}"#).status == 201)
            #expect(try s.call("PUT", "/v1/pipelines/p", #"{"capacity": 10, "max_in_flight": 2}"#).status == 200)

            let list = try s.call("GET", "/v1/pipelines")
            let summary = try #require((list.json["pipelines"] as? [[String: Any]])?.first)
            #expect(summary["name"] as? String == "p")
            #expect(summary["capacity"] as? Int == 10)
            let kinds = try s.call("GET", "/v1").json["kinds"] as? [[String: Any]]
            #expect(kinds?.first { $0["kind"] as? String == "pipelines" }?["count"] as? Int == 1)

            for i in 0..<3 {
                #expect(try s.call("POST", "/v1/pipelines/p/items", #"{"payload": \#(i)}"#).status == 201)
            }
            let limited = try s.call("GET", "/v1/pipelines/p?limit=2")
            #expect(limited.items.count == 2)
            #expect(limited.counts["ready"] as? Int == 3)

            let patched = try s.call("PATCH", "/v1/pipelines/p", #"{"capacity": 20, "ack_seconds": 0.5}"#)
            #expect(patched.status == 200)
            #expect(patched.json["capacity"] as? Int == 20)
            #expect((patched.json["config"] as? [String: Any])?["ack_seconds"] as? Double == 0.5)
            #expect(try s.call("DELETE", "/v1/pipelines/p").status == 204)
            #expect(try s.call("GET", "/v1/pipelines/p").status == 404)
            #expect(try s.call("DELETE", "/v1/pipelines/p").status == 404)
        }

        @Test func badInputIsRejectedAndLosesNothing() throws {
            let s = try AppTester(#"{"pipelines": {"p": {"capacity": 3}}}"#)
            let cases: [(String, String, String?, String)] = [
                ("POST", "/v1/pipelines/p/items", "{not json", "malformed"),
                ("POST", "/v1/pipelines/p/items", #"{"payload": 1, "prioirty": 2}"#, "prioirty"),
                ("POST", "/v1/pipelines/p/items", #"{"priority": 2}"#, "payload"),
                ("POST", "/v1/pipelines/p/items", #"{"payload": 1, "id": "bad id!"}"#, "id"),
                ("POST", "/v1/pipelines/p/items", #"{"payload": 1, "id": "batch"}"#, "reserved"),
                ("POST", "/v1/pipelines/p/items", #"{"payload": 1, "delay_seconds": -1}"#, "delay_seconds"),
                ("POST", "/v1/pipelines/p/items?wiat=5", #"{"payload": 1}"#, "wiat"),
                (
                    "POST", "/v1/pipelines/p/items/batch", #"{"items": [{"payload": 1}, {"payload": 2, "x": 1}]}"#,
                    "items[1].x"
                ),
                (
                    "POST", "/v1/pipelines/p/items/batch",
                    #"{"items": [{"payload": 1}, {"payload": 2}, {"payload": 3}, {"payload": 4}]}"#, "capacity"
                ),
                ("POST", "/v1/pipelines/p/items/batch", #"{}"#, "items"),
                ("POST", "/v1/pipelines/p/take?max=0", nil, "max"),
                ("POST", "/v1/pipelines/p/take?max=1001", nil, "max"),
                ("POST", "/v1/pipelines/p/take?wait=soon", nil, "wait"),
                ("POST", "/v1/pipelines/p/take", #"{"ack_seconds": "long"}"#, "ack_seconds"),
                ("POST", "/v1/pipelines/p/take", #"{"ack_seconds": 0}"#, "ack_seconds"),
                ("PUT", "/v1/pipelines/p/filters/f", #"{"action": "explode"}"#, "action"),
                (
                    "PUT", "/v1/pipelines/p/filters/f", #"{"action": "set", "field": "type", "value": 1}"#,
                    "JSON Pointer"
                ),
                ("PUT", "/v1/pipelines/p/filters/f", #"{"action": "set", "field": "/a"}"#, "value"),
                ("PUT", "/v1/pipelines/p/filters/f", #"{"when": {"field": "/a"}, "action": "drop"}"#, "equals"),
                (
                    "PUT", "/v1/pipelines/p/filters/f",
                    #"{"when": {"field": "/a", "equals": 1, "exists": true}, "action": "drop"}"#, "exactly one"
                ),
                ("PUT", "/v1/pipelines/p/filters/f", #"{"action": "remove", "field": "/a~2"}"#, "~"),
                ("PUT", "/v1/pipelines/p/filters/bad%20name", #"{"action": "drop"}"#, "not a valid name"),
                ("PUT", "/v1/pipelines/new", #"{"capactiy": 3}"#, "capactiy"),
                ("PUT", "/v1/pipelines/new", #"{"capacity": 0}"#, "capacity"),
                ("PUT", "/v1/pipelines/new", #"{"source": {"kind": "file", "path": "../etc/passwd"}}"#, "source.path"),
                ("PUT", "/v1/pipelines/new", #"{"source": {"kind": "file", "path": "/etc/passwd"}}"#, "absolute"),
                (
                    "PUT", "/v1/pipelines/new", #"{"source": {"kind": "http", "url": "http://10.1.2.3/next"}}"#,
                    "loopback"
                ),
                (
                    "PUT", "/v1/pipelines/new", #"{"source": {"kind": "http", "url": "https://127.0.0.1/next"}}"#,
                    "http://"
                ),
                ("PUT", "/v1/pipelines/new", #"{"source": {"kind": "ftp"}}"#, "source.kind"),
                ("PATCH", "/v1/pipelines/p", #"{"filters": {}}"#, "filters"),
                ("PATCH", "/v1/pipelines/p", #"{"max_in_flight": 0}"#, "max_in_flight"),
                ("GET", "/v1/pipelines/p?limit=x", nil, "limit"),
                ("GET", "/v1/pipelines/p/dead?limit=-1", nil, "limit"),
            ]
            for (method, path, body, mention) in cases {
                let r = try s.call(method, path, body)
                #expect(r.status == 400, "\(method) \(path) \(body ?? "")")
                #expect(r.code == "bad_request")
                #expect((r.json["detail"] as? String)?.contains(mention) == true, "\(r.text) should mention \(mention)")
            }
            let state = try state(s)
            #expect(state.counts["pushed_total"] as? Int == 0)
            #expect((state.json["filters"] as? [Any])?.isEmpty == true)
            #expect(try s.call("GET", "/v1/pipelines/new").status == 404)
        }

        @Test func notFoundEverywhere() throws {
            let s = try AppTester(#"{"pipelines": {"p": {}}}"#)
            for (method, path) in [
                ("GET", "/v1/pipelines/none"), ("POST", "/v1/pipelines/none/items"),
                ("POST", "/v1/pipelines/none/take"),
                ("GET", "/v1/pipelines/p/items/x"), ("DELETE", "/v1/pipelines/p/items/x"),
                ("POST", "/v1/pipelines/p/items/x/consume"), ("POST", "/v1/pipelines/p/items/x/release"),
                ("GET", "/v1/pipelines/p/filters/f"), ("DELETE", "/v1/pipelines/p/filters/f"),
                ("GET", "/v1/pipelines/p/nothing"),
            ] {
                let r = try s.call(method, path, path.hasSuffix("/items") ? #"{"payload": 1}"# : nil)
                #expect(r.status == 404, "\(method) \(path): \(r.text)")
                #expect(r.code == "not_found")
            }
            #expect(try s.call("DELETE", "/v1/pipelines/p/filters/f").json["detail"] as? String == "filter f not found")
            let r = try s.call("PATCH", "/v1/pipelines/p/take")
            #expect(r.status == 405)
            #expect(r.headers["allow"] == "POST")
        }

        @Test func declaredPipelinesNameTheField() throws {
            func startupError(_ text: String) -> String? {
                do {
                    _ = try UsherApp(
                        config: try UsherConfig.parse(try JSONValue.parse(text)), logger: Logger(level: .error))
                    return nil
                } catch { return "\(error)" }
            }
            #expect(startupError(#"{"pipelines": {"p": {"capactiy": 1}}}"#)?.contains("pipelines.p.capactiy") == true)
            #expect(
                startupError(#"{"pipelines": {"p": {"source": {"kind": "file", "path": "../x"}}}}"#)?
                    .contains("pipelines.p.source.path") == true)
            #expect(
                startupError(#"{"pipelines": {"p": {"filters": {"f": {"action": "set", "field": "/a"}}}}}"#)?
                    .contains("pipelines.p.filters.f.value") == true)
            #expect(
                startupError(#"{"pipelines": {"p": {"source": {"kind": "http", "url": "http://192.0.2.1/"}}}}"#)?
                    .contains("loopback") == true)
            // Declared filters run from the start.
            let s = try AppTester(
                #"{"pipelines": {"p": {"filters": {"tag": {"action": "set", "field": "/by", "value": "usher"}}}}}"#)
            _ = try s.call("POST", "/v1/pipelines/p/items", #"{"payload": {"a": 1}}"#)
            let taken = try s.call("POST", "/v1/pipelines/p/take")
            let payload = taken.items.first?["payload"] as? [String: Any]
            #expect(payload?["a"] as? Int == 1)
            #expect(payload?["by"] as? String == "usher")
        }

        // MARK: - Items

        @Test func pushTakeConsumeRelease() throws {
            let s = try LiveServer(#"{"pipelines": {"p": {"capacity": 10, "max_in_flight": 2}}}"#)
            let c = s.client()
            let a = try c.request("POST", "/v1/pipelines/p/items", body: #"{"id": "a", "payload": {"n": 1}}"#)
            #expect(a.status == 201)
            #expect(a.json["status"] as? String == "ready")
            // The push answers the whole item, as GET …/items/{id} shows it.
            #expect((a.json["payload"] as? [String: Any])?["n"] as? Int == 1)
            #expect(a.json["deliveries"] as? Int == 0 && a.json["created_at"] is String && a.json["fence"] is NSNull)
            #expect(a.body == (try c.request("GET", "/v1/pipelines/p/items/a")).body)
            // A retried push with the same id is the same item: 200.
            let again = try c.request("POST", "/v1/pipelines/p/items", body: #"{"id": "a", "payload": {"n": 99}}"#)
            #expect(again.status == 200)
            #expect(again.json["id"] as? String == "a")
            #expect((again.json["payload"] as? [String: Any])?["n"] as? Int == 1)
            let b = try c.request(
                "POST", "/v1/pipelines/p/items", body: #"{"id": "b", "payload": "urgent", "priority": 5}"#)
            #expect(b.json["priority"] as? Int == 5)
            let d = try c.request(
                "POST", "/v1/pipelines/p/items", body: #"{"id": "d", "payload": null, "delay_seconds": 60}"#)
            #expect(d.status == 201)
            #expect(d.json["status"] as? String == "delayed")
            #expect(d.json["available_at"] as? String != d.json["created_at"] as? String)
            _ = try c.request("POST", "/v1/pipelines/p/items", body: #"{"id": "e", "payload": 3}"#)

            // A ready item is not in flight.
            let early = try c.request("POST", "/v1/pipelines/p/items/a/consume")
            #expect(early.status == 409)
            #expect(early.code == "not_in_flight")
            #expect(early.json["current_status"] as? String == "ready")

            // Priority first, then arrival; max_in_flight 2 caps a take of 5.
            let taken = try c.request("POST", "/v1/pipelines/p/take?max=5")
            #expect(taken.status == 200)
            #expect(taken.items.map { $0["id"] as? String } == ["b", "a"])
            let first = try #require(taken.items.first)
            #expect(first["payload"] as? String == "urgent")
            #expect(first["deliveries"] as? Int == 1)
            #expect(first["taken_at"] is String)
            #expect(first["ack_deadline"] is String)
            let fenceB = try #require(first["fence"] as? Int)
            #expect(taken.items[1]["fence"] as? Int == fenceB + 1)
            // Nothing more can be handed out now: 204 at once.
            #expect(try c.request("POST", "/v1/pipelines/p/take").status == 204)

            // An in-flight item cannot be deleted.
            let busy = try c.request("DELETE", "/v1/pipelines/p/items/a")
            #expect(busy.status == 409)
            #expect(busy.code == "in_flight")
            // A stale fence cannot consume.
            let stale = try c.request("POST", "/v1/pipelines/p/items/b/consume", body: #"{"fence": \#(fenceB - 1)}"#)
            #expect(stale.code == "not_in_flight")
            let consumed = try c.request("POST", "/v1/pipelines/p/items/b/consume", body: #"{"fence": \#(fenceB)}"#)
            #expect(consumed.status == 200)
            #expect(consumed.json["status"] as? String == "consumed")
            // A retried consume (its answer lost) learns the item was consumed.
            for action in ["consume", "release"] {
                let retried = try c.request("POST", "/v1/pipelines/p/items/b/\(action)")
                #expect(retried.status == 409)
                #expect(retried.code == "not_in_flight")
                #expect(retried.json["current_status"] as? String == "consumed")
            }
            let finished = try c.request("GET", "/v1/pipelines/p/items/b")
            #expect(finished.status == 200)
            #expect(finished.json["status"] as? String == "consumed")
            #expect(finished.json["payload"] is NSNull)

            // Release puts a back at the front, ahead of e.
            let released = try c.request("POST", "/v1/pipelines/p/items/a/release")
            #expect(released.status == 200)
            #expect(released.json["status"] as? String == "ready")
            #expect(try c.request("POST", "/v1/pipelines/p/items/a/release").code == "not_in_flight")
            let next = try c.request("POST", "/v1/pipelines/p/take")
            #expect(next.items.first?["id"] as? String == "a")
            #expect(next.items.first?["deliveries"] as? Int == 2)
            #expect(try c.request("GET", "/v1/pipelines/p/items/a").json["status"] as? String == "in_flight")

            // A delayed release waits, then comes back first.
            let delayed = try c.request("POST", "/v1/pipelines/p/items/a/release", body: #"{"delay_seconds": 0.3}"#)
            #expect(delayed.json["status"] as? String == "delayed")
            let meanwhile = try c.request("POST", "/v1/pipelines/p/take")
            #expect(meanwhile.items.first?["id"] as? String == "e")
            _ = try c.request("POST", "/v1/pipelines/p/items/e/consume")
            let started = Date()
            let back = try c.request("POST", "/v1/pipelines/p/take?wait=5")
            #expect(back.items.first?["id"] as? String == "a")
            #expect(Date().timeIntervalSince(started) >= 0.2)

            // Cancel a delayed item: 200, and it is gone.
            let cancelled = try c.request("DELETE", "/v1/pipelines/p/items/d")
            #expect(cancelled.status == 200)
            #expect(cancelled.json["status"] as? String == "cancelled")
            #expect(try c.request("GET", "/v1/pipelines/p/items/d").json["status"] as? String == "cancelled")

            let state = try c.request("GET", "/v1/pipelines/p")
            #expect(state.counts["in_flight"] as? Int == 1)
            #expect(state.counts["ready"] as? Int == 0)
            #expect(state.counts["pushed_total"] as? Int == 4)
            #expect(state.counts["consumed_total"] as? Int == 2)
            #expect(state.counts["delivered_total"] as? Int == 5)
            #expect(state.counts["cancelled_total"] as? Int == 1)
        }

        @Test func historyZeroForgetsFinishedItemsAtOnce() throws {
            let s = try AppTester(#"{"pipelines": {"p": {"history": 0}}}"#)
            #expect((try s.call("GET", "/v1/pipelines/p").json["config"] as? [String: Any])?["history"] as? Int == 0)
            _ = try s.call("POST", "/v1/pipelines/p/items", #"{"id": "a", "payload": 1}"#)
            _ = try s.call("POST", "/v1/pipelines/p/take")
            #expect(try s.call("POST", "/v1/pipelines/p/items/a/consume").status == 200)
            #expect(try s.call("POST", "/v1/pipelines/p/items/a/consume").status == 404)
            #expect(try s.call("GET", "/v1/pipelines/p/items/a").status == 404)
            let patched = try s.call("PATCH", "/v1/pipelines/p", #"{"history": 5}"#)
            #expect((patched.json["config"] as? [String: Any])?["history"] as? Int == 5)
            #expect(try s.call("PATCH", "/v1/pipelines/p", #"{"history": 100001}"#).status == 400)
        }

        @Test func fullPipelineIs429AndBatchesAreAllOrNothing() throws {
            let s = try AppTester(#"{"pipelines": {"p": {"capacity": 3}}}"#)
            let batch = try s.call(
                "POST", "/v1/pipelines/p/items/batch", #"{"items": [{"id": "x", "payload": 1}, {"payload": 2}]}"#)
            #expect(batch.status == 201)
            let ids = try #require(batch.json["ids"] as? [String])
            #expect(ids.count == 2 && ids[0] == "x")
            // Two more do not fit: nothing is added.
            let tooMany = try s.call(
                "POST", "/v1/pipelines/p/items/batch", #"{"items": [{"payload": 3}, {"payload": 4}]}"#)
            #expect(tooMany.status == 429)
            #expect(tooMany.code == "pipeline_full")
            #expect(try state(s).counts["ready"] as? Int == 2)
            // A retried batch needs no room: 200 with the same ids.
            let retried = try s.call("POST", "/v1/pipelines/p/items/batch", #"{"items": [{"id": "x", "payload": 1}]}"#)
            #expect(retried.status == 200)
            #expect(retried.json["ids"] as? [String] == ["x"])
            #expect(try s.call("POST", "/v1/pipelines/p/items", #"{"payload": 5}"#).status == 201)
            let full = try s.call("POST", "/v1/pipelines/p/items", #"{"payload": 6}"#)
            #expect(full.status == 429)
            #expect(full.code == "pipeline_full")
            #expect(Int(full.headers["retry-after"] ?? "") ?? 0 >= 1)
            // With a wait that passes without room: 429 after the wait.
            let started = Date()
            let waited = try s.call("POST", "/v1/pipelines/p/items?wait=0.3", #"{"payload": 7}"#)
            #expect(waited.status == 429)
            #expect(Date().timeIntervalSince(started) >= 0.25)
            #expect(try state(s).counts["pushed_total"] as? Int == 3)
        }

        @Test func takeWithoutItemsIs204AtOnceOrAfterTheWait() throws {
            let s = try AppTester(#"{"pipelines": {"p": {}}}"#)
            var started = Date()
            let now = try s.call("POST", "/v1/pipelines/p/take")
            #expect(now.status == 204)
            #expect(now.body.isEmpty)
            #expect(Date().timeIntervalSince(started) < 0.5)
            started = Date()
            let later = try s.call("POST", "/v1/pipelines/p/take?wait=0.6&max=10")
            #expect(later.status == 204)
            #expect(Date().timeIntervalSince(started) >= 0.55)
        }

        // MARK: - Waiting

        @Test func aPushWakesAWaitingConsumer() throws {
            let s = try AppTester(#"{"pipelines": {"p": {}}}"#)
            let consumer = Background { try s.call("POST", "/v1/pipelines/p/take?wait=10") }
            #expect(try eventually { try state(s).counts["waiting_consumers"] as? Int == 1 })
            let started = Date()
            #expect(try s.call("POST", "/v1/pipelines/p/items", #"{"id": "w", "payload": "wake"}"#).status == 201)
            let r = try consumer.response()
            #expect(r.status == 200)
            #expect(r.items.first?["id"] as? String == "w")
            #expect(Date().timeIntervalSince(started) < 2)
            #expect(try state(s).counts["in_flight"] as? Int == 1)
        }

        @Test func aFullPipelineHoldsProducersUntilAConsume() throws {
            let s = try AppTester(#"{"pipelines": {"p": {"capacity": 1}}}"#)
            #expect(try s.call("POST", "/v1/pipelines/p/items", #"{"id": "a", "payload": 1}"#).status == 201)
            let first = Background {
                try s.call("POST", "/v1/pipelines/p/items?wait=10", #"{"id": "b", "payload": 2}"#)
            }
            #expect(try eventually { try state(s).counts["waiting_producers"] as? Int == 1 })
            let second = Background {
                try s.call("POST", "/v1/pipelines/p/items?wait=10", #"{"id": "c", "payload": 3}"#)
            }
            #expect(try eventually { try state(s).counts["waiting_producers"] as? Int == 2 })
            // Taking does not make room (the item is still in the pipeline); consuming does.
            #expect(try s.call("POST", "/v1/pipelines/p/take").items.first?["id"] as? String == "a")
            usleep(50_000)
            #expect(try state(s).counts["waiting_producers"] as? Int == 2)
            #expect(try s.call("POST", "/v1/pipelines/p/items/a/consume").status == 200)
            // Producers get room first come, first served.
            let r = try first.response()
            #expect(r.status == 201)
            #expect(r.json["id"] as? String == "b")
            #expect(try state(s).counts["waiting_producers"] as? Int == 1)
            _ = try s.call("POST", "/v1/pipelines/p/take")
            #expect(try s.call("POST", "/v1/pipelines/p/items/b/consume").status == 200)
            #expect(try second.response().json["id"] as? String == "c")
        }

        @Test func waitersOfADeletedPipelineGet410() throws {
            let s = try AppTester(#"{"pipelines": {"p": {"capacity": 1}, "q": {"capacity": 1}}}"#)
            let consumer = Background { try s.call("POST", "/v1/pipelines/p/take?wait=10") }
            #expect(try eventually { try state(s).counts["waiting_consumers"] as? Int == 1 })
            _ = try s.call("POST", "/v1/pipelines/q/items", #"{"payload": 1}"#)
            let producer = Background { try s.call("POST", "/v1/pipelines/q/items?wait=10", #"{"payload": 2}"#) }
            #expect(try eventually { try state(s, "q").counts["waiting_producers"] as? Int == 1 })
            #expect(try s.call("DELETE", "/v1/pipelines/p").status == 204)
            #expect(try s.call("DELETE", "/v1/pipelines/q").status == 204)
            for r in [try consumer.response(), try producer.response()] {
                #expect(r.status == 410)
                #expect(r.code == "gone")
            }
        }

        @Test func shutdownAnswersParkedTakes503() throws {
            let s = try AppTester(#"{"pipelines": {"p": {}}}"#)
            let consumer = Background { try s.call("POST", "/v1/pipelines/p/take?wait=30") }
            #expect(try eventually { try state(s).counts["waiting_consumers"] as? Int == 1 })
            #expect(s.shutdown())
            let r = try consumer.response()
            #expect(r.status == 503)
            #expect(r.code == "shutting_down")
        }

        // MARK: - Redelivery, dead list, filters

        @Test func unackedItemsComeBackThenDie() throws {
            let s = try AppTester(#"{"pipelines": {"p": {"ack_seconds": 0.2, "max_deliveries": 2}}}"#)
            _ = try s.call("POST", "/v1/pipelines/p/items", #"{"id": "a", "payload": 1}"#)
            let first = try s.call("POST", "/v1/pipelines/p/take")
            #expect(first.items.first?["deliveries"] as? Int == 1)
            // Not consumed in time: handed out again, to a consumer that waits for it.
            let second = try s.call("POST", "/v1/pipelines/p/take?wait=5")
            #expect(second.items.first?["id"] as? String == "a")
            #expect(second.items.first?["deliveries"] as? Int == 2)
            #expect(try state(s).counts["redelivered_total"] as? Int == 1)
            // The late ack of the first delivery is refused by its fence.
            let late = try s.call(
                "POST", "/v1/pipelines/p/items/a/consume", #"{"fence": \#(first.items[0]["fence"] as? Int ?? 0)}"#)
            #expect(late.code == "not_in_flight")
            // Released after its last delivery: dead.
            let dead = try s.call("POST", "/v1/pipelines/p/items/a/release")
            #expect(dead.json["status"] as? String == "dead")
            let list = try s.call("GET", "/v1/pipelines/p/dead")
            #expect(list.json["dead"] as? Int == 1)
            #expect(list.items.first?["id"] as? String == "a")
            #expect(list.items.first?["dead_at"] is String)
            #expect(try s.call("POST", "/v1/pipelines/p/items/a/consume").json["current_status"] as? String == "dead")
            let redriven = try s.call("POST", "/v1/pipelines/p/dead/redrive")
            #expect(redriven.status == 200)
            #expect(redriven.json["moved"] as? Int == 1)
            #expect(redriven.json["dead"] as? Int == 0)
            let again = try s.call("POST", "/v1/pipelines/p/take")
            #expect(again.items.first?["deliveries"] as? Int == 1)
            let counts = try state(s).counts
            #expect(counts["dead_total"] as? Int == 1)
        }

        @Test func filtersRunInPriorityOrderOnEachHandOut() throws {
            let s = try AppTester(#"{"pipelines": {"p": {"max_in_flight": 10}}}"#)
            let drop = try s.call(
                "PUT", "/v1/pipelines/p/filters/no-heartbeats",
                #"{"priority": 10, "when": {"field": "/type", "equals": "heartbeat"}, "action": "drop"}"#)
            #expect(drop.status == 201)
            #expect(drop.json["name"] as? String == "no-heartbeats")
            // Runs before "strip" (priority 1): the tag is set, then debug removed.
            #expect(
                try s.call(
                    "PUT", "/v1/pipelines/p/filters/tag",
                    #"{"priority": 5, "action": "set", "field": "/meta/seen_by", "value": "usher"}"#
                ).status == 201)
            #expect(
                try s.call(
                    "PUT", "/v1/pipelines/p/filters/strip",
                    #"{"priority": 1, "when": {"field": "/debug", "exists": true}, "action": "remove", "field": "/debug"}"#
                ).status == 201)
            // Replacing a filter: 200.
            let replaced = try s.call(
                "PUT", "/v1/pipelines/p/filters/tag",
                #"{"priority": 5, "action": "set", "field": "/meta/seen_by", "value": "usher-2"}"#)
            #expect(replaced.status == 200)
            #expect(try s.call("GET", "/v1/pipelines/p/filters/tag").json["value"] as? String == "usher-2")
            let names = (try state(s).json["filters"] as? [[String: Any]])?.map { $0["name"] as? String }
            #expect(names == ["no-heartbeats", "tag", "strip"])

            _ = try s.call(
                "POST", "/v1/pipelines/p/items/batch",
                #"""
                {"items": [{"id": "h", "payload": {"type": "heartbeat"}},
                           {"id": "g", "payload": {"type": "gift", "debug": true}},
                           {"id": "n", "payload": 7}]}
                """#)
            let taken = try s.call("POST", "/v1/pipelines/p/take?max=10")
            #expect(taken.items.map { $0["id"] as? String } == ["g", "n"])
            let gift = try #require(taken.items.first?["payload"] as? [String: Any])
            #expect(gift["debug"] == nil)
            #expect((gift["meta"] as? [String: Any])?["seen_by"] as? String == "usher-2")
            // A payload that is not an object is handed out as it is.
            #expect(taken.items[1]["payload"] as? Int == 7)
            // The stored payload never changes.
            let stored = try s.call("GET", "/v1/pipelines/p/items/g").json["payload"] as? [String: Any]
            #expect(stored?["debug"] as? Bool == true)
            #expect(stored?["meta"] == nil)
            #expect(try state(s).counts["filtered_total"] as? Int == 1)
            #expect(try s.call("GET", "/v1/pipelines/p/items/h").status == 404)

            #expect(try s.call("DELETE", "/v1/pipelines/p/filters/tag").status == 204)
            #expect(try s.call("DELETE", "/v1/pipelines/p/filters/tag").status == 404)
            _ = try s.call("POST", "/v1/pipelines/p/items/g/release")
            let plain = try s.call("POST", "/v1/pipelines/p/take")
            #expect((plain.items.first?["payload"] as? [String: Any])?["meta"] == nil)
        }

        // MARK: - Sources

        @Test func aFileSourceIsPulledLazilyAndDrained() async throws {
            let dir = try temporaryDirectory("pipeline")
            defer { try? FileManager.default.removeItem(at: dir) }
            var lines = (1...40).map { #"{"n": \#($0)}"# }
            lines.insert("this is not json", at: 10)
            lines.insert("", at: 20)
            try lines.joined(separator: "\n").write(
                to: dir.appendingPathComponent("gifts.ndjson"), atomically: true, encoding: .utf8)
            let s = try AppTester(
                #"""
                {"data_dir": "\#(dir.path)", "pipelines": {"p": {"capacity": 10, "max_in_flight": 4,
                  "source": {"kind": "file", "path": "gifts.ndjson", "low_water": 3}}}}
                """#)
            // Only up to low_water is read ahead, never the whole file.
            #expect(try await poll { try await state(s).counts["ready"] as? Int == 3 })
            try await Task.sleep(for: .milliseconds(50))
            #expect(try await state(s).source["pulled_total"] as? Int == 3)
            var seen: [Int] = []
            let deadline = Date().addingTimeInterval(30)
            while seen.count < 40 && Date() < deadline {
                let r = try await s.callAsync("POST", "/v1/pipelines/p/take?wait=5&max=4")
                for item in r.items {
                    seen.append((item["payload"] as? [String: Any])?["n"] as? Int ?? -1)
                    #expect(
                        try await s.callAsync("POST", "/v1/pipelines/p/items/\(item["id"] as? String ?? "")/consume")
                            .status
                            == 200)
                }
            }
            #expect(seen == Array(1...40))
            #expect(try await s.callAsync("POST", "/v1/pipelines/p/take?wait=0.2").status == 204)
            #expect(try await poll { try await state(s).source["exhausted"] as? Bool == true })
            let source = try await state(s).source
            #expect(source["pulled_total"] as? Int == 40)
            #expect(source["errors_total"] as? Int == 1)
            #expect((source["last_error"] as? String)?.contains("line 11") == true)
            #expect(source["exhausted"] as? Bool == true)
        }

        @Test func aFileSourceCannotLeaveDataDir() async throws {
            let dir = try temporaryDirectory("pipeline")
            let data = dir.appendingPathComponent("data")
            let outside = dir.appendingPathComponent("secret.ndjson")
            defer { try? FileManager.default.removeItem(at: dir) }
            try FileManager.default.createDirectory(
                at: data.appendingPathComponent("sub"), withIntermediateDirectories: true)
            try #"{"secret": true}"#.write(to: outside, atomically: true, encoding: .utf8)
            try #"{"ok": true}"#.write(
                to: data.appendingPathComponent("sub/real.ndjson"), atomically: true, encoding: .utf8)
            // A symlink that leads out, and one that stays inside.
            try FileManager.default.createSymbolicLink(
                atPath: data.appendingPathComponent("escape.ndjson").path,
                withDestinationPath: outside.path)
            try FileManager.default.createSymbolicLink(
                atPath: data.appendingPathComponent("inner.ndjson").path,
                withDestinationPath: "sub/real.ndjson")
            let s = try AppTester(#"{"data_dir": "\#(data.path)"}"#)
            for path in ["../secret.ndjson", "sub/../../secret.ndjson", outside.path] {
                let r = try await s.callAsync(
                    "PUT", "/v1/pipelines/bad", #"{"source": {"kind": "file", "path": "\#(path)"}}"#)
                #expect(r.status == 400, "\(path)")
                #expect(r.json["field"] as? String == "source.path")
            }
            #expect(
                try await s.callAsync(
                    "PUT", "/v1/pipelines/link", #"{"source": {"kind": "file", "path": "escape.ndjson"}}"#
                )
                .status == 201)
            #expect(try await poll { (try await state(s, "link").source["errors_total"] as? Int ?? 0) >= 1 })
            #expect(try await s.callAsync("POST", "/v1/pipelines/link/take").status == 204)
            let source = try await state(s, "link").source
            #expect((source["last_error"] as? String)?.contains("outside data_dir") == true)
            #expect(source["pulled_total"] as? Int == 0)

            #expect(
                try await s.callAsync(
                    "PUT", "/v1/pipelines/inner", #"{"source": {"kind": "file", "path": "inner.ndjson"}}"#
                )
                .status == 201)
            var ok: TestHTTPClient.Response?
            let deadline = Date().addingTimeInterval(30)
            while ok?.status != 200 && Date() < deadline {
                ok = try await s.callAsync("POST", "/v1/pipelines/inner/take?wait=5")
            }
            #expect((ok?.items.first?["payload"] as? [String: Any])?["ok"] as? Bool == true)
        }

        @Test func anHTTPSourceIsPulledWithBackOffAndCountsErrors() async throws {
            let script = ScriptedSource([
                HTTPResponse(status: 204),
                ScriptedSource.json(#"{"n": 1}"#),
                HTTPResponse(status: 500, contentType: "text/plain", text: "boom"),
                ScriptedSource.json(#"{"n": 2}"#),
                ScriptedSource.json("not json"),
                ScriptedSource.json(#"{"n": 3}"#),
            ])
            var config = HTTPServer.Configuration()
            config.port = 0
            let upstream = HTTPServer(configuration: config, handler: script)
            try upstream.start()
            defer { upstream.stop() }
            let s = try LiveServer()
            let put = try await s.callAsync(
                "PUT", "/v1/pipelines/p",
                #"{"source": {"kind": "http", "url": "http://127.0.0.1:\#(upstream.port)/next"}}"#)
            #expect(put.status == 201)
            var seen: [Int] = []
            let deadline = Date().addingTimeInterval(30)
            while seen.count < 3 && Date() < deadline {
                let r = try await s.callAsync("POST", "/v1/pipelines/p/take?wait=5")
                guard let item = r.items.first else { continue }
                seen.append((item["payload"] as? [String: Any])?["n"] as? Int ?? -1)
                _ = try await s.callAsync("POST", "/v1/pipelines/p/items/\(item["id"] as? String ?? "")/consume")
            }
            #expect(seen == [1, 2, 3])
            let source = try await state(s).source
            #expect(source["pulled_total"] as? Int == 3)
            #expect(source["errors_total"] as? Int == 2)
            // The failure ("not JSON") is counted, and cleared by the good pull after it.
            #expect(source["last_error"] == nil || source["last_error"] is NSNull)
            // Nothing more: the pipeline backs off (0.1 s doubling to 5 s) instead
            // of hammering the source, and keeps asking.
            let before = script.requests
            try await Task.sleep(for: .seconds(1))
            let during = script.requests - before
            #expect(during <= 5, "\(during) requests in 1 s")
            let askedAgain = await poll { script.requests > before }
            #expect(askedAgain)
            #expect(try await state(s).source["next_retry_at"] is String)
        }

        @Test func anUnreachableHTTPSourceIsCountedNotFatal() async throws {
            let s = try AppTester()
            // Port 9 (discard) on loopback: nothing listens, the connection is refused.
            #expect(
                try await s.callAsync(
                    "PUT", "/v1/pipelines/p", #"{"source": {"kind": "http", "url": "http://localhost:9/next"}}"#
                ).status == 201)
            #expect(try await poll { (try await state(s).source["errors_total"] as? Int ?? 0) >= 1 })
            #expect(
                (try await state(s).source["last_error"] as? String)?.contains("GET http://localhost:9/next") == true)
            // The pipeline still works for producers and consumers.
            #expect(try await s.callAsync("POST", "/v1/pipelines/p/items", #"{"payload": 1}"#).status == 201)
            #expect(try await s.callAsync("POST", "/v1/pipelines/p/take").status == 200)
        }

        // MARK: - Many producers and consumers at once

        /// Starts `producers` threads, each pushing `perProducer` items with ids
        /// `p<producer>-<k>` and waiting for room; a push that is not 201 is a failure.
        private func startProducers(
            _ s: LiveServer, _ producers: Int, _ perProducer: Int, group: DispatchGroup,
            failed: @escaping @Sendable (String) -> Void
        ) {
            for p in 0..<producers {
                group.enter()
                Thread {
                    defer { group.leave() }
                    let c = s.client()
                    for k in 0..<perProducer {
                        let r = try? c.request(
                            "POST", "/v1/pipelines/p/items?wait=10", body: #"{"id": "p\#(p)-\#(k)", "payload": \#(k)}"#)
                        if r?.status != 201 { failed("push p\(p)-\(k): \(r?.status ?? 0)") }
                    }
                }.start()
            }
        }

        @Test func everyItemIsConsumedExactlyOnceWhenConsumersAck() throws {
            let s = try LiveServer(#"{"pipelines": {"p": {"capacity": 20, "max_in_flight": 6}}}"#)
            let producers = 4
            let perProducer = 100
            let consumers = 4
            let total = producers * perProducer
            let consumed = Locked<[String: Int]>([:])
            let failures = Locked<[String]>([])
            let deadline = Date().addingTimeInterval(30)
            let group = DispatchGroup()
            // The pipeline holds 20: producers are held back by the consumers' pace.
            startProducers(s, producers, perProducer, group: group) { f in failures.withLock { $0.append(f) } }
            for _ in 0..<consumers {
                group.enter()
                Thread {
                    defer { group.leave() }
                    let c = s.client()
                    while consumed.withLock({ $0.values.reduce(0, +) }) < total && Date() < deadline {
                        guard let r = try? c.request("POST", "/v1/pipelines/p/take?wait=0.5&max=3") else { continue }
                        for item in r.items {
                            let id = item["id"] as? String ?? ""
                            let fence = item["fence"] as? Int ?? 0
                            let ack = try? c.request(
                                "POST", "/v1/pipelines/p/items/\(id)/consume", body: #"{"fence": \#(fence)}"#)
                            if ack?.status == 200 {
                                consumed.withLock { $0[id, default: 0] += 1 }
                            } else {
                                failures.withLock { $0.append("consume \(id): \(ack?.text ?? "no answer")") }
                            }
                        }
                    }
                }.start()
            }
            #expect(group.wait(timeout: .now() + 40) == .success)
            #expect(failures.withLock { $0 } == [])
            let counts = consumed.withLock { $0 }
            let expected = Set((0..<producers).flatMap { p in (0..<perProducer).map { "p\(p)-\($0)" } })
            #expect(Set(counts.keys) == expected)
            #expect(counts.values.allSatisfy { $0 == 1 })
            let state = try state(s)
            #expect(state.counts["pushed_total"] as? Int == total)
            #expect(state.counts["consumed_total"] as? Int == total)
            #expect(state.counts["delivered_total"] as? Int == total)
            #expect(state.counts["ready"] as? Int == 0)
            #expect(state.counts["in_flight"] as? Int == 0)
        }

        @Test func everyItemIsConsumedAtLeastOnceWhenSomeConsumersDoNotAck() throws {
            let s = try LiveServer(
                #"{"pipelines": {"p": {"capacity": 30, "max_in_flight": 8, "ack_seconds": 0.2, "max_deliveries": 1000}}}"#
            )
            let producers = 3
            let perProducer = 50
            let total = producers * perProducer
            let consumed = Locked<[String: Int]>([:])
            let delivered = Locked<[String: Int]>([:])
            let dropped = Atomic(0)
            let failures = Locked<[String]>([])
            let deadline = Date().addingTimeInterval(30)
            let group = DispatchGroup()
            startProducers(s, producers, perProducer, group: group) { f in failures.withLock { $0.append(f) } }
            // Consumer 0 never acks a first delivery (it "crashes"); the others always ack.
            for careless in [true, false, false] {
                group.enter()
                Thread {
                    defer { group.leave() }
                    let c = s.client()
                    while consumed.withLock({ $0.count }) < total && Date() < deadline {
                        guard let r = try? c.request("POST", "/v1/pipelines/p/take?wait=0.5&max=2") else { continue }
                        for item in r.items {
                            let id = item["id"] as? String ?? ""
                            delivered.withLock { $0[id, default: 0] += 1 }
                            if careless && item["deliveries"] as? Int == 1 {
                                dropped.add(1, ordering: .relaxed)
                                continue
                            }
                            let ack = try? c.request(
                                "POST", "/v1/pipelines/p/items/\(id)/consume",
                                body: #"{"fence": \#(item["fence"] as? Int ?? 0)}"#)
                            switch ack?.status {
                            case 200: consumed.withLock { $0[id, default: 0] += 1 }
                            // Acked too late: the delivery timed out and the item comes again.
                            case 409: break
                            default: failures.withLock { $0.append("consume \(id): \(ack?.text ?? "no answer")") }
                            }
                        }
                    }
                }.start()
            }
            #expect(group.wait(timeout: .now() + 40) == .success)
            #expect(failures.withLock { $0 } == [])
            let expected = Set((0..<producers).flatMap { p in (0..<perProducer).map { "p\(p)-\($0)" } })
            // At least once: every item was handed out and acknowledged; the fence
            // lets only the latest delivery's ack through, so exactly one ack each.
            #expect(Set(consumed.withLock { $0.keys }) == expected)
            #expect(consumed.withLock { $0.values.allSatisfy { $0 == 1 } })
            #expect(dropped.load(ordering: .relaxed) > 0)
            #expect(delivered.withLock { $0.values.contains { $0 >= 2 } })
            let state = try state(s)
            #expect((state.counts["redelivered_total"] as? Int ?? 0) >= dropped.load(ordering: .relaxed))
            #expect(state.counts["consumed_total"] as? Int == total)
            #expect(state.counts["dead_total"] as? Int == 0)
            #expect(state.counts["in_flight"] as? Int == 0)
        }
    }
}
