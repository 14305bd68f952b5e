import Answers
import CMicroHTTPD
import Foundation
import Locking
import Sockets
import Synchronization

/// An HTTP/1.1 server on libmicrohttpd: one internal polling thread per
/// pool member with epoll, and suspend/resume so that a request whose answer
/// must wait holds no server thread.
///
/// This target is the only code that touches C.
package final class HTTPServer: @unchecked Sendable {
    /// Settings for the daemon. Every field has a default.
    package struct Configuration: Sendable {
        /// Address to bind (IPv4 or IPv6 literal, or `localhost`).
        package var host: String = "127.0.0.1"
        /// Port to bind; 0 picks a free one (see `HTTPServer.port`).
        package var port: UInt16 = 8080
        /// Larger bodies are refused with the handler's 413 without being buffered.
        package var maxBodyBytes: Int = 65_536
        /// Most connections open at once (libmicrohttpd's own default is only 1,020).
        package var connectionLimit: Int = 10_000
        /// Idle connections are closed after this many seconds.
        package var idleTimeoutSeconds: Int = 90
        /// A request head not complete this long after the connection was
        /// accepted (or its request line arrived) closes the connection.
        package var requestHeadTimeoutSeconds: Double = 10
        /// A body not complete this long after its head closes the connection.
        package var requestBodyTimeoutSeconds: Double = 30
        /// Most connections from one client address; 0: no limit.
        package var maxConnectionsPerAddress: Int = 0
        /// Server threads, each with its own epoll loop.
        var threads: Int = 2
        /// Per-connection memory pool in bytes (libmicrohttpd's default is 32 KiB).
        package var connectionMemoryLimit: Int = 32 * 1024
        /// Request headers copied into `HTTPRequest.headers` (lower-case
        /// names); a request that gives one of them twice is refused.
        package var capturedHeaders: [String] = []
        /// Most header lines in a request head; more are answered 431.
        package var maxHeaders = 100
        /// Most query arguments in a request target; more are answered 414.
        package var maxQueryArguments = 100

        package init() {}
    }

    /// Why the server could not start.
    package struct StartError: Error, CustomStringConvertible {
        package let description: String
    }

    private let configuration: Configuration
    private let handler: any HTTPHandler
    /// `capturedHeaders` as lower-case bytes, for comparing without making strings.
    private let capturedHeaderNames: [(bytes: [UInt8], name: String)]
    private var daemon: OpaquePointer?
    private var boundPort: UInt16 = 0
    private let counters = Locked(Counters())
    /// False once `quiesce()` was called: new connections are closed at once.
    private let accepting = Atomic<Bool>(true)
    private let deferredExecutor = DeferredExecutor()
    /// Tells parked requests that their client hung up.
    private let hangUps = HangUpWatcher()
    /// Open connections and their phases: stall timeouts, room for new ones.
    let connections: ConnectionTable
    /// Open streamed responses, ended when the server quiesces or stops.
    private let streams = Locked<[ObjectIdentifier: HTTPStream]>([:])

    private struct Counters {
        var active = 0
        var suspended = 0
    }

    /// Creates a server; nothing is bound until `start()`.
    package init(configuration: Configuration, handler: any HTTPHandler) {
        self.configuration = configuration
        self.handler = handler
        self.capturedHeaderNames = configuration.capturedHeaders.map { (Array($0.lowercased().utf8), $0.lowercased()) }
        self.connections = ConnectionTable(
            limits: ConnectionTable.Limits(
                maxConnections: configuration.connectionLimit, perAddress: configuration.maxConnectionsPerAddress,
                headTimeout: configuration.requestHeadTimeoutSeconds,
                bodyTimeout: configuration.requestBodyTimeoutSeconds,
                idleTimeout: Double(configuration.idleTimeoutSeconds)))
    }

    deinit {
        stop()
    }

    /// The bound port (after `start()`).
    package var port: UInt16 { boundPort }

    /// Room left in the connection's pool for an answer's head: Usher's
    /// (a 429 with `Retry-After`, an event stream's) measured 124–165 bytes
    /// with what libmicrohttpd adds; the rest is margin for longer headers.
    static let answerHeadBytes = 1024

    /// What `RequestHead` counts against.
    private var headLimits: RequestHead.Limits {
        RequestHead.Limits(headers: configuration.maxHeaders, queryArguments: configuration.maxQueryArguments)
    }

    /// Requests that have arrived and not finished.
    var activeRequests: Int { counters.withLock { $0.active } }

    /// Requests parked while their deferred answer is produced.
    package var suspendedRequests: Int {
        counters.withLock { $0.suspended } + streams.withLock { $0.values.count { $0.isSuspended } }
    }

    /// Streamed responses still open.
    var openStreams: Int { streams.withLock { $0.count } }

    /// Bytes the open streams hold in their own buffers.
    var streamBufferedBytes: Int { streams.withLock { $0.values.reduce(0) { $0 + $1.bufferedBytes } } }

    /// Ends every open stream after what it has buffered.
    func finishStreams() {
        for stream in streams.withLock({ Array($0.values) }) { stream.finish() }
    }

    /// Binds and starts serving. Throws when the address cannot be bound.
    package func start() throws(StartError) {
        precondition(daemon == nil, "already started")
        let address = try SocketAddress(host: configuration.host, port: configuration.port)
        var flags =
            MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_EPOLL.rawValue
            | MHD_ALLOW_SUSPEND_RESUME.rawValue
        if address.isIPv6 { flags |= MHD_USE_IPv6.rawValue }
        // Room over the limit for new connections admitted while the ones
        // closed to make room for them are still going (`ConnectionTable.admit`).
        let headroom = max(16 * max(1, configuration.threads), configuration.connectionLimit / 50)
        let started: OpaquePointer? = address.withSockaddr { sockaddr, _ in
            var options: [MHD_OptionItem] = [
                MHD_OptionItem(
                    option: .CONNECTION_LIMIT, value: configuration.connectionLimit + headroom, ptr_value: nil),
                MHD_OptionItem(option: .CONNECTION_TIMEOUT, value: configuration.idleTimeoutSeconds, ptr_value: nil),
                MHD_OptionItem(option: .THREAD_POOL_SIZE, value: max(1, configuration.threads), ptr_value: nil),
                MHD_OptionItem(
                    option: .CONNECTION_MEMORY_LIMIT, value: configuration.connectionMemoryLimit, ptr_value: nil),
                MHD_OptionItem(option: .SOCK_ADDR, value: 0, ptr_value: UnsafeMutableRawPointer(mutating: sockaddr)),
                MHD_OptionItem(option: .END, value: 0, ptr_value: nil),
            ]
            let me = Unmanaged.passUnretained(self).toOpaque()
            return options.withUnsafeMutableBufferPointer { buffer in
                CUsherMHD_start_daemon(
                    flags, configuration.port, acceptPolicy, me, accessHandler, me, requestCompleted, me,
                    uriLogged, me, connectionNotified, me, unescaped, me, buffer.baseAddress)
            }
        }
        guard let started else {
            throw StartError(
                description:
                    "cannot listen on \(configuration.host):\(configuration.port) (address in use, or not an address of this machine)"
            )
        }
        daemon = started
        boundPort = CUsherMHD_daemon_port(started)
        connections.startReaping()
    }

    /// Stops accepting new connections; open connections are served on.
    ///
    /// New connections are closed as soon as they are accepted rather than
    /// with `MHD_quiesce_daemon`, which in 0.9.75 with a thread pool on epoll
    /// can race its own workers and abort ("Failed to remove listen FD from
    /// epoll set").
    package func quiesce() {
        accepting.store(false, ordering: .releasing)
        finishStreams()
    }

    fileprivate var isAccepting: Bool { accepting.load(ordering: .acquiring) }

    /// Waits until no request is in progress, or until `deadline`. True when drained.
    package func waitUntilIdle(deadline: Date) -> Bool {
        while Date() < deadline {
            if counters.withLock({ $0.active == 0 && $0.suspended == 0 }) && openStreams == 0 { return true }
            usleep(5_000)
        }
        return counters.withLock { $0.active == 0 && $0.suspended == 0 } && openStreams == 0
    }

    /// Stops the daemon and closes every connection. Call after parked requests
    /// were answered (stopping with suspended connections is not allowed).
    package func stop() {
        hangUps.stop()
        connections.stop()
        guard let daemon else { return }
        // Streams end after their buffered bytes; a suspended one is resumed.
        finishStreams()
        // libmicrohttpd aborts when stopped with suspended connections: give
        // deferred answers a moment, and if some never come, leave the daemon
        // running rather than crash (the process is about to exit anyway).
        let deadline = Date().addingTimeInterval(1)
        while suspendedRequests > 0 && Date() < deadline { usleep(1_000) }
        guard suspendedRequests == 0 else { return }
        self.daemon = nil
        MHD_stop_daemon(daemon)
    }

    // MARK: - Callbacks (on server threads)

    /// A request line has arrived: its context starts here, holding the raw
    /// target (libmicrohttpd decodes it in place afterwards).
    fileprivate func requestStarted(uri: UnsafePointer<CChar>?, connection: OpaquePointer?) -> UnsafeMutableRawPointer {
        let entry = connection.flatMap(CUsherMHD_socket_context).map {
            Unmanaged<ConnectionTable.Entry>.fromOpaque($0).takeUnretainedValue()
        }
        if let entry { connections.moved(entry, to: .head) }
        let line = uri.map { uri in
            RequestHead.RawLine(
                target: Array(UnsafeRawBufferPointer(start: uri, count: strlen(uri))), address: UInt(bitPattern: uri))
        }
        if let uri, let line {
            entry?.target.store(line.address, ordering: .relaxed)
            // libmicrohttpd 0.9.75 would next parse the query into a table in
            // the connection's memory pool; when that fills up, it loses the
            // head and never answers. `RequestTarget` parses the raw target,
            // so the query it sees starts with a NUL: nothing to parse.
            if let question = line.target.firstIndex(of: UInt8(ascii: "?")), question + 1 < line.target.count {
                UnsafeMutableRawPointer(mutating: uri).storeBytes(of: 0, toByteOffset: question + 1, as: UInt8.self)
            }
        }
        counters.withLock { $0.active += 1 }
        return Unmanaged.passRetained(RequestContext(line: line, connection: entry)).toOpaque()
    }

    /// libmicrohttpd unescapes a query argument or the path in place. The
    /// path is left alone (`RequestTarget` reads the raw bytes). An argument
    /// means a query hidden behind a NUL in the target (`requestStarted`
    /// empties the visible one), which is refused now: parsing it may fill
    /// the connection's pool, after which libmicrohttpd would never answer.
    fileprivate func unescape(_ text: UnsafeMutablePointer<CChar>, connection: OpaquePointer?) -> Int {
        let length = strlen(text)
        guard let connection, let stored = CUsherMHD_socket_context(connection) else { return length }
        let entry = Unmanaged<ConnectionTable.Entry>.fromOpaque(stored).takeUnretainedValue()
        let target = entry.target.exchange(0, ordering: .relaxed)
        if target != 0 && target != UInt(bitPattern: text) {
            writeFinal(refusal(.badRequest("the request line holds a NUL byte or is malformed")), on: connection)
            shutdown(CUsherMHD_connection_fd(connection), Int32(SHUT_RD))
        }
        return length
    }

    fileprivate func handle(
        connection: OpaquePointer, method: UnsafePointer<CChar>?, url: UnsafePointer<CChar>?,
        version: UnsafePointer<CChar>?, uploadData: UnsafePointer<CChar>?, uploadSize: UnsafeMutablePointer<Int>,
        slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> MHD_Result {
        guard let raw = slot.pointee else { return .NO }
        let context = Unmanaged<RequestContext>.fromOpaque(raw).takeUnretainedValue()
        let maxBody = configuration.maxBodyBytes

        if !context.machine.withLock({ $0.isPastHead }) {
            // First call: the head only. Answering now costs keep-alive
            // (libmicrohttpd 0.9.75 closes the connection), which is wanted
            // for every refusal here.
            guard let method else { return .NO }
            // An answer's head takes room in the connection's pool too; where
            // the request left too little, libmicrohttpd would close without
            // a word: answer on the socket instead.
            if RequestHead.crowdsPool(
                connection, pool: configuration.connectionMemoryLimit, room: Self.answerHeadBytes)
            {
                let refused = HTTPRefusal.headerFieldsTooLarge(
                    "the request head is too large: with its answer it must fit in \(configuration.connectionMemoryLimit) bytes (connection_memory_bytes)"
                )
                _ = context.machine.withLock { $0.headChecked(.failure(refused), maxBodyBytes: maxBody) }
                writeFinal(refusal(refused), on: connection)
                return .NO
            }
            let result: Result<Int?, HTTPRefusal>
            var checked: RequestHead?
            do throws(HTTPRefusal) {
                let head = try RequestHead.check(
                    connection: connection, method: method, url: url, version: version, line: context.line,
                    captured: capturedHeaderNames, limits: headLimits)
                context.accept(method: String(cString: method), head: head)
                checked = head
                result = .success(head.contentLength)
            } catch {
                result = .failure(error)
            }
            switch context.machine.withLock({ $0.headChecked(result, maxBodyBytes: maxBody) }) {
            case .receive:
                if let head = checked, head.expectsContinue,
                    let refused = handler.refusalBeforeBody(
                        HTTPRequest(
                            method: context.method, path: context.path, query: context.query, headers: context.headers))
                {
                    // Before libmicrohttpd answers 100 Continue, which it does
                    // when this call queues nothing.
                    context.machine.withLock { $0.refusedBeforeBody() }
                    var response = refused
                    response.headers.append(("Connection", "close"))
                    return queue(response, on: connection)
                }
                if let head = checked, head.isChunked {
                    context.chunks = ChunkFraming(headEnd: head.end, span: configuration.connectionMemoryLimit)
                }
                if let entry = context.connection { connections.moved(entry, to: .body) }
                return .YES
            case .refuse(let refused): return queue(refusal(refused), on: connection)
            }
        }

        if uploadSize.pointee > 0 {
            let size = uploadSize.pointee
            uploadSize.pointee = 0
            var action = RequestStateMachine.BodyAction.append
            if let chunks = context.chunks, let uploadData {
                switch chunks.line(before: UInt(bitPattern: uploadData)) {
                case .unseen: break
                case .malformed(let reason):
                    action = context.machine.withLock { $0.framingRefused(.badRequest(reason)) }
                case .declared(let declared):
                    action = context.machine.withLock { $0.chunkDeclared(declared, maxBodyBytes: maxBody) }
                }
            }
            if action == .append {
                action = context.machine.withLock { $0.bodyArrived(count: size, maxBodyBytes: maxBody) }
            }
            switch action {
            case .append:
                if let uploadData {
                    uploadData.withMemoryRebound(to: UInt8.self, capacity: size) {
                        context.body.append($0, count: size)
                    }
                }
                return .YES
            case .drop:
                return .YES
            case .refuseAndClose(let refused):
                // libmicrohttpd 0.9.75 cannot queue an answer in the middle of
                // an upload: write it on the socket and close.
                writeFinal(refusal(refused), on: connection)
                return .NO
            }
        }

        switch context.machine.withLock({ $0.called() }) {
        case .none: return .YES
        case .close: return .NO
        case .queue(let response): return queue(response, on: connection)
        case .handle: if let entry = context.connection { connections.moved(entry, to: .busy) }
        }

        let request = HTTPRequest(
            method: context.method, path: context.path, query: context.query, headers: context.headers,
            body: context.body)
        switch handler.handle(request) {
        case .answer(.ready(let result), _):
            let response = result.get()
            context.machine.withLock { $0.answered(undelivered: response.undelivered) }
            return queue(response, on: connection)
        case .stream(let stream):
            context.machine.withLock { $0.answered(undelivered: nil) }
            return queue(stream, on: connection)
        case .answer(.later(let work), let finished):
            park(context, connection: connection, work: work, finished: finished)
            return .YES
        case .answer(.handedBack(let start), let finished):
            park(context, connection: connection, start: start, finished: finished)
            return .YES
        }
    }

    /// Suspends the connection while `work` runs as a task, watching its
    /// socket: a hang-up cancels the work and closes the connection at once;
    /// an answer the client can no longer take is undone.
    private func park(
        _ context: RequestContext, connection: OpaquePointer,
        work: @escaping @Sendable () async -> Result<HTTPResponse, Never>, finished: (@Sendable (HTTPResponse) -> Void)?
    ) {
        let answer = suspend(context, connection: connection, finished: finished)
        let task = Task(executorPreference: deferredExecutor) { answer(await work()) }
        context.work.withLock { $0 = task }
        // A hang-up seen before the task was stored cancelled nothing.
        if context.machine.withLock({ $0.isAbandoned }) { task.cancel() }
    }

    /// Suspends the connection, then hands `start` the function that answers
    /// it (no task: a hang-up closes the connection, and the answer, when it
    /// comes, is undone).
    private func park(
        _ context: RequestContext, connection: OpaquePointer,
        start: @Sendable (@escaping HTTPAnswer.Receiver) -> Void, finished: (@Sendable (HTTPResponse) -> Void)?
    ) {
        start(suspend(context, connection: connection, finished: finished))
    }

    /// Suspends the connection and watches its socket; returns the function
    /// that answers it (call it once, from any thread).
    private func suspend(
        _ context: RequestContext, connection: OpaquePointer, finished: (@Sendable (HTTPResponse) -> Void)?
    ) -> HTTPAnswer.Receiver {
        context.machine.withLock { $0.parked() }
        counters.withLock { $0.suspended += 1 }
        MHD_suspend_connection(connection)
        let handle = ConnectionHandle(raw: connection)
        let socket = CUsherMHD_connection_fd(connection)
        hangUps.watch(socket) { [self] in
            guard context.machine.withLock({ $0.hungUp() }) == .cancelWorkAndResume else { return }
            context.work.withLock { $0?.cancel() }
            resume(handle)
        }
        return { [self] result in
            let response = result.get()
            finished?(response)
            hangUps.forget(socket)
            let peerGone = HangUpWatcher.peerHasClosed(socket)
            switch context.machine.withLock({ $0.workFinished(response, peerGone: peerGone) }) {
            case .resume:
                resume(handle)
            case .resumeAndUndo(let undo):
                undo?()
                resume(handle)
            case .undo(let undo):
                undo?()
            }
        }
    }

    /// Resumes a parked connection (exactly once per park).
    private func resume(_ handle: ConnectionHandle) {
        counters.withLock { $0.suspended -= 1 }
        MHD_resume_connection(handle.raw)
    }

    /// The handler's answer to a refused request, closing the connection.
    private func refusal(_ refusal: HTTPRefusal) -> HTTPResponse {
        var response = handler.refusal(refusal)
        response.headers.append(("Connection", "close"))
        return response
    }

    /// Writes a whole response on the connection's socket, bypassing
    /// libmicrohttpd (for an answer it cannot queue); the caller closes it.
    private func writeFinal(_ response: HTTPResponse, on connection: OpaquePointer) {
        let fd = CUsherMHD_connection_fd(connection)
        guard fd >= 0 else { return }
        var head = "HTTP/1.1 \(response.status) \(HTTPStatus.reason(response.status))\r\n"
        for (name, value) in response.headers { head += "\(name): \(value)\r\n" }
        head += "Content-Length: \(response.body.count)\r\n\r\n"
        let bytes = Array(head.utf8) + response.body
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        shutdown(fd, Int32(SHUT_WR))
    }

    /// Queues a streamed response; the stream is retained until libmicrohttpd
    /// releases the response (its free callback).
    private func queue(_ stream: HTTPStream, on connection: OpaquePointer) -> MHD_Result {
        let retained = Unmanaged.passRetained(stream).toOpaque()
        guard
            let response = MHD_create_response_from_callback(
                UInt64.max, 1024, streamReader, retained, streamReleased)
        else {
            Unmanaged<HTTPStream>.fromOpaque(retained).release()
            return .NO
        }
        addHeaders(stream.headers, to: response)
        let key = ObjectIdentifier(stream)
        streams.withLock { $0[key] = stream }
        stream.onEnd { [weak self] _ in _ = self?.streams.withLock { $0.removeValue(forKey: key) } }
        stream.attach(connection, hangUps: hangUps)
        let result = MHD_queue_response(connection, UInt32(stream.status), response)
        MHD_destroy_response(response)
        // Stopping already: the stream sends what it has and ends.
        if !isAccepting { stream.finish() }
        return result
    }

    fileprivate func completed(
        connection: OpaquePointer?, slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>?, delivered: Bool
    ) {
        guard let slot, let raw = slot.pointee else { return }
        let context = Unmanaged<RequestContext>.fromOpaque(raw).takeRetainedValue()
        if let entry = context.connection { connections.moved(entry, to: .idle) }
        context.machine.withLock { $0.completed(delivered: delivered) }?()
        slot.pointee = nil
        counters.withLock { $0.active -= 1 }
    }

    /// Adds the headers through `withCString`, which lends a string's own
    /// bytes (an implicit conversion copies each into a new array).
    private func addHeaders(_ headers: [(name: String, value: String)], to response: OpaquePointer) {
        for (name, value) in headers {
            name.withCString { name in
                value.withCString { value in _ = MHD_add_response_header(response, name, value) }
            }
        }
    }

    private func queue(_ response: HTTPResponse, on connection: OpaquePointer) -> MHD_Result {
        let created = response.body.withUnsafeBytes { bytes in
            MHD_create_response_from_buffer(
                bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), .RESPMEM_MUST_COPY)
        }
        guard let mhdResponse = created else { return .NO }
        addHeaders(response.headers, to: mhdResponse)
        let result = MHD_queue_response(connection, UInt32(response.status), mhdResponse)
        MHD_destroy_response(mhdResponse)
        return result
    }

}

