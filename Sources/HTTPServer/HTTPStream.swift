import CMicroHTTPD
import Glibc
import Locking

/// Where a stream's bytes come from when it pulls them rather than having
/// them written: asked only when libmicrohttpd can send more.
package protocol HTTPStreamSource: Sendable {
    /// At most `max` bytes for the client now; with `finishing`, only the rest
    /// of what was begun (the server is stopping).
    func pull(max: Int, finishing: Bool) -> HTTPStreamPull
}

/// A source's answer.
package enum HTTPStreamPull: Sendable {
    /// The next bytes, at most the `max` asked for.
    case bytes(ArraySlice<UInt8>)
    /// Nothing now: the stream suspends until `wake()`.
    case wait
    /// The stream ends once its own buffered bytes are sent.
    case end
    /// Close the connection now.
    case abort
}

/// A response whose body is written over time (Server-Sent Events).
///
/// The body is sent with chunked encoding from a buffer that producers fill
/// with `write` from any thread, then from the `source`, if any, which is
/// asked for bytes only when the connection can take them. When neither has
/// anything, libmicrohttpd's content reader suspends the connection (no
/// server thread waits, nothing polls) and the next `write`, `wake` or
/// `finish` resumes it.
///
/// A slow client is dropped: a `write` that would take the buffer past
/// `bufferLimit` ends the stream at once (the connection is closed) and
/// discards the buffer. `finish` ends it after the buffered bytes are sent;
/// the server finishes every open stream when it quiesces or stops.
package final class HTTPStream: Sendable {
    /// The status line's code.
    package let status: Int
    /// Extra headers (e.g. `Content-Type: text/event-stream`).
    let headers: [(name: String, value: String)]
    /// Most bytes buffered for a client that does not read; then it is dropped.
    let bufferLimit: Int

    /// Why a stream ended.
    package enum EndReason: Sendable, Equatable {
        /// `finish()` (or the server stopping) and the buffer was sent.
        case finished
        /// The buffer limit was passed: the client was too slow.
        case dropped
        /// The client went away, or the connection failed.
        case disconnected
    }

    private enum Ending { case none, finish, drop }

    private struct State: @unchecked Sendable {
        var buffer: [UInt8] = []
        var offset = 0
        var ending = Ending.none
        /// Set once the response is queued; nil again once it is released.
        var connection: OpaquePointer?
        /// The connection's socket, to cut off a dropped client.
        var socket: Int32 = -1
        /// Sees the client leave while the connection is suspended.
        var hangUps: HangUpWatcher?
        var suspended = false
        /// A wake-up that came while the reader was asking the source.
        var wakePending = false
        /// The source said `end`.
        var sourceEnded = false
        /// The client left while the connection was suspended.
        var clientLeft = false
        /// True once libmicrohttpd released the response.
        var released = false
        var endReason: EndReason?
        var onEnd: [@Sendable (EndReason) -> Void] = []
    }

    private let state = Locked(State())
    private let source: (any HTTPStreamSource)?

    /// A stream that starts with `status` and `headers`; `bufferLimit` bytes
    /// at most wait for the client in its own buffer, which is sent before
    /// anything `source` gives.
    package init(
        status: Int = 200, headers: [(name: String, value: String)] = [], bufferLimit: Int = 1 << 20,
        source: (any HTTPStreamSource)? = nil
    ) {
        self.status = status
        self.headers = headers
        self.bufferLimit = max(1, bufferLimit)
        self.source = source
    }

    /// Appends bytes for the client. False when the stream has ended (or ends
    /// now because the client is too slow): stop writing then.
    @discardableResult
    package func write(_ bytes: [UInt8]) -> Bool {
        guard !bytes.isEmpty else { return isOpen }
        return state.withLock { s in
            guard s.ending == .none, !s.released else { return false }
            if s.buffer.count - s.offset + bytes.count > bufferLimit {
                Self.drop(&s)
                return false
            }
            s.buffer.append(contentsOf: bytes)
            Self.wake(&s)
            return true
        }
    }

    /// Tells the stream its source has something: resumes the connection if
    /// the reader suspended it.
    package func wake() {
        state.withLock { Self.wake(&$0) }
    }

    /// Closes the connection now (the client is too slow), discarding the buffer.
    package func cut() {
        state.withLock { s in
            guard s.ending != .drop, !s.released else { return }
            Self.drop(&s)
        }
    }

    /// The hang-up watcher saw the client leave: end the stream now.
    private func clientLeft() {
        state.withLock { s in
            guard s.ending != .drop, !s.released else { return }
            s.clientLeft = true
            Self.drop(&s)
        }
    }

    /// Ends the stream once the buffered bytes are sent.
    func finish() {
        state.withLock { s in
            guard s.ending == .none, !s.released else { return }
            s.ending = .finish
            Self.wake(&s)
        }
    }

    /// True until the stream ends (finished, dropped or the client left).
    var isOpen: Bool { state.withLock { $0.ending == .none && !$0.released } }

    /// Bytes waiting for the client.
    var bufferedBytes: Int { state.withLock { $0.buffer.count - $0.offset } }

    /// Runs `handler` once, when libmicrohttpd has released the response (at
    /// once if that already happened). It may run on a server thread: keep it short.
    package func onEnd(_ handler: @escaping @Sendable (EndReason) -> Void) {
        let already: EndReason? = state.withLock { s in
            if let reason = s.endReason { return reason }
            s.onEnd.append(handler)
            return nil
        }
        if let already { handler(already) }
    }

    /// Resumes the connection if the content reader suspended it, else tells
    /// a reader asking the source to look again. Under the lock.
    private static func wake(_ s: inout State) {
        guard s.suspended, let connection = s.connection else {
            s.wakePending = true
            return
        }
        s.suspended = false
        s.hangUps?.forget(s.socket)
        MHD_resume_connection(connection)
    }

    /// Ends the stream at once, discarding the buffer. Under the lock.
    private static func drop(_ s: inout State) {
        s.ending = .drop
        s.buffer = []
        s.offset = 0
        if s.suspended {
            wake(&s)
        } else if s.connection != nil, s.socket >= 0 {
            // libmicrohttpd waits for the socket to take more, which a
            // client that does not read never does: shut the socket
            // down so the connection fails and is closed now. (The
            // response is released before libmicrohttpd closes the
            // descriptor, and `released` takes this lock: the
            // descriptor is still this connection's.)
            _ = Glibc.shutdown(s.socket, Int32(SHUT_RDWR))
        }
    }

    // MARK: - Server side

    /// The response is queued on `connection` (server thread); `hangUps`
    /// ends the stream when its client leaves while it is suspended.
    func attach(_ connection: OpaquePointer, hangUps: HangUpWatcher? = nil) {
        let socket = CUsherMHD_connection_fd(connection)
        state.withLock { s in
            s.connection = connection
            s.socket = socket
            s.hangUps = hangUps
        }
    }

    /// True while the content reader has the connection suspended.
    var isSuspended: Bool { state.withLock { $0.suspended } }

    /// libmicrohttpd's content reader: copies what is buffered, else what the
    /// source gives; with nothing, it suspends the connection and returns 0
    /// (the documented way to avoid busy waiting), and `write`, `wake` and
    /// `finish` resume it. The source is asked outside the lock.
    func read(into destination: UnsafeMutablePointer<CChar>, max: Int) -> Int {
        while true {
            let (copied, finishing) = state.withLock { s -> (Int?, Bool) in
                if s.ending == .drop { return (-2, false) }  // MHD_CONTENT_READER_END_WITH_ERROR
                let available = s.buffer.count - s.offset
                if available > 0 {
                    let n = min(available, max)
                    s.buffer.withUnsafeBytes { raw in
                        UnsafeMutableRawPointer(destination).copyMemory(from: raw.baseAddress! + s.offset, byteCount: n)
                    }
                    s.offset += n
                    if s.offset == s.buffer.count {
                        s.buffer.removeAll(keepingCapacity: s.buffer.capacity <= 65_536)
                        s.offset = 0
                    } else if s.offset >= 65_536 {
                        s.buffer.removeFirst(s.offset)
                        s.offset = 0
                    }
                    return (n, false)
                }
                if source == nil || s.sourceEnded {
                    if s.ending == .finish || s.sourceEnded { return (-1, false) }  // MHD_CONTENT_READER_END_OF_STREAM
                    return (suspend(&s), false)
                }
                s.wakePending = false
                return (nil, s.ending == .finish)
            }
            if let copied { return copied }
            guard let source else { return -2 }
            switch source.pull(max: max, finishing: finishing) {
            case .bytes(let bytes):
                let n = min(bytes.count, max)
                bytes.withUnsafeBytes { raw in
                    UnsafeMutableRawPointer(destination).copyMemory(from: raw.baseAddress!, byteCount: n)
                }
                if n > 0 { return n }
            case .end:
                state.withLock { $0.sourceEnded = true }
            case .abort:
                return -2
            case .wait:
                let suspended = state.withLock { s -> Int? in
                    if s.ending == .drop { return -2 }
                    if s.wakePending || (s.ending == .finish && !finishing) { return nil }
                    return suspend(&s)
                }
                if let suspended { return suspended }
            }
        }
    }

    /// Suspends the connection until a wake-up; 0 for libmicrohttpd. Under the lock.
    private func suspend(_ s: inout State) -> Int {
        guard let connection = s.connection else { return -2 }
        s.suspended = true
        s.wakePending = false
        MHD_suspend_connection(connection)
        s.hangUps?.watch(s.socket) { [weak self] in self?.clientLeft() }
        return 0
    }

    /// libmicrohttpd released the response: the stream is over.
    func released() {
        let (handlers, reason): ([@Sendable (EndReason) -> Void], EndReason) = state.withLock { s in
            let reason: EndReason =
                switch s.ending {
                case .drop where s.clientLeft: .disconnected
                case .drop: .dropped
                case _ where s.buffer.count == s.offset && (s.ending == .finish || s.sourceEnded): .finished
                default: .disconnected
                }
            s.released = true
            s.hangUps?.forget(s.socket)
            s.hangUps = nil
            s.connection = nil
            s.socket = -1
            s.suspended = false
            s.buffer = []
            s.offset = 0
            s.endReason = reason
            let handlers = s.onEnd
            s.onEnd = []
            return (handlers, reason)
        }
        for h in handlers { h(reason) }
    }
}

/// The content reader and free callbacks: capture-free, the stream comes
/// back through `cls` (retained while libmicrohttpd holds the response).
func streamReader(cls: UnsafeMutableRawPointer?, pos: UInt64, buf: UnsafeMutablePointer<CChar>?, max: Int) -> Int {
    guard let cls, let buf else { return -2 }
    return Unmanaged<HTTPStream>.fromOpaque(cls).takeUnretainedValue().read(into: buf, max: max)
}

func streamReleased(cls: UnsafeMutableRawPointer?) {
    guard let cls else { return }
    let stream = Unmanaged<HTTPStream>.fromOpaque(cls).takeRetainedValue()
    stream.released()
}
