import Foundation
import RedisClient

#if canImport(Glibc)
    import Glibc
#endif

/// A `redis-server` of the tests' own, on a free loopback port, without
/// persistence; `stop()` kills it. Missing `redis-server` is a failure that
/// says how to install it.
package final class RedisServer: @unchecked Sendable {
    package struct Missing: Error, CustomStringConvertible {
        package var description: String {
            "redis-server is not installed: run `make deps` (Debian package redis-server)"
        }
    }

    package let port: Int
    private let extraArguments: [String]
    private var process: Process?

    /// On a port another process took between `freePort` and the server's
    /// bind, the server exits: tried again on another port, up to 5 times.
    package init(arguments: [String] = []) async throws {
        extraArguments = arguments
        var attempts = 0
        while true {
            attempts += 1
            let candidate = try Self.freePort()
            do {
                let launched = try await Self.launch(port: candidate, arguments: arguments)
                port = candidate
                process = launched
                return
            } catch let error as PortTaken where attempts < 5 {
                _ = error
            }
        }
    }

    deinit { stop() }

    package var endpoint: RedisEndpoint { RedisEndpoint(host: "127.0.0.1", port: port) }

    /// A client connection with short timeouts.
    package func connection(password: String? = nil, user: String? = nil, database: Int = 0) -> RedisConnection {
        var endpoint = endpoint
        endpoint.password = password
        endpoint.user = user
        endpoint.database = database
        return RedisConnection(endpoint: endpoint, connectTimeoutSeconds: 1, commandTimeoutSeconds: 2)
    }

    /// Starts the server (again, on the same port) and waits until it answers.
    package func start() async throws {
        process = try await Self.launch(port: port, arguments: extraArguments)
    }

    /// The server exited before it answered: its port was taken.
    private struct PortTaken: Error {}

    /// Runs redis-server on `port` and waits until it answers PING: a socket
    /// that accepts may be another process's, such as a cluster bus.
    private static func launch(port: Int, arguments: [String]) async throws -> Process {
        let path = ["/usr/bin", "/usr/local/bin", "/usr/sbin"].map { "\($0)/redis-server" }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let path else { throw Missing() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments =
            ["--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no"]
            + arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let probe = RedisConnection(
            endpoint: RedisEndpoint(host: "127.0.0.1", port: port), connectTimeoutSeconds: 1, commandTimeoutSeconds: 1)
        for _ in 0..<200 {
            if !process.isRunning { throw PortTaken() }
            // Any reply (PONG, or NOAUTH with a password) is Redis's.
            if accepts(port: port), (try? await probe.command(["PING"])) != nil, process.isRunning {
                return process
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        kill(process.processIdentifier, SIGKILL)
        throw RedisError.unavailable("redis-server did not start on port \(port)")
    }

    /// Kills the server and waits for it to exit.
    package func stop() {
        guard let process, process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        self.process = nil
    }

    /// The server's process id (0 when it is not running).
    package var processIdentifier: Int32 { process?.processIdentifier ?? 0 }

    /// Sends `signal` to the server (SIGSTOP and SIGCONT pause and resume it).
    package func signal(_ signal: Int32) {
        if let process { kill(process.processIdentifier, signal) }
    }

    private static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// A loopback port free now (the kernel's pick), for a server or a cluster bus.
    package static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else { throw RedisError.unavailable("no free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
