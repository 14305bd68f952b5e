import Dispatch
import Foundation
import Sockets

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A minimal HTTP/1.1 client for `GET` over POSIX sockets: what a pipeline's
/// `http` source needs, and nothing more (no TLS, no redirects, no proxies,
/// one connection per request with `Connection: close`).
///
/// The blocking socket work runs on a Dispatch queue, never on the Swift
/// cooperative pool, and every step (resolve, connect, send, each read) is
/// bounded by one overall deadline.
package enum HTTPClient {
    /// Why a request failed: a bad URL, an unreachable host, a timeout, a
    /// malformed or oversized response.
    package struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// What went wrong.
        package var message: String
        /// A failure with this message.
        package init(_ message: String) { self.message = message }
        /// The message.
        package var description: String { message }
    }

    /// Longest response head (status line and headers) accepted.
    static let maxHeadBytes = 16 * 1024

    /// `GET url` and the whole response.
    ///
    /// - Parameters:
    ///   - url: `http://host[:port][/path][?query]`; the host is an IPv4
    ///     literal, an IPv6 literal in brackets, `localhost` (127.0.0.1, then
    ///     ::1) or a name resolved with `getaddrinfo`.
    ///   - timeoutSeconds: for the whole exchange, connect to last byte.
    ///   - maxBodyBytes: a longer body (declared or received) is refused.
    /// - Returns: the status (after any 1xx interim responses) and the body,
    ///   de-chunked; empty for 204 and 304.
    /// - Throws: `Failure`.
    package static func get(url: String, timeoutSeconds: Double, maxBodyBytes: Int) async throws
        -> (status: Int, body: [UInt8])
    {
        let target = try Target(url: url)
        let deadline = deadline(after: timeoutSeconds)
        return try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(
                    with: Result { try exchange(target, deadline: deadline, maxBodyBytes: maxBodyBytes) })
            }
        }
    }

    /// The same request, blocking the calling thread: tests time it without
    /// depending on when the cooperative pool resumes an awaiting task.
    static func getBlocking(url: String, timeoutSeconds: Double, maxBodyBytes: Int) throws -> (
        status: Int, body: [UInt8]
    ) {
        try exchange(try Target(url: url), deadline: deadline(after: timeoutSeconds), maxBodyBytes: maxBodyBytes)
    }

    /// A deadline on the monotonic clock, in nanoseconds.
    private static func deadline(after seconds: Double) -> UInt64 {
        DispatchTime.now().uptimeNanoseconds &+ UInt64(min(max(0, seconds), 86_400) * 1e9)
    }

    /// Blocking work happens here, off the cooperative pool.
    private static let queue = DispatchQueue(label: "usher.http-client", attributes: .concurrent)

    // MARK: - URL

    /// The parts of an `http://` URL the request needs.
    struct Target: Equatable {
        var host: String
        var port: UInt16
        /// Path and query, as sent on the request line.
        var requestTarget: String
        /// The `Host` header's value.
        var hostHeader: String

        init(url: String) throws(Failure) {
            guard let parts = URLComponents(string: url), parts.scheme?.lowercased() == "http" else {
                throw Failure("\(url): only http:// URLs are supported")
            }
            guard var host = parts.host, !host.isEmpty else { throw Failure("\(url): no host") }
            if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            let port = parts.port ?? 80
            guard (1...65_535).contains(port) else { throw Failure("\(url): bad port") }
            self.host = host
            self.port = UInt16(port)
            var target = parts.percentEncodedPath.isEmpty ? "/" : parts.percentEncodedPath
            if let query = parts.percentEncodedQuery { target += "?" + query }
            guard !target.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else {
                throw Failure("\(url): the path may not contain spaces or control characters")
            }
            requestTarget = target
            let bracketed = host.contains(":") ? "[\(host)]" : host
            hostHeader = port == 80 ? bracketed : "\(bracketed):\(port)"
        }
    }

    // MARK: - The exchange

    private static func exchange(_ target: Target, deadline: UInt64, maxBodyBytes: Int) throws -> (
        status: Int, body: [UInt8]
    ) {
        let connection = try Connection.open(target, deadline: deadline)
        defer { connection.closeSocket() }
        let request =
            "GET \(target.requestTarget) HTTP/1.1\r\nHost: \(target.hostHeader)\r\n"
            + "User-Agent: usher\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
        try connection.sendAll(Array(request.utf8))
        var reader = ResponseReader(connection: connection)
        while true {
            let head = try reader.head()
            // Interim responses (100 Continue, 103 Early Hints) precede the real one.
            if (100...199).contains(head.status) { continue }
            if head.status == 204 || head.status == 304 { return (head.status, []) }
            return (head.status, try reader.body(head, maxBodyBytes: maxBodyBytes))
        }
    }

    /// A parsed response head.
    struct Head {
        var status: Int
        /// Lower-cased names; a repeated header keeps its last value.
        var headers: [String: String]
    }

    /// Reads a response off a connection, buffering what arrives past the
    /// part asked for.
    private struct ResponseReader {
        let connection: Connection
        var buffer: [UInt8] = []
        var start = 0
        var closed = false

        init(connection: Connection) { self.connection = connection }

        var available: Int { buffer.count - start }

        /// Reads more bytes; false at end of stream.
        mutating func fill() throws -> Bool {
            if start > 0 && start == buffer.count {
                buffer.removeAll(keepingCapacity: true)
                start = 0
            }
            guard !closed else { return false }
            let n = try connection.receive(into: &buffer)
            if n == 0 { closed = true }
            return n > 0
        }

        /// Takes bytes up to (not including) the next CRLF and drops the CRLF.
        mutating func line(limit: Int) throws -> [UInt8] {
            var scanned = start
            while true {
                if let i = buffer[scanned...].firstIndex(of: 0x0A) {
                    var end = i
                    if end > start && buffer[end - 1] == 0x0D { end -= 1 }
                    let out = Array(buffer[start..<end])
                    start = i + 1
                    return out
                }
                scanned = buffer.count
                guard available <= limit else { throw Failure("response line longer than \(limit) bytes") }
                guard try fill() else { throw Failure("connection closed in the middle of the response head") }
            }
        }

        mutating func take(_ count: Int) throws -> [UInt8] {
            while available < count {
                guard try fill() else { throw Failure("connection closed before the body ended") }
            }
            defer { start += count }
            return Array(buffer[start..<start + count])
        }

        mutating func head() throws -> Head {
            var budget = HTTPClient.maxHeadBytes
            let statusLine = String(decoding: try line(limit: budget), as: UTF8.self)
            budget -= statusLine.utf8.count
            let fields = statusLine.split(separator: " ", maxSplits: 2)
            guard fields.count >= 2, fields[0].hasPrefix("HTTP/1."), fields[1].count == 3, let status = Int(fields[1])
            else {
                throw Failure("not an HTTP/1.x response: \(statusLine.prefix(80))")
            }
            var headers: [String: String] = [:]
            while true {
                let raw = try line(limit: budget)
                if raw.isEmpty { break }
                budget -= raw.count + 2
                guard budget > 0 else { throw Failure("response head longer than \(HTTPClient.maxHeadBytes) bytes") }
                let text = String(decoding: raw, as: UTF8.self)
                guard let colon = text.firstIndex(of: ":") else { throw Failure("malformed header line") }
                headers[text[..<colon].lowercased()] = text[text.index(after: colon)...]
                    .trimmingCharacters(in: .whitespaces)
            }
            return Head(status: status, headers: headers)
        }

        mutating func body(_ head: Head, maxBodyBytes: Int) throws -> [UInt8] {
            if let encoding = head.headers["transfer-encoding"]?.lowercased(), encoding != "identity" {
                guard encoding.split(separator: ",").last?.trimmingCharacters(in: .whitespaces) == "chunked" else {
                    throw Failure("unsupported Transfer-Encoding: \(encoding)")
                }
                return try chunked(maxBodyBytes: maxBodyBytes)
            }
            if let declared = head.headers["content-length"] {
                guard let length = Int(declared), length >= 0 else { throw Failure("bad Content-Length: \(declared)") }
                guard length <= maxBodyBytes else {
                    throw Failure("the body (\(length) bytes) is over the limit of \(maxBodyBytes) bytes")
                }
                return try take(length)
            }
            // Neither: the body runs to the end of the connection.
            repeat {
                guard available <= maxBodyBytes else {
                    throw Failure("the body is over the limit of \(maxBodyBytes) bytes")
                }
            } while try fill()
            guard available <= maxBodyBytes else {
                throw Failure("the body is over the limit of \(maxBodyBytes) bytes")
            }
            return try take(available)
        }

        mutating func chunked(maxBodyBytes: Int) throws -> [UInt8] {
            var out: [UInt8] = []
            while true {
                let sizeLine = String(decoding: try line(limit: 1024), as: UTF8.self)
                let hex = sizeLine.split(separator: ";", maxSplits: 1).first.map(String.init) ?? ""
                guard let size = Int(hex.trimmingCharacters(in: .whitespaces), radix: 16), size >= 0 else {
                    throw Failure("bad chunk size: \(sizeLine.prefix(40))")
                }
                if size == 0 {
                    // Trailers, if any, up to the empty line.
                    while try !line(limit: HTTPClient.maxHeadBytes).isEmpty {}
                    return out
                }
                guard size <= maxBodyBytes - out.count else {
                    throw Failure("the body is over the limit of \(maxBodyBytes) bytes")
                }
                out += try take(size)
                guard try line(limit: 2).isEmpty else { throw Failure("chunk not followed by CRLF") }
            }
        }
    }
}

