import Foundation

/// A small blocking HTTP/1.1 client over a POSIX socket, for live tests:
/// it keeps one connection open (keep-alive) and shows exactly what the
/// server sent, including `Connection: close`.
public final class TestHTTPClient {
    /// A parsed response.
    public struct Response: Sendable {
        public var status: Int
        /// Header names lower-cased.
        public var headers: [String: String]
        public var body: Data

        /// A response as read from the wire (or made in-process by a tester).
        public init(status: Int, headers: [String: String], body: Data) {
            self.status = status
            self.headers = headers
            self.body = body
        }

        /// The body as UTF-8 text.
        public var text: String { String(decoding: body, as: UTF8.self) }
        /// `code` of a problem document.
        public var code: String? { json["code"] as? String }
        /// The body parsed as a JSON object (empty when it is not one).
        public var json: [String: Any] {
            (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:]
        }
    }

    public struct ClientError: Error, CustomStringConvertible {
        public let description: String

        public init(description: String) { self.description = description }
    }

    private let port: UInt16
    private let timeoutSeconds: Int
    private var fd: Int32 = -1
    private var buffer = Data()

    /// A client for `127.0.0.1:port`; it connects on the first request.
    public init(port: UInt16, timeoutSeconds: Int = 10) {
        self.port = port
        self.timeoutSeconds = timeoutSeconds
    }

    deinit { disconnect() }

    /// Closes the connection (the next request opens a new one).
    public func disconnect() {
        if fd >= 0 { close(fd) }
        fd = -1
        buffer = Data()
    }

    /// True while a connection is open.
    public var isConnected: Bool { fd >= 0 }

    private func connect() throws {
        fd = connectLoopback(port)
        guard fd >= 0 else { throw ClientError(description: "connect to 127.0.0.1:\(port) failed (errno \(errno))") }
        var tv = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Sends raw bytes on the connection (opening it if needed).
    public func sendRaw(_ data: Data) throws {
        if fd < 0 { try connect() }
        var offset = 0
        while offset < data.count {
            let n = data.withUnsafeBytes { raw in
                send(fd, raw.baseAddress! + offset, data.count - offset, Int32(MSG_NOSIGNAL))
            }
            guard n > 0 else {
                disconnect()
                throw ClientError(description: "send failed (errno \(errno))")
            }
            offset += n
        }
    }

    /// Sends a request and reads its response.
    public func request(
        _ method: String, _ path: String, body: String? = nil, headers: [String: String] = [:]
    ) throws -> Response {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (k, v) in headers { head += "\(k): \(v)\r\n" }
        let bodyData = Data((body ?? "").utf8)
        if body != nil || method == "POST" || method == "PUT" || method == "PATCH" {
            head += "Content-Length: \(bodyData.count)\r\n"
        }
        head += "\r\n"
        try sendRaw(Data(head.utf8) + bodyData)
        return try readResponse(headOnly: method == "HEAD")
    }

    /// Reads one response from the connection.
    public func readResponse(headOnly: Bool = false) throws -> Response {
        let separator = Data("\r\n\r\n".utf8)
        while buffer.range(of: separator) == nil { try fill() }
        let end = buffer.range(of: separator)!
        let head = String(decoding: buffer[buffer.startIndex..<end.lowerBound], as: UTF8.self)
        buffer = Data(buffer[end.upperBound...])
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else {
            throw ClientError(description: "bad status line in \(head)")
        }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        let length = headOnly ? 0 : Int(headers["content-length"] ?? "0") ?? 0
        while buffer.count < length { try fill() }
        let body = Data(buffer.prefix(length))
        buffer = Data(buffer.dropFirst(length))
        if headers["connection"]?.lowercased() == "close" { disconnect() }
        return Response(status: status, headers: headers, body: body)
    }

    /// Reads raw bytes up to and including the next `\n` (for streamed
    /// bodies, after `readResponse(headOnly: true)`); without the line end.
    public func readLine() throws -> String {
        while buffer.firstIndex(of: UInt8(ascii: "\n")) == nil { try fill() }
        let end = buffer.firstIndex(of: UInt8(ascii: "\n"))!
        var line = Data(buffer[buffer.startIndex..<end])
        buffer = Data(buffer[buffer.index(after: end)...])
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        return String(decoding: line, as: UTF8.self)
    }

    /// Reads one chunk of a chunked body (after `readResponse(headOnly: true)`);
    /// nil for the last, empty chunk.
    public func readChunk() throws -> Data? {
        let sizeLine = try readLine()
        guard let size = Int(sizeLine.split(separator: ";").first ?? "", radix: 16) else {
            throw ClientError(description: "bad chunk size line \(sizeLine)")
        }
        while buffer.count < size + 2 { try fill() }
        let chunk = Data(buffer.prefix(size))
        buffer = Data(buffer.dropFirst(size + 2))
        return size == 0 ? nil : chunk
    }

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let n = recv(fd, &chunk, chunk.count, 0)
        guard n > 0 else {
            disconnect()
            throw ClientError(description: n == 0 ? "connection closed by server" : "recv failed (errno \(errno))")
        }
        buffer.append(contentsOf: chunk[0..<n])
    }
}

extension TestHTTPClient {
    /// One request on a fresh connection.
    public static func once(
        port: UInt16, _ method: String, _ path: String, body: String? = nil, headers: [String: String] = [:]
    ) throws -> Response {
        let client = TestHTTPClient(port: port)
        return try client.request(method, path, body: body, headers: headers)
    }
}

/// A connected, blocking TCP socket to 127.0.0.1:`port`, or -1 (`errno` says why).
public func connectLoopback(_ port: UInt16) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return -1 }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            Foundation.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard connected == 0 else {
        let failure = errno
        close(fd)
        errno = failure
        return -1
    }
    return fd
}
