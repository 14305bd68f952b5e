import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

extension RedisServer {
    /// One server for every test of the process that only needs keys of its
    /// own, started on first use and stopped when the process exits. Such a
    /// test gives Usher a `key_prefix` of its own (`uniqueKeyPrefix()`) and
    /// must not stop, pause or flush the server: tests that do start their own.
    package static func shared() async throws -> RedisServer {
        try await SharedServer.instance.server()
    }

    /// A key prefix no other test of the process uses.
    package static func uniqueKeyPrefix() -> String {
        "usher:t\(UUID().uuidString.prefix(13)):"
    }
}

/// Starts the shared server once, even when many tests ask at the same time.
private actor SharedServer {
    static let instance = SharedServer()
    private var started: Task<RedisServer, any Error>?

    func server() async throws -> RedisServer {
        if let started { return try await started.value }
        let task = Task {
            let server = try await RedisServer()
            Self.pid.store(server.processIdentifier, ordering: .relaxed)
            atexit {
                let pid = SharedServer.pid.load(ordering: .relaxed)
                if pid > 0 { kill(pid, SIGKILL) }
            }
            return server
        }
        started = task
        return try await task.value
    }

    /// The shared server's process, killed when the test process exits.
    private static let pid = Atomic<Int32>(0)
}
