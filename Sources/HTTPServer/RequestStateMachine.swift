/// One request's life on its connection, as a value: head, body, handler,
/// parked while deferred work runs, hung up or answered, delivered or not.
/// Each event the server sees returns the action to take; the server does the
/// C calls. Nothing here touches a socket, so every path is tested without a
/// network (`RequestStateMachineTests`).
struct RequestStateMachine {
    private enum State {
        /// The head has not been checked yet.
        case head
        case receiving(bodyBytes: Int)
        /// Answered with a refusal; whatever else comes is dropped.
        case refused
        /// The handler has the request (a synchronous call).
        case handling
        /// Suspended while deferred work runs.
        case parked
        /// Resumed with an answer to queue on the next call.
        case answering(HTTPResponse)
        /// Resumed (or being resumed) to close: the client left.
        case abandoning
        /// An answer is queued; `undelivered` runs if it fails to go out.
        case answered(undelivered: (@Sendable () -> Void)?)
        case finished
    }

    private var state = State.head

    enum HeadAction: Equatable {
        /// Read the body (or call the handler when there is none).
        case receive
        /// Queue the refusal now: the connection closes after it.
        case refuse(HTTPRefusal)
    }

    /// The head was checked: its result is the declared body length or a refusal.
    mutating func headChecked(_ result: Result<Int?, HTTPRefusal>, maxBodyBytes: Int) -> HeadAction {
        guard case .head = state else { preconditionFailure("head checked twice") }
        switch result {
        case .failure(let refusal):
            state = .refused
            return .refuse(refusal)
        case .success(let length?) where length > maxBodyBytes:
            state = .refused
            return .refuse(.payloadTooLarge(limit: maxBodyBytes))
        case .success:
            state = .receiving(bodyBytes: 0)
            return .receive
        }
    }

    enum BodyAction: Equatable {
        case append
        /// Past the limit mid-upload: write the refusal on the socket and close.
        case refuseAndClose(HTTPRefusal)
        /// Already refused: drop the bytes.
        case drop
    }

    /// `count` more body bytes arrived.
    mutating func bodyArrived(count: Int, maxBodyBytes: Int) -> BodyAction {
        guard case .receiving(let bytes) = state else { return .drop }
        guard bytes + count <= maxBodyBytes else {
            state = .refused
            return .refuseAndClose(.payloadTooLarge(limit: maxBodyBytes))
        }
        state = .receiving(bodyBytes: bytes + count)
        return .append
    }

    /// A chunk-size line announced `size` more bytes: past the limit, the
    /// refusal comes now rather than when they have arrived.
    mutating func chunkDeclared(_ size: UInt64, maxBodyBytes: Int) -> BodyAction {
        guard case .receiving(let bytes) = state else { return .drop }
        guard size <= UInt64(max(0, maxBodyBytes - bytes)) else {
            state = .refused
            return .refuseAndClose(.payloadTooLarge(limit: maxBodyBytes))
        }
        return .append
    }

    /// The body's framing is malformed (`ChunkFraming`).
    mutating func framingRefused(_ refusal: HTTPRefusal) -> BodyAction {
        guard case .receiving = state else { return .drop }
        state = .refused
        return .refuseAndClose(refusal)
    }

    /// The handler refused the request from its head (`Expect: 100-continue`).
    mutating func refusedBeforeBody() {
        state = .refused
    }

    enum CallAction {
        /// The whole request is here: call the handler.
        case handle
        /// Queue the deferred answer.
        case queue(HTTPResponse)
        /// Close without an answer (the client left while parked).
        case close
        /// Nothing to do on this call.
        case none
    }

    /// libmicrohttpd called with no new body bytes: the body is complete, or
    /// the connection was resumed.
    mutating func called() -> CallAction {
        switch state {
        case .receiving:
            state = .handling
            return .handle
        case .answering(let response):
            state = .answered(undelivered: response.undelivered)
            return .queue(response)
        case .abandoning:
            state = .finished
            return .close
        case .head, .refused, .handling, .parked, .answered, .finished:
            return .none
        }
    }

    /// The handler answered at once (or with a stream): `undelivered` runs if
    /// the answer fails to go out.
    mutating func answered(undelivered: (@Sendable () -> Void)?) {
        state = .answered(undelivered: undelivered)
    }

    /// The handler deferred its answer: the connection is suspended.
    mutating func parked() {
        guard case .handling = state else { preconditionFailure("parked outside the handler") }
        state = .parked
    }

    enum HangUpAction: Equatable {
        /// Cancel the deferred work (it withdraws what it waits for) and
        /// resume the connection to close it now, not when the work ends.
        case cancelWorkAndResume
        case none
    }

    /// The client of a parked request hung up.
    mutating func hungUp() -> HangUpAction {
        guard case .parked = state else { return .none }
        state = .abandoning
        return .cancelWorkAndResume
    }

    /// True once the client of a parked request hung up.
    var isAbandoned: Bool {
        switch state {
        case .abandoning, .finished: true
        default: false
        }
    }

    enum FinishAction {
        /// Resume; the answer goes out on the next call.
        case resume
        /// Resume to close, after running the undo: the answer cannot reach
        /// the client.
        case resumeAndUndo((@Sendable () -> Void)?)
        /// The connection was resumed at the hang-up already: only undo.
        case undo((@Sendable () -> Void)?)
    }

    /// The deferred work produced `response`; `peerGone` is what a last look
    /// at the socket said.
    mutating func workFinished(_ response: HTTPResponse, peerGone: Bool) -> FinishAction {
        guard case .parked = state else { return .undo(response.undelivered) }
        if peerGone {
            state = .abandoning
            return .resumeAndUndo(response.undelivered)
        }
        state = .answering(response)
        return .resume
    }

    /// libmicrohttpd is done with the request; `delivered` is false when the
    /// answer did not go out whole. Returns the undo to run, if any.
    mutating func completed(delivered: Bool) -> (@Sendable () -> Void)? {
        defer { state = .finished }
        guard case .answered(let undelivered) = state, !delivered else { return nil }
        return undelivered
    }

    /// True once the head has been checked.
    var isPastHead: Bool {
        if case .head = state { return false }
        return true
    }
}
