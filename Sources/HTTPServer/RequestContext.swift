import CMicroHTTPD
import Foundation
import Synchronization

/// The raw connection pointer, passed to the task that resumes it.
/// libmicrohttpd allows `MHD_resume_connection` from any thread.
struct ConnectionHandle: @unchecked Sendable {
    let raw: OpaquePointer
}

/// One request's state across libmicrohttpd's handler calls. Created on the
/// first call, retained through `req_cls`, released in the completed callback.
final class RequestContext: @unchecked Sendable {
    /// Where the request is in its life. Only the server thread that owns the
    /// connection touches `phase` and `body`; the response slot is shared with
    /// the task that produces a deferred answer.
    enum Phase {
        case receiving
        /// The body outgrew the limit: the rest is read and dropped, then 413.
        case tooLarge
        /// Already answered (a declared oversize body).
        case refused
        case suspended
    }

    var phase: Phase = .receiving
    var body = Data()
    let method: String
    let path: String
    /// Filled by a deferred task before it resumes the connection.
    let pending = Mutex<HTTPResponse?>(nil)

    init(method: String, path: String) {
        self.method = method
        self.path = path
    }
}
