import Foundation
import HTTPTestClient
import Testing

@testable import UsherAPI
@testable import UsherCore

/// The findings of the security probe (issue 13), each as its repro.
@Suite(.serialized) struct SecurityLiveTests {
    private static let declared = #""queues": {"keep": {}, "other": {}}"#

    /// Sends a raw head on a new connection and reads the answer.
    private func raw(_ server: LiveServer, _ head: String) throws -> TestHTTPClient.Response {
        let client = TestHTTPClient(port: server.port, timeoutSeconds: 3)
        try client.sendRaw(Data(head.utf8))
        return try client.readResponse()
    }

    private func enqueued(_ server: LiveServer, _ queue: String) throws -> Int? {
        (try server.call("GET", "/v1/queues/\(queue)").json["counts"] as? [String: Any])?["enqueued_total"] as? Int
    }

    @Test func theTokenHoldsOnEveryWayOfWritingAPath() throws {
        let server = try LiveServer(#"{"auth_token": "sekrit", \#(Self.declared)}"#)
        let auth = ["Authorization": "Bearer sekrit"]
        for (method, path) in [
            ("GET", "//v1/queues"), ("PUT", "//v1/queues/x"), ("DELETE", "//v1/queues/other"), ("GET", "//v1/events"),
            ("GET", "/v1//queues"), ("GET", "/v1/./queues"), ("GET", "/x/../v1/queues"), ("GET", "/v1/queues/"),
            ("GET", "/%2Fv1/queues"),
        ] {
            let r = try server.call(method, path, method == "PUT" ? "{}" : nil)
            #expect(r.status == 400, "\(method) \(path)")
        }
        // Unknown routes under /v1 do not tell what exists without the token.
        #expect(try server.call("GET", "/v1/nope").status == 401)
        #expect(try server.call("GET", "/v1/queues/keep/nope").status == 401)
        #expect(try server.call("POST", "/v1/queues").status == 401)
        #expect(try server.call("GET", "/v1/nope", headers: auth).status == 404)
        #expect(try server.call("GET", "/nope").status == 404)
        // Nothing was created or deleted on the way.
        let list = try server.call("GET", "/v1/queues", headers: auth)
        #expect((list.json["queues"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["keep", "other"])
        // Open routes stay open; /metrics too unless metrics_require_token.
        for path in ["/healthz", "/readyz", "/openapi.json", "/", "/metrics"] {
            #expect(try server.call("GET", path).status == 200, "\(path)")
        }
    }

    @Test func metricsCanRequireTheToken() throws {
        let server = try LiveServer(#"{"auth_token": "sekrit", "metrics_require_token": true}"#)
        #expect(try server.call("GET", "/metrics").status == 401)
        #expect(try server.call("GET", "/metrics", headers: ["Authorization": "Bearer sekrit"]).status == 200)
        #expect(try server.call("GET", "/healthz").status == 200)
    }

    @Test func aNulNeverShortensAName() throws {
        let server = try LiveServer("{\(Self.declared)}")
        let deleted = try server.call("DELETE", "/v1/queues/keep%00-x")
        #expect(deleted.status == 400)
        #expect(deleted.code == "bad_request")
        #expect(try server.call("GET", "/v1/queues/keep").status == 200)
        #expect(try server.call("PUT", "/v1/queues/newq%00zzz", "{}").status == 400)
        #expect(try server.call("GET", "/v1/queues/newq").status == 404)
        #expect(try server.call("POST", "/v1/queues/keep/visitors?wait=%00", "{}").status == 400)
        #expect(try enqueued(server, "keep") == 0)
    }

    @Test func aTokenWithATrailingNulIsRefused() throws {
        let server = try LiveServer(#"{"auth_token": "sekrit"}"#)
        for head in [
            "GET /v1/queues HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sekrit\0\r\n\r\n",
            "GET /v1/queues HTTP/1.1\r\nAuthorization: Bearer sekrit\0\r\nHost: 127.0.0.1\r\n\r\n",
            "GET /v1/queues HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sekrit\0zz\r\n\r\n",
        ] {
            #expect(try raw(server, head).status == 400, "\(head.debugDescription)")
        }
        let good = "GET /v1/queues HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sekrit\r\n\r\n"
        #expect(try raw(server, good).status == 200)
    }

    @Test func crossSiteRequestsAreRefused() throws {
        let server = try LiveServer("{\(Self.declared)}")
        // A page elsewhere posting text/plain (a "simple" request no preflight stops).
        let posted = try server.call(
            "POST", "/v1/queues/keep/visitors", "{}",
            headers: ["Origin": "http://evil.example", "Content-Type": "text/plain"])
        #expect(posted.status == 403)
        #expect(posted.code == "origin_not_allowed")
        #expect(try server.call("DELETE", "/v1/queues/keep", headers: ["Origin": "null"]).status == 403)
        #expect(try enqueued(server, "keep") == 0)
        // The dashboard's own requests carry its own origin.
        let own = try server.call("POST", "/v1/queues/keep/visitors", "{}", headers: ["Origin": "http://127.0.0.1"])
        #expect(own.status == 201)

        let listed = try LiveServer(#"{"allowed_origins": ["https://app.example"], \#(Self.declared)}"#)
        #expect(try listed.call("GET", "/v1/queues", headers: ["Origin": "https://app.example"]).status == 200)
        #expect(try listed.call("GET", "/v1/queues", headers: ["Origin": "https://evil.example"]).status == 403)
    }

    @Test func foreignHostNamesAreRefusedOnLoopback() throws {
        let server = try LiveServer("{\(Self.declared)}")
        func get(host: String) throws -> TestHTTPClient.Response {
            try raw(server, "GET /v1/queues HTTP/1.1\r\nHost: \(host)\r\n\r\n")
        }
        for host in ["evil.example", "evil.example:8080", "10.0.0.1", "127.0.0.1.evil.example"] {
            let r = try get(host: host)
            #expect(r.status == 421, "\(host)")
            #expect(r.code == "host_not_allowed", "\(host)")
        }
        for host in ["localhost", "LOCALHOST:8080", "127.0.0.1:1", "127.1.2.3", "[::1]:8080", "app.localhost"] {
            #expect(try get(host: host).status == 200, "\(host)")
        }
        let widened = try LiveServer(#"{"allowed_hosts": ["usher.internal"]}"#)
        #expect(try raw(widened, "GET /v1 HTTP/1.1\r\nHost: usher.internal:8080\r\n\r\n").status == 200)
        #expect(try raw(widened, "GET /v1 HTTP/1.1\r\nHost: evil.example\r\n\r\n").status == 421)
        let any = try LiveServer(#"{"allowed_hosts": ["*"]}"#)
        #expect(try raw(any, "GET /v1 HTTP/1.1\r\nHost: evil.example\r\n\r\n").status == 200)
    }

    @Test func anEmptyTokenIsAnErrorWhereverItIsSet() throws {
        #expect(throws: FieldError.self) { try UsherConfig.load(path: nil, environment: ["USHER_TOKEN": ""]) }
        #expect(throws: FieldError.self) { try UsherConfig.parse(try JSONValue.parse(#"{"auth_token": ""}"#)) }
        #expect(throws: FieldError.self) { try UsherConfig.parse(try JSONValue.parse(#"{"auth_token": "two words"}"#)) }
        #expect(throws: FieldError.self) { try UsherConfig.load(path: nil, environment: ["USHER_TOKEN": "a\u{1}"]) }
        #expect(try UsherConfig.load(path: nil, environment: ["USHER_TOKEN": "t"]).authToken == "t")
        #expect(try UsherConfig.load(path: nil, environment: [:]).authToken == nil)
    }

    /// At the app: the headers its checks read cannot be
    /// given twice, Host is an authority, and whitespace around it is fine.
    @Test func theHeadersTheChecksReadAreUnambiguous() throws {
        let server = try LiveServer(#"{"auth_token": "sekrit"}"#)
        let auth = "Authorization: Bearer sekrit\r\n"
        for head in [
            "GET /v1/queues HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\(auth)\r\n",
            "GET /v1/queues HTTP/1.1\r\nHost: 127.0.0.1:80@evil.example\r\n\(auth)\r\n",
            "GET /v1/queues HTTP/1.1\r\n\(auth)\r\n",
            "GET /v1/queues HTTP/1.1\r\nHost: 127.0.0.1\r\n\(auth)\(auth)\r\n",
            "GET /v1/queues HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://127.0.0.1\r\nOrigin: http://evil.example\r\n\(auth)\r\n",
        ] {
            let r = try raw(server, head)
            #expect(r.status == 400, "\(head.debugDescription)")
            #expect(r.code == "bad_request", "\(head.debugDescription)")
        }
        #expect(try raw(server, "GET /v1/queues HTTP/1.1\r\nHost:  127.0.0.1 \r\n\(auth)\r\n").status == 200)
        let padded = "GET /v1/queues HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization:  Bearer sekrit \r\n\r\n"
        #expect(try raw(server, padded).status == 200)
    }

    /// A refused request that waits for `100 Continue`
    /// gets its refusal instead, before sending its body.
    @Test func aRefusalComesBeforeOneHundredContinue() throws {
        let server = try LiveServer(#"{"auth_token": "sekrit", \#(Self.declared)}"#)
        for extra in ["", "Authorization: Bearer nope\r\n", "Host: evil.example\r\n"] {
            let client = TestHTTPClient(port: server.port, timeoutSeconds: 3)
            let host = extra.hasPrefix("Host") ? "" : "Host: 127.0.0.1\r\n"
            try client.sendRaw(
                Data(
                    "POST /v1/queues/keep/visitors HTTP/1.1\r\n\(host)\(extra)Expect: 100-continue\r\nContent-Length: 2\r\n\r\n"
                        .utf8))
            let first = try client.readResponse()
            #expect([401, 421].contains(first.status), "\(extra.debugDescription)")
        }
        // With the token, 100 Continue, then the answer to the body: the
        // only visitor that got in.
        let client = TestHTTPClient(port: server.port, timeoutSeconds: 3)
        try client.sendRaw(
            Data(
                "POST /v1/queues/keep/visitors HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sekrit\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"
                    .utf8))
        #expect(try client.readResponse().status == 100)
        try client.sendRaw(Data("{}".utf8))
        #expect(try client.readResponse().status == 201)
        let keep = try server.call("GET", "/v1/queues/keep", headers: ["Authorization": "Bearer sekrit"])
        #expect((keep.json["counts"] as? [String: Any])?["enqueued_total"] as? Int == 1)
    }

    /// Many query parameters answer at once on any route.
    @Test func manyQueryParametersAnswerAtOnce() throws {
        let server = try LiveServer("{}")
        for count in [10, 100, 116, 200, 1500] {
            let query = (0..<count).map { "p\($0)=1" }.joined(separator: "&")
            let start = Date()
            let r = try raw(server, "GET /healthz?\(query) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(r.status == (count <= 100 ? 200 : 414), "\(count)")
            #expect(Date().timeIntervalSince(start) < 1, "\(count)")
        }
    }
}
