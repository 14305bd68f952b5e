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
