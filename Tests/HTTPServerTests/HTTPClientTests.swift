import Foundation
import Testing

@testable import HTTPClient
@testable import HTTPServer
@testable import Locking

/// A TCP server on loopback that answers every connection with the same
/// canned bytes (or with nothing, to test timeouts), and records the
/// requests it read: what `HTTPServer` cannot be made to send (chunked
/// bodies, bodies without a length, interim responses, silence).
final class CannedServer: Sendable {
    let port: UInt16
    private let fd: Int32
    private let requests = Locked<[String]>([])

    /// Listens on `127.0.0.1` (or `::1`) and answers with `response`; nil never answers.
    init(_ response: String?, ipv6: Bool = false) throws {
        let fd = socket(ipv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HTTPClient.Failure("socket") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var bound: Int32
        if ipv6 {
            var a = sockaddr_in6()
            a.sin6_family = sa_family_t(AF_INET6)
            a.sin6_addr = in6addr_loopback
            bound = withUnsafePointer(to: &a) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        } else {
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_addr.s_addr = inet_addr("127.0.0.1")
            bound = withUnsafePointer(to: &a) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            close(fd)
            throw HTTPClient.Failure("bind/listen")
        }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        // sin_port and sin6_port both sit at offset 2.
        let rawPort = withUnsafeBytes(of: storage) { $0.load(fromByteOffset: 2, as: UInt16.self) }
        self.fd = fd
        self.port = UInt16(bigEndian: rawPort)
        Thread { [self] in
            while true {
                let client = accept(fd, nil, nil)
                guard client >= 0 else {
                    // Closed here, not in stop(): the number must not be reused while this loop may still accept on it.
                    close(fd)
                    return
                }
                var received: [UInt8] = []
                var chunk = [UInt8](repeating: 0, count: 4096)
                var tv = timeval(tv_sec: 2, tv_usec: 0)
                setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
                while !received.ends(with: Array("\r\n\r\n".utf8)) {
                    let n = recv(client, &chunk, chunk.count, 0)
                    guard n > 0 else { break }
                    received += chunk[0..<n]
                }
                self.requests.withLock { $0.append(String(decoding: received, as: UTF8.self)) }
                if let response {
                    let bytes = Array(response.utf8)
                    _ = bytes.withUnsafeBytes { send(client, $0.baseAddress, bytes.count, Int32(MSG_NOSIGNAL)) }
                    close(client)
                } else {
                    // Hold the connection open without answering until the client gives up.
                    _ = recv(client, &chunk, chunk.count, 0)
                    close(client)
                }
            }
        }.start()
    }

    /// The requests read so far.
    var received: [String] { requests.withLock { $0 } }

    /// Stops listening (the accept loop ends and closes the socket).
    func stop() {
        shutdown(fd, Int32(SHUT_RDWR))
    }

    /// A loopback port where nothing listens: bound, never listened on, closed.
    static func unusedPort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard bound == 0, named == 0 else { throw HTTPClient.Failure("bind") }
        return UInt16(bigEndian: a.sin_port)
    }
}

extension Array where Element: Equatable {
    fileprivate func ends(with suffix: [Element]) -> Bool {
        count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix
    }
}

@Suite struct HTTPClientTests {
    private func text(_ body: [UInt8]) -> String { String(decoding: body, as: UTF8.self) }