// Capture-free C callbacks: they find their owner through the `cls` pointer.

private func accessHandler(
    cls: UnsafeMutableRawPointer?, connection: OpaquePointer?, url: UnsafePointer<CChar>?,
    method: UnsafePointer<CChar>?, version: UnsafePointer<CChar>?, uploadData: UnsafePointer<CChar>?,
    uploadSize: UnsafeMutablePointer<Int>?, slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
) -> MHD_Result {
    guard let cls, let connection, let uploadSize, let slot else { return .NO }
    return Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue().handle(
        connection: connection, method: method, url: url, version: version, uploadData: uploadData,
        uploadSize: uploadSize, slot: slot)
}

private func unescaped(
    cls: UnsafeMutableRawPointer?, connection: OpaquePointer?, text: UnsafeMutablePointer<CChar>?
) -> Int {
    guard let cls, let text else { return 0 }
    return Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue().unescape(text, connection: connection)
}

private func uriLogged(
    cls: UnsafeMutableRawPointer?, uri: UnsafePointer<CChar>?, connection: OpaquePointer?
) -> UnsafeMutableRawPointer? {
    guard let cls else { return nil }
    return Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue().requestStarted(uri: uri, connection: connection)
}

private func acceptPolicy(
    cls: UnsafeMutableRawPointer?, address: UnsafePointer<sockaddr>?, length: socklen_t
) -> MHD_Result {
    guard let cls else { return .NO }
    let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
    guard server.isAccepting else { return .NO }
    return server.connections.admit(address.flatMap(ConnectionTable.Address.init)) ? .YES : .NO
}

