import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import UsherAPI

/// `POST …/visitors?wait=S&on_timeout=cancel`: a try-acquire that leaves
/// nothing behind (issue 16), over real sockets.
/// Each test runs once on a memory queue and once on a Redis-backed one.
@Suite(.serialized) struct TryAcquireLiveTests {
    static let both = TestBackend.both

    private static let config = #"{"queues": {"lock": {"capacity": 1, "hold_seconds": 60}}}"#

    private func status(_ s: any BackendUnderTest, _ id: String) async throws -> String? {
        try await s.call("GET", "/v1/queues/lock/visitors/\(id)").json["status"] as? String
    }

    @Test(arguments: both) func aWaitThatEndsCancelsTheVisitorAndSaysSo(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, Self.config)
        #expect(try await s.call("POST", "/v1/queues/lock/visitors?on_timeout=cancel", #"{"id": "a"}"#).status == 201)
        let tried = try await s.call("POST", "/v1/queues/lock/visitors?wait=0.2&on_timeout=cancel", #"{"id": "b"}"#)
        #expect(tried.status == 200)
        #expect(tried.json["status"] as? String == "cancelled")
        #expect(tried.json["reason"] as? String == "timeout")
        #expect(tried.json["finished_at"] as? String != nil)
        // Nothing left behind: when a completes, nobody is granted.
        #expect(try await s.call("POST", "/v1/queues/lock/visitors/a/complete").status == 200)
        let state = try await s.call("GET", "/v1/queues/lock").json
        #expect((state["holding"] as? [Any])?.isEmpty == true)
        let counts = try #require(state["counts"] as? [String: Any])
        #expect(counts["cancelled_total"] as? Int == 1 && counts["timed_out_total"] as? Int == 1)
        // Resource metrics count what this process's managers do: memory queues only.
        let metrics = String(decoding: try await s.call("GET", "/metrics").body, as: UTF8.self)
        #expect(
            backend == .redis
                || metrics.contains(#"usher_resource_events_total{kind="queues",name="lock",event="timed_out"} 1"#))
    }

    @Test(arguments: both) func aGrantWithinTheWaitIsAnsweredAsUsual(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, Self.config)
        _ = try await s.call("POST", "/v1/queues/lock/visitors", #"{"id": "a"}"#)
        let response = s.start("POST", "/v1/queues/lock/visitors?wait=10&on_timeout=cancel", #"{"id": "b"}"#)
        await s.untilParked(1)
        _ = await s.untilVisitor("lock", "b")
        #expect(try await s.call("POST", "/v1/queues/lock/visitors/a/complete").status == 200)
        let r = try await response.value
        #expect(r.status == 201 && r.json["status"] as? String == "granted")
    }

    @Test(arguments: both) func withoutAWaitItTriesOnce(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, Self.config)
        let a = try await s.call("POST", "/v1/queues/lock/visitors?on_timeout=cancel", #"{"id": "a"}"#)
        #expect(a.status == 201 && a.json["status"] as? String == "granted")
        for path in ["/v1/queues/lock/visitors?on_timeout=cancel", "/v1/queues/lock/visitors?wait=0&on_timeout=cancel"]
        {
            let b = try await s.call("POST", path, #"{}"#)
            #expect(b.status == 200 && b.json["status"] as? String == "cancelled")
            #expect(b.json["reason"] as? String == "timeout")
        }
        // A delayed visitor is still waiting too.
        let d = try await s.call("POST", "/v1/queues/lock/visitors?on_timeout=cancel", #"{"delay_seconds": 5}"#)
        #expect(d.json["status"] as? String == "cancelled" && d.json["reason"] as? String == "timeout")
        let counts = try #require(try await s.call("GET", "/v1/queues/lock").json["counts"] as? [String: Any])
        #expect(counts["waiting"] as? Int == 0 && counts["delayed"] as? Int == 0)
    }

    @Test(arguments: both) func keepIsTheDefault(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, Self.config)
        _ = try await s.call("POST", "/v1/queues/lock/visitors", #"{"id": "a"}"#)
        for (id, query) in [("b", "wait=0.1"), ("c", "wait=0.1&on_timeout=keep"), ("d", "on_timeout=keep")] {
            let r = try await s.call("POST", "/v1/queues/lock/visitors?\(query)", #"{"id": "\#(id)"}"#)
            #expect(r.status == 201 && r.json["status"] as? String == "waiting")
            #expect(try await status(s, id) == "waiting")
        }
    }

    @Test(arguments: both) func aHangUpStillWithdrawsAsADisconnect(_ backend: TestBackend) async throws {
        let s = try await BackendLiveServer(backend, Self.config)
        _ = try await s.call("POST", "/v1/queues/lock/visitors", #"{"id": "a"}"#)
        let body = #"{"id": "dies"}"#
        let client = KeepAliveClient(TestHTTPClient(port: s.live.port))
        try await client.sendRaw(
            Data(
                """
                POST /v1/queues/lock/visitors?wait=30&on_timeout=cancel HTTP/1.1\r
                Host: 127.0.0.1\r
                Content-Length: \(body.utf8.count)\r
                \r
                \(body)
                """.utf8))
        await s.untilParked(1)
        #expect(await s.untilVisitor("lock", "dies")?.json["status"] as? String == "waiting")
        client.disconnect()
        _ = try await poll(2) { try await status(s, "dies") != "waiting" }
        let visitor = try await s.call("GET", "/v1/queues/lock/visitors/dies").json
        #expect(visitor["status"] as? String == "cancelled" && visitor["reason"] as? String == "disconnected")
    }

    @Test(arguments: both) func aBadValueIsRejectedAndEnqueuesNothing(_ backend: TestBackend) async throws {
        let s = try await BackendApp(backend, Self.config)
        for value in ["foo", "", "CANCEL"] {
            let r = try await s.call("POST", "/v1/queues/lock/visitors?wait=1&on_timeout=\(value)", #"{"id": "x"}"#)
            #expect(r.status == 400 && r.code == "bad_request")
            #expect(r.json["field"] as? String == "on_timeout")
        }
        #expect(try await s.call("GET", "/v1/queues/lock/visitors/x").status == 404)
    }
}