// MARK: - Sockets

extension HTTPClient {
    /// One non-blocking TCP connection; every wait is a `poll` bounded by the deadline.
    final class Connection {
        private var fd: Int32
        private let deadline: UInt64

        private init(fd: Int32, deadline: UInt64) {
            self.fd = fd
            self.deadline = deadline
        }

        deinit { closeSocket() }

        /// Closes the socket (again is harmless).
        func closeSocket() {
            if fd >= 0 { close(fd) }
            fd = -1
        }

        /// Connects to the first address of the host that accepts.
        static func open(_ target: Target, deadline: UInt64) throws -> Connection {
            var lastError = "no address"
            for address in try resolve(target.host, port: target.port) {
                let fd = socket(
                    address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue | SOCK_NONBLOCK.rawValue),
                    0)
                guard fd >= 0 else { throw Failure("socket: \(HTTPClient.errnoText())") }
                let connection = Connection(fd: fd, deadline: deadline)
                do {
                    try connection.establish(address)
                    var one: Int32 = 1
                    setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                    return connection
                } catch let failure as Failure {
                    lastError = failure.message
                    connection.closeSocket()
                    if failure.message.hasPrefix("timed out") { throw failure }
                }
            }
            throw Failure("cannot connect to \(target.hostHeader): \(lastError)")
        }

