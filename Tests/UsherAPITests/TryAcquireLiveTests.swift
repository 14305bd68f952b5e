import Foundation
import HTTPTestClient
import Testing

@testable import UsherAPI

/// `POST …/visitors?wait=S&on_timeout=cancel`: a try-acquire that leaves
/// nothing behind (issue 16), over real sockets.
@Suite struct TryAcquireLiveTests {
    private static let config = #"{"queues": {"lock": {"capacity": 1, "hold_seconds": 60}}}"#

    private func status(_ s: LiveServer, _ id: String) throws -> String? {
        try s.call("GET", "/v1/queues/lock/visitors/\(id)").json["status"] as? String
    }

    @Test func aWaitThatEndsCancelsTheVisitorAndSaysSo() throws {
        let s = try LiveServer(Self.config)
        #expect(try s.call("POST", "/v1/queues/lock/visitors?on_timeout=cancel", #"{"id": "a"}"#).status == 201)
        let tried = try s.call("POST", "/v1/queues/lock/visitors?wait=0.2&on_timeout=cancel", #"{"id": "b"}"#)
        #expect(tried.status == 200)
        #expect(tried.json["status"] as? String == "cancelled")
        #expect(tried.json["reason"] as? String == "timeout")
        #expect(tried.json["finished_at"] as? String != nil)
        // Nothing left behind: when a completes, nobody is granted.
        #expect(try s.call("POST", "/v1/queues/lock/visitors/a/complete").status == 200)
        let state = try s.call("GET", "/v1/queues/lock").json
        #expect((state["holding"] as? [Any])?.isEmpty == true)
        let counts = try #require(state["counts"] as? [String: Any])
        #expect(counts["cancelled_total"] as? Int == 1 && counts["timed_out_total"] as? Int == 1)
        let metrics = String(decoding: try s.call("GET", "/metrics").body, as: UTF8.self)
        #expect(metrics.contains(#"usher_resource_events_total{kind="queues",name="lock",event="timed_out"} 1"#))
    }

    @Test func aGrantWithinTheWaitIsAnsweredAsUsual() throws {
        let s = try LiveServer(Self.config)
        _ = try s.call("POST", "/v1/queues/lock/visitors", #"{"id": "a"}"#)
        let response = s.inBackground {
            try s.call("POST", "/v1/queues/lock/visitors?wait=10&on_timeout=cancel", #"{"id": "b"}"#)
        }
        s.untilParked(1)
        #expect(try s.call("POST", "/v1/queues/lock/visitors/a/complete").status == 200)
        let r = try #require(response())
        #expect(r.status == 201 && r.json["status"] as? String == "granted")
    }

    @Test func withoutAWaitItTriesOnce() throws {
        let s = try LiveServer(Self.config)
        let a = try s.call("POST", "/v1/queues/lock/visitors?on_timeout=cancel", #"{"id": "a"}"#)
        #expect(a.status == 201 && a.json["status"] as? String == "granted")
        for path in ["/v1/queues/lock/visitors?on_timeout=cancel", "/v1/queues/lock/visitors?wait=0&on_timeout=cancel"]
        {
            let b = try s.call("POST", path, #"{}"#)
            #expect(b.status == 200 && b.json["status"] as? String == "cancelled")
            #expect(b.json["reason"] as? String == "timeout")
        }
        // A delayed visitor is still waiting too.
        let d = try s.call("POST", "/v1/queues/lock/visitors?on_timeout=cancel", #"{"delay_seconds": 5}"#)
        #expect(d.json["status"] as? String == "cancelled" && d.json["reason"] as? String == "timeout")
        let counts = try #require(try s.call("GET", "/v1/queues/lock").json["counts"] as? [String: Any])
        #expect(counts["waiting"] as? Int == 0 && counts["delayed"] as? Int == 0)
    }

    @Test func keepIsTheDefault() throws {
        let s = try LiveServer(Self.config)
        _ = try s.call("POST", "/v1/queues/lock/visitors", #"{"id": "a"}"#)
        for (id, query) in [("b", "wait=0.1"), ("c", "wait=0.1&on_timeout=keep"), ("d", "on_timeout=keep")] {
            let r = try s.call("POST", "/v1/queues/lock/visitors?\(query)", #"{"id": "\#(id)"}"#)
            #expect(r.status == 201 && r.json["status"] as? String == "waiting")
            #expect(try status(s, id) == "waiting")
        }
    }

    @Test func aHangUpStillWithdrawsAsADisconnect() throws {
        let s = try LiveServer(Self.config)
        _ = try s.call("POST", "/v1/queues/lock/visitors", #"{"id": "a"}"#)
        let body = #"{"id": "dies"}"#
        let client = TestHTTPClient(port: s.port)
        try client.sendRaw(
            Data(
                """
                POST /v1/queues/lock/visitors?wait=30&on_timeout=cancel HTTP/1.1\r
                Host: 127.0.0.1\r
                Content-Length: \(body.utf8.count)\r
                \r
                \(body)
                """.utf8))
        s.untilParked(1)
        #expect(try status(s, "dies") == "waiting")
        client.disconnect()
        for _ in 0..<200 where try status(s, "dies") == "waiting" { usleep(10_000) }
        let visitor = try s.call("GET", "/v1/queues/lock/visitors/dies").json
        #expect(visitor["status"] as? String == "cancelled" && visitor["reason"] as? String == "disconnected")
    }

    @Test func aBadValueIsRejectedAndEnqueuesNothing() throws {
        let s = try LiveServer(Self.config)
        for value in ["foo", "", "CANCEL"] {
            let r = try s.call("POST", "/v1/queues/lock/visitors?wait=1&on_timeout=\(value)", #"{"id": "x"}"#)
            #expect(r.status == 400 && r.code == "bad_request")
            #expect(r.json["field"] as? String == "on_timeout")
        }
        #expect(try s.call("GET", "/v1/queues/lock/visitors/x").status == 404)
    }
}
