import Foundation
import HTTPTestClient

@testable import Locking

extension LiveServer {
    /// Runs `request` on its own thread (the client blocks) and answers a
    /// function that collects its response, waiting at most 5 s for it.
    func inBackground(_ request: @escaping @Sendable () throws -> TestHTTPClient.Response)
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

    /// Waits (at most 2.5 s) until the server holds `n` parked requests.
    func untilParked(_ n: Int) {
        for _ in 0..<500 where server.suspendedRequests < n { usleep(5000) }
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

/// Polls `condition` every 10 ms for up to `seconds` (generous: the whole
/// suite can keep the pool busy for seconds), without holding a thread.
func poll(_ seconds: Double = 30, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let end = Date().addingTimeInterval(seconds)
    while Date() < end {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return try await condition()
}

/// A new, empty folder under the system's temporary directory; the caller removes it.
func temporaryDirectory(_ label: String = "test") throws -> URL {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("usher-\(label)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return dir
}
