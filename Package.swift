// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "usher",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "usher", targets: ["usher"]),
    ],
    targets: [
        // libmicrohttpd through a module map; the shim holds wrappers for variadic calls only.
        .systemLibrary(
            name: "CMicroHTTPD",
            pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"])]
        ),
        // The only target that touches C: daemon, requests, responses, suspend/resume.
        .target(name: "HTTPServer", dependencies: ["CMicroHTTPD"]),
        // The managers (actors) and their value-type engines. No HTTP, no C.
        .target(name: "UsherCore"),
        // Routes, JSON shapes, the error table, configuration.
        .target(name: "UsherAPI", dependencies: ["HTTPServer", "UsherCore"]),
        // Thin executable: read config, trap signals, serve; `usher health` uses the HTTP client.
        .executableTarget(
            name: "usher",
            dependencies: ["UsherAPI", "HTTPServer"],
            linkerSettings: [.unsafeFlags(["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"])]
        ),
        // In-process engine benchmark (run by Benchmarks/, not by `swift test`).
        .executableTarget(
            name: "usher-engine-bench",
            dependencies: ["UsherCore"],
            path: "Benchmarks/EngineBench"
        ),
        // A blocking HTTP/1.1 client for the live tests.
        .target(name: "HTTPTestClient", path: "Tests/HTTPTestClient"),
        .testTarget(name: "UsherCoreTests", dependencies: ["UsherCore"]),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer", "HTTPTestClient"]),
        .testTarget(name: "UsherAPITests", dependencies: ["UsherAPI", "HTTPServer", "UsherCore", "HTTPTestClient"]),
    ]
)