        private func establish(_ address: SocketAddress) throws {
            let result = address.withSockaddr { connect(fd, $0, $1) }
            if result == 0 { return }
            guard errno == EINPROGRESS else { throw Failure(HTTPClient.errnoText()) }
            try wait(for: Int16(POLLOUT))
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
            guard error == 0 else { throw Failure(String(cString: strerror(error))) }
        }

        func sendAll(_ bytes: [UInt8]) throws {
            var offset = 0
            while offset < bytes.count {
                let n = bytes.withUnsafeBytes { raw in
                    send(fd, raw.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
                }
                if n > 0 {
                    offset += n
                } else if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
                    try wait(for: Int16(POLLOUT))
                } else {
                    throw Failure("send: \(HTTPClient.errnoText())")
                }
            }
        }

        /// Appends what arrives to `buffer`; 0 at end of stream.
        func receive(into buffer: inout [UInt8]) throws -> Int {
            let chunk = 16 * 1024
            while true {
                let old = buffer.count
                buffer.append(contentsOf: repeatElement(0, count: chunk))
                let fd = self.fd
                let n = buffer.withUnsafeMutableBytes { raw in recv(fd, raw.baseAddress! + old, chunk, 0) }
                let savedErrno = errno
                buffer.removeLast(chunk - max(0, n))
                if n >= 0 { return n }
                guard savedErrno == EAGAIN || savedErrno == EWOULDBLOCK || savedErrno == EINTR else {
                    throw Failure("recv: \(String(cString: strerror(savedErrno)))")
                }
                try wait(for: Int16(POLLIN))
            }
        }

        /// Waits until the socket is ready for `events`, or throws at the deadline.
        private func wait(for events: Int16) throws {
            while true {
                let now = DispatchTime.now().uptimeNanoseconds
                guard now < deadline else { throw Failure("timed out") }
                let milliseconds = Int32(min((deadline - now + 999_999) / 1_000_000, UInt64(Int32.max)))
                var p = pollfd(fd: fd, events: events, revents: 0)
                let n = poll(&p, 1, milliseconds)
                if n > 0 { return }
                if n < 0 && errno != EINTR { throw Failure("poll: \(HTTPClient.errnoText())") }
            }
        }
    }

    /// Literals are parsed; `localhost` is loopback without asking the
    /// resolver (so it cannot be pointed elsewhere); other names go to `getaddrinfo`.
    static func resolve(_ host: String, port: UInt16) throws -> [SocketAddress] {
        let lower = host.lowercased()
        if lower == "localhost" || lower == "localhost." {
            return [SocketAddress.ipv4("127.0.0.1", port: port), SocketAddress.ipv6("::1", port: port)].compactMap {
                $0
            }
        }
        if let a = SocketAddress.ipv4(host, port: port) ?? SocketAddress.ipv6(host, port: port) { return [a] }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let list else {
            throw Failure("cannot resolve \(host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        var out: [SocketAddress] = []
        var node: UnsafeMutablePointer<addrinfo>? = list
        while let n = node {
            let info = n.pointee
            if let sa = info.ai_addr,
                let a = SocketAddress(copying: sa, length: info.ai_addrlen, family: info.ai_family)
            {
                out.append(a)
            }
            node = info.ai_next
        }
        guard !out.isEmpty else { throw Failure("cannot resolve \(host): no IPv4 or IPv6 address") }
        return out
    }

    fileprivate static func errnoText() -> String { String(cString: strerror(errno)) }
}