    @Test func getsFromTheRealServer() async throws {
        var config = HTTPServer.Configuration()
        config.port = 0
        let server = HTTPServer(configuration: config, handler: ToyHandler())
        try server.start()
        defer { server.stop() }
        let ok = try await HTTPClient.get(
            url: "http://127.0.0.1:\(server.port)/hello", timeoutSeconds: 5, maxBodyBytes: 100)
        #expect(ok.status == 200)
        #expect(text(ok.body) == "hello")
        let missing = try await HTTPClient.get(
            url: "http://localhost:\(server.port)/nothing", timeoutSeconds: 5, maxBodyBytes: 100)
        #expect(missing.status == 404)
        // A body over the limit is refused.
        await #expect(throws: HTTPClient.Failure.self) {
            _ = try await HTTPClient.get(
                url: "http://127.0.0.1:\(server.port)/hello", timeoutSeconds: 5, maxBodyBytes: 4)
        }
    }

    @Test func sendsAPlainGetWithHostHeader() async throws {
        let server = try CannedServer("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{\"a\":1}")
        defer { server.stop() }
        let r = try await HTTPClient.get(
            url: "http://127.0.0.1:\(server.port)/next?x=1&y=a%20b", timeoutSeconds: 5, maxBodyBytes: 100)
        #expect(r.status == 200)
        #expect(text(r.body) == #"{"a":1}"#)
        let request = try #require(server.received.first)
        #expect(request.hasPrefix("GET /next?x=1&y=a%20b HTTP/1.1\r\n"))
        #expect(request.contains("\r\nHost: 127.0.0.1:\(server.port)\r\n"))
        #expect(request.contains("\r\nConnection: close\r\n"))
    }

    @Test func decodesChunkedBodies() async throws {
        let response =
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "4;ext=1\r\n{\"a\"\r\n3\r\n:12\r\nA\r\n3456789}  \r\n0\r\nX-Trailer: t\r\n\r\n"
        let server = try CannedServer(response)
        defer { server.stop() }
        let r = try await HTTPClient.get(url: "http://127.0.0.1:\(server.port)/", timeoutSeconds: 5, maxBodyBytes: 100)
        #expect(r.status == 200)
        #expect(text(r.body) == #"{"a":123456789}  "#)
        // The same body against a smaller limit is refused as it arrives.
        await #expect(throws: HTTPClient.Failure.self) {
            _ = try await HTTPClient.get(url: "http://127.0.0.1:\(server.port)/", timeoutSeconds: 5, maxBodyBytes: 10)
        }
    }

    @Test func readsABodyThatEndsWithTheConnection() async throws {
        let server = try CannedServer("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n[1,2,3]")
        defer { server.stop() }
        let r = try await HTTPClient.get(url: "http://127.0.0.1:\(server.port)/", timeoutSeconds: 5, maxBodyBytes: 100)
        #expect(text(r.body) == "[1,2,3]")
        await #expect(throws: HTTPClient.Failure.self) {
            _ = try await HTTPClient.get(url: "http://127.0.0.1:\(server.port)/", timeoutSeconds: 5, maxBodyBytes: 3)
        }
    }

    @Test func refusesADeclaredLengthOverTheLimit() async throws {
        let server = try CannedServer("HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\nxx")
        defer { server.stop() }
        let error = await #expect(throws: HTTPClient.Failure.self) {
            _ = try await HTTPClient.get(url: "http://127.0.0.1:\(server.port)/", timeoutSeconds: 5, maxBodyBytes: 1000)
        }
        #expect(error?.message.contains("over the limit") == true)
    }

    @Test func skipsInterimResponsesAndAnswers204WithoutABody() async throws {
        let server = try CannedServer("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\nX-A: b\r\n\r\n")
        defer { server.stop() }
        let r = try await HTTPClient.get(url: "http://127.0.0.1:\(server.port)/", timeoutSeconds: 5, maxBodyBytes: 100)
        #expect(r.status == 204)
        #expect(r.body.isEmpty)
    }

    @Test func speaksIPv6AndLocalhost() async throws {
        let v6 = try CannedServer("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nv6", ipv6: true)
        defer { v6.stop() }
        let r6 = try await HTTPClient.get(url: "http://[::1]:\(v6.port)/", timeoutSeconds: 5, maxBodyBytes: 100)
        #expect(text(r6.body) == "v6")
        #expect(v6.received.first?.contains("\r\nHost: [::1]:\(v6.port)\r\n") == true)
        // localhost tries 127.0.0.1, then ::1: this server is only on ::1.
        let local = try await HTTPClient.get(url: "http://localhost:\(v6.port)/", timeoutSeconds: 5, maxBodyBytes: 100)
        #expect(text(local.body) == "v6")
    }

    @Test func timesOutOnASilentServer() throws {
        let server = try CannedServer(nil)
        defer { server.stop() }
        // Blocking, so the time measured is the client's and not the wait for a pool thread.
        let started = Date()
        let error = #expect(throws: HTTPClient.Failure.self) {
            _ = try HTTPClient.getBlocking(
                url: "http://127.0.0.1:\(server.port)/", timeoutSeconds: 0.3, maxBodyBytes: 100)
        }
        #expect(error?.message.contains("timed out") == true)
        let elapsed = Date().timeIntervalSince(started)
        #expect(elapsed >= 0.25 && elapsed < 3)
    }

    @Test func failsOnRefusedConnectionsBadURLsAndGarbage() async throws {
        let port = try CannedServer.unusedPort()
        let refused = await #expect(throws: HTTPClient.Failure.self) {
            _ = try await HTTPClient.get(url: "http://127.0.0.1:\(port)/", timeoutSeconds: 2, maxBodyBytes: 100)
        }
        #expect(refused?.message.contains("cannot connect") == true)
        for url in ["https://127.0.0.1/", "ftp://127.0.0.1/", "127.0.0.1:80/", "http:///path"] {
            await #expect(throws: HTTPClient.Failure.self, "\(url)") {
                _ = try await HTTPClient.get(url: url, timeoutSeconds: 1, maxBodyBytes: 100)
            }
        }
        let garbage = try CannedServer("SSH-2.0-OpenSSH\r\n\r\n")
        defer { garbage.stop() }
        await #expect(throws: HTTPClient.Failure.self) {
            _ = try await HTTPClient.get(url: "http://127.0.0.1:\(garbage.port)/", timeoutSeconds: 2, maxBodyBytes: 100)
        }
    }
}