private func connectionNotified(
    cls: UnsafeMutableRawPointer?, connection: OpaquePointer?,
    socketContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
    code: MHD_ConnectionNotificationCode
) {
    guard let cls, let connection else { return }
    let table = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue().connections
    if code == MHD_ConnectionNotificationCode(rawValue: 0) {  // MHD_CONNECTION_NOTIFY_STARTED
        let entry = table.opened(
            UInt(bitPattern: connection), socket: CUsherMHD_connection_fd(connection),
            address: CUsherMHD_connection_address(connection).flatMap(ConnectionTable.Address.init))
        // Found again by each request through MHD_CONNECTION_INFO_SOCKET_CONTEXT.
        socketContext?.pointee = Unmanaged.passRetained(entry).toOpaque()
    } else {
        table.closed(UInt(bitPattern: connection))
        if let stored = socketContext?.pointee {
            Unmanaged<ConnectionTable.Entry>.fromOpaque(stored).release()
            socketContext?.pointee = nil
        }
    }
}

private func requestCompleted(
    cls: UnsafeMutableRawPointer?, connection: OpaquePointer?,
    slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>?, reason: MHD_RequestTerminationCode
) {
    guard let cls else { return }
    Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue().completed(
        connection: connection, slot: slot, delivered: reason == MHD_RequestTerminationCode(rawValue: 0))
}
