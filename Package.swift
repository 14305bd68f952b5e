// swift-tools-version:6.0
import Foundation
import PackageDescription

#if canImport(Glibc)
    import Glibc
#endif

/// Linker flags for `usher`: lld with packed relative relocations (DT_RELR),
/// which keeps the loader from reading a 1.8 MB relocation table at every
/// start (docs/design.md, "Build and link"). Only where both are there: an
/// `ld.lld` on PATH (the Swift toolchain ships one) and glibc 2.36 or later
/// to load the result; elsewhere (macOS, older glibc) the default link.
func relocationPackingFlags() -> [String] {
    #if os(Linux) && canImport(Glibc)
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let hasLLD = path.split(separator: ":").contains {
            FileManager.default.isExecutableFile(atPath: "\($0)/ld.lld")
        }
        var text = [CChar](repeating: 0, count: 64)  // "glibc 2.36"
        _ = confstr(Int32(_CS_GNU_LIBC_VERSION), &text, text.count)
        let version = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let glibc = version.split(separator: " ").last?.split(separator: ".").compactMap { Int($0) } ?? []
        guard hasLLD, glibc.count >= 2, (glibc[0], glibc[1]) >= (2, 36) else { return [] }
        return ["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"]
    #else
        return []
    #endif
}

let package = Package(
    name: "usher",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "usher", targets: ["usher"])
    ],
    targets: [
        // libmicrohttpd through a module map; the shim holds wrappers for variadic calls only.
        .systemLibrary(
            name: "CMicroHTTPD",
            pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"])]
        ),
        // hiredis through a module map; commands go through its Argv calls (no variadics).
        .systemLibrary(
            name: "CHiredis",
            pkgConfig: "hiredis",
            providers: [.apt(["libhiredis-dev"])]
        ),
        // IPv4 and IPv6 socket addresses: what the server binds and the client connects to.
        .target(name: "Sockets"),
        // `Pending`: an answer ready now, later, or handed back; what managers return and
        // what the server sends, from route to socket.
        .target(name: "Answers"),
        // The only importer of CMicroHTTPD: daemon, requests, responses, suspend/resume.
        .target(name: "HTTPServer", dependencies: ["Answers", "CMicroHTTPD", "Locking", "Sockets"]),
        // `GET` over POSIX sockets, off the cooperative pool: `usher health` and pipelines' `http` sources.
        .target(name: "HTTPClient", dependencies: ["Sockets"]),
        // `Locked`: a value behind a pthread mutex, which ThreadSanitizer can see.
        .target(name: "Locking"),
        // A Redis client on hiredis: connections on their own threads, scripts, pub/sub.
        // The only importer of CHiredis.
        .target(name: "RedisClient", dependencies: ["CHiredis", "Locking"]),
        // Resources kept in Redis: one Lua script per kind (every operation atomic), the
        // managers that call them, wake-ups through pub/sub.
        .target(
            name: "UsherRedis", dependencies: ["Answers", "RedisClient", "UsherCore", "Locking"],
            resources: [
                .embedInCode("Support/common.lua"), .embedInCode("Support/index.lua"), .embedInCode("Line/line.lua"),
                .embedInCode("Queue/queue.lua"),
                .embedInCode("Machine/machine.lua"), .embedInCode("Pipeline/pipeline.lua"),
                .embedInCode("Window/window.lua"),
                .embedInCode("Pool/pool.lua"),
            ]),
        // The managers (actors) and their value-type engines. No HTTP, no C.
        .target(name: "UsherCore", dependencies: ["Answers", "Locking"], exclude: ["Concurrency/README.md"]),
        // Routes, JSON shapes, the error table, configuration (reading the `redis` block too).
        // The dashboard's page, script and style are compiled in (`PackageResources`): no files at run time.
        .target(
            name: "UsherAPI",
            dependencies: [
                "Answers", "HTTPServer", "HTTPClient", "UsherCore", "Locking", "RedisClient", "UsherRedis",
            ],
            resources: [
                .embedInCode("Dashboard/dashboard.html"), .embedInCode("Dashboard/dashboard.js"),
                .embedInCode("Dashboard/dashboard.css"),
            ]),
        // Thin executable: read config, trap signals, serve; `usher health` uses the HTTP client.
        .executableTarget(
            name: "usher",
            dependencies: ["UsherAPI", "HTTPClient"],
            linkerSettings: [.unsafeFlags(relocationPackingFlags())]
        ),
        // In-process engine benchmark (run by Benchmarks/, not by `swift test`).
        .executableTarget(
            name: "usher-engine-bench",
            dependencies: ["UsherCore"],
            path: "Benchmarks/EngineBench"
        ),
        // A blocking HTTP/1.1 client for the live tests.
        .target(name: "HTTPTestClient", path: "Tests/HTTPTestClient"),
        .testTarget(name: "UsherCoreTests", dependencies: ["Answers", "UsherCore", "Locking", "TestSupport"]),
        // A redis-server of the tests' own, on a free loopback port.
        .target(name: "RedisTestServer", dependencies: ["RedisClient"], path: "Tests/RedisTestServer"),
        .testTarget(
            name: "RedisClientTests", dependencies: ["RedisClient", "Locking", "RedisTestServer", "TestSupport"]),
        .testTarget(
            name: "UsherRedisTests",
            dependencies: ["Answers", "UsherRedis", "RedisClient", "UsherCore", "Locking", "RedisTestServer"]),
        .testTarget(
            name: "HTTPServerTests",
            dependencies: ["Answers", "HTTPServer", "HTTPClient", "HTTPTestClient", "Locking", "TestSupport"]),
        // The tests' one family of waiting helpers, threads for blocking calls, temporary folders.
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        .testTarget(
            name: "UsherAPITests",
            dependencies: [
                "Answers", "UsherAPI", "HTTPServer", "UsherCore", "RedisClient", "HTTPTestClient", "Locking",
                "RedisTestServer", "TestSupport",
            ]),
        // Long drills (three usher processes on one Redis, faults injected): `make soak`, not `make test`.
        .testTarget(
            name: "UsherSoakTests",
            dependencies: ["RedisClient", "HTTPTestClient", "Locking", "RedisTestServer", "TestSupport"]),
    ]
)
