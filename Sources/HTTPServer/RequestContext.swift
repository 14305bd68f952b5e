import CMicroHTTPD
import Foundation
import Synchronization

/// The raw connection pointer, passed to the task that resumes it.
/// libmicrohttpd allows `MHD_resume_connection` from any thread.
struct ConnectionHandle: @unchecked Sendable {
    let raw: OpaquePointer
}

/// One request's state across libmicrohttpd's calls. Created by the URI log
/// callback, retained through `req_cls`, released in the completed callback.
final class RequestContext: @unchecked Sendable {
    /// Where the request is in its life. Only the server thread that owns the
    /// connection touches `phase`, the request's parts and `body`; the
    /// response slot is shared with the task that produces a deferred answer.
    enum Phase {
        /// The head has not been checked yet (the first handler call does).
        case head
        case receiving
        /// Already answered with a refusal; whatever else comes is dropped.
        case refused
        case suspended
    }

    var phase: Phase = .head
    /// The raw request line as first seen.
    let line: RequestHead.RawLine?
    private(set) var method = ""
    private(set) var path = ""
    private(set) var query: [(name: String, value: String)] = []
    private(set) var headers: [String: String] = [:]
    var body = Data()
    /// Filled by a deferred task before it resumes the connection.
    let pending = Mutex<HTTPResponse?>(nil)

    init(line: RequestHead.RawLine?) {
        self.line = line
    }

    /// Takes the checked head; the body comes next.
    func accept(method: String, head: RequestHead) {
        self.method = method
        path = head.target.path
        query = head.target.query
        headers = head.headers
        phase = .receiving
    }
}

/// Reason phrases for the status lines the server writes itself.
enum HTTPStatus {
    static func reason(_ status: Int) -> String {
        switch status {
        case 400: "Bad Request"
        case 413: "Content Too Large"
        case 501: "Not Implemented"
        default: "Error"
        }
    }
}
