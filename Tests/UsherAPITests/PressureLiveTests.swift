import Foundation
import HTTPTestClient
import Testing

@testable import UsherAPI

extension OneAtATime {
    /// Probes answer while every connection slot is taken by idle or slow
    /// clients; stalled heads and bodies are closed (issue 14 part 3).
    @Suite(.serialized) struct PressureLiveTests {
        /// Opens `count` raw connections that each send `bytes` and wait.
        private func open(_ count: Int, port: UInt16, sending bytes: String) throws -> [TestHTTPClient] {
            var clients: [TestHTTPClient] = []
            for _ in 0..<count {
                let client = TestHTTPClient(port: port, timeoutSeconds: 3)
                if !bytes.isEmpty { try client.sendRaw(Data(bytes.utf8)) }
                clients.append(client)
            }
            return clients
        }

        private func timedProbe(_ port: UInt16, _ path: String) -> (status: Int?, seconds: Double) {
            let started = Date()
            let status = try? TestHTTPClient(port: port, timeoutSeconds: 3).request("GET", path).status
            return (status, Date().timeIntervalSince(started))
        }

        @Test func probesGetInWhenEverySlotHoldsAnIdleConnection() throws {
            let server = try LiveServer(#"{"max_connections": 20}"#)
            var idle: [TestHTTPClient] = []
            for _ in 0..<20 {
                let client = TestHTTPClient(port: server.port, timeoutSeconds: 3)
                #expect(try client.request("GET", "/v1").status == 200)
                idle.append(client)
            }
            for path in ["/healthz", "/readyz"] {
                let probe = timedProbe(server.port, path)
                #expect(probe.status == 200, "\(path)")
                #expect(probe.seconds < 2, "\(path)")
            }
            _ = idle
        }

        @Test func probesGetInWhenEverySlotHoldsASlowHead() throws {
            let server = try LiveServer(#"{"max_connections": 20}"#)
            let slow = try open(20, port: server.port, sending: "GET /v1 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            usleep(100_000)
            for path in ["/healthz", "/readyz"] {
                let probe = timedProbe(server.port, path)
                #expect(probe.status == 200, "\(path)")
                #expect(probe.seconds < 2, "\(path)")
            }
            _ = slow
        }

        @Test func aHeadSentSlowlyIsCutOffAtTheHeadTimeout() throws {
            let server = try LiveServer(#"{"request_head_timeout_seconds": 1}"#)
            let client = TestHTTPClient(port: server.port, timeoutSeconds: 5)
            let started = Date()
            var cut = false
            // One byte every 200 ms: idle-timeout logic alone would never close it.
            for byte in "GET /v1 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".utf8 {
                do { try client.sendRaw(Data([byte])) } catch {
                    cut = true
                    break
                }
                usleep(200_000)
                if Date().timeIntervalSince(started) > 12 { break }
            }
            #expect(cut)
            // The head timeout is 1 s and the reaper looks 4 times a second; the
            // rest is slack for a loaded machine, where the client notices the
            // cut only at a later send (the idle timeout would be 90 s).
            #expect(Date().timeIntervalSince(started) < 10)
        }

        @Test func aBodySentSlowlyIsCutOffAtTheBodyTimeout() throws {
            let server = try LiveServer(#"{"request_body_timeout_seconds": 1, "queues": {"q": {}}}"#)
            let client = TestHTTPClient(port: server.port, timeoutSeconds: 10)
            let started = Date()
            try client.sendRaw(
                Data("POST /v1/queues/q/visitors HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\n\r\n{}".utf8))
            #expect((try? client.readResponse()) == nil)
            #expect(Date().timeIntervalSince(started) < 8, "the body timeout is 1 s; the client gives up at 10 s")
            #expect(try server.call("GET", "/v1/queues/q").status == 200)
        }

        @Test func connectionsPerAddressAreBounded() throws {
            let server = try LiveServer(#"{"max_connections_per_ip": 3}"#)
            var held: [TestHTTPClient] = []
            for _ in 0..<3 {
                let client = TestHTTPClient(port: server.port, timeoutSeconds: 2)
                #expect(try client.request("GET", "/healthz").status == 200)
                held.append(client)
            }
            #expect((try? TestHTTPClient(port: server.port, timeoutSeconds: 2).request("GET", "/healthz")) == nil)
            held[0].disconnect()
            usleep(100_000)
            #expect(try TestHTTPClient(port: server.port, timeoutSeconds: 2).request("GET", "/healthz").status == 200)
        }

        @Test func readinessTurnsUnreadyWithoutClosingTheConnection() throws {
            let server = try LiveServer()
            let client = TestHTTPClient(port: server.port)
            #expect(try client.request("GET", "/readyz").status == 200)
            server.app.beginShutdown()
            let unready = try client.request("GET", "/readyz")
            #expect(unready.status == 503)
            #expect(unready.headers["connection"]?.lowercased() != "close")
            #expect(client.isConnected)
            #expect(try client.request("GET", "/healthz").status == 200)
        }
    }
}
