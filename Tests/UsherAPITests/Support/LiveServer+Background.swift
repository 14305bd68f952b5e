import Foundation
import HTTPTestClient
import TestSupport

@testable import Locking

extension LiveServer {
    /// Runs `request` on its own thread (the client blocks) and answers a
    /// function that collects its response, waiting at most 5 s for it.
    func inBackground(_ request: @escaping @Sendable () throws -> TestHTTPClient.Response)
        -> @Sendable () -> TestHTTPClient.Response?
    {
        onBackgroundThread(request)
    }

    /// Waits (at most 2.5 s) until the server holds `n` parked requests.
    func untilParked(_ n: Int) {
        _ = pollBlocking(2.5) { server.suspendedRequests >= n }
    }
}

extension LiveServer {
    /// `call` from async code: the blocking client runs on a thread of its
    /// own, so no cooperative thread waits on the socket.
    func callAsync(_ method: String, _ path: String, _ body: String? = nil) async throws -> TestHTTPClient.Response {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try self.call(method, path, body) }) }.start()
        }
    }
}

/// Runs `request` on its own thread (a blocking client may hold it) and
/// answers a function that collects its response, waiting at most 5 s for it.
func onBackgroundThread(_ request: @escaping @Sendable () throws -> TestHTTPClient.Response)
    -> @Sendable () -> TestHTTPClient.Response?
{
    let result = Locked<TestHTTPClient.Response?>(nil)
    let done = DispatchSemaphore(value: 0)
    Thread {
        result.withLock { $0 = try? request() }
        done.signal()
    }.start()
    return {
        guard done.wait(timeout: .now() + 5) == .success else { return nil }
        return result.withLock { $0 }
    }
}
