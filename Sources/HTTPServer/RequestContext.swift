import CMicroHTTPD
import Foundation
import Locking

/// The raw connection pointer, passed to the task that resumes it.
/// libmicrohttpd allows `MHD_resume_connection` from any thread.
struct ConnectionHandle: @unchecked Sendable {
    let raw: OpaquePointer
}

/// One request's state across libmicrohttpd's calls. Created by the URI log
/// callback, retained through `req_cls`, released in the completed callback.
final class RequestContext: @unchecked Sendable {
    /// The raw request line as first seen.
    let line: RequestHead.RawLine?
    /// The connection's entry in the server's `ConnectionTable`.
    let connection: ConnectionTable.Entry?
    /// Where the request is in its life; shared with the deferred work's task
    /// and the hang-up watcher.
    let machine = Locked(RequestStateMachine())
    /// The deferred work, cancelled when the client hangs up.
    let work = Locked<Task<Void, Never>?>(nil)
    // Only the server thread that owns the connection touches these.
    private(set) var method = ""
    private(set) var path = ""
    private(set) var query: [(name: String, value: String)] = []
    private(set) var headers = CapturedHeaders()
    var body = Data()
    /// Reads the chunk-size lines of a chunked body.
    var chunks: ChunkFraming?

    init(line: RequestHead.RawLine?, connection: ConnectionTable.Entry?) {
        self.line = line
        self.connection = connection
    }

    /// Takes the checked head.
    func accept(method: String, head: RequestHead) {
        self.method = method
        path = head.target.path
        query = head.target.query
        headers = head.headers
    }
}

/// Reason phrases for the status lines the server writes itself.
enum HTTPStatus {
    static func reason(_ status: Int) -> String {
        switch status {
        case 400: "Bad Request"
        case 413: "Content Too Large"
        case 414: "URI Too Long"
        case 431: "Request Header Fields Too Large"
        case 501: "Not Implemented"
        default: "Error"
        }
    }
}
