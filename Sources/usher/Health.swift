import Dispatch
import Foundation
import HTTPClient

/// `usher health URL`: a readiness probe for container health checks, so an
/// image needs no curl. Ready means `GET URL/readyz` answered 200 in time.
enum Health {
    /// For the whole exchange, connect to last byte.
    static let timeoutSeconds = 3.0

    /// `URL/readyz`, unless the URL already names `/readyz`.
    static func readinessURL(_ given: String) -> String {
        if given.hasSuffix("/readyz") { return given }
        var base = given
        while base.hasSuffix("/") { base.removeLast() }
        return base + "/readyz"
    }

    /// Asks once. Exit status 0 (ready) or 1 (not ready, unreachable, bad URL),
    /// with one line saying which.
    static func check(_ given: String) async -> Int32 {
        let url = readinessURL(given)
        do {
            let (status, body) = try await HTTPClient.get(
                url: url, timeoutSeconds: timeoutSeconds, maxBodyBytes: 64 * 1024)
            if status == 200 {
                print("ready: \(url)")
                return 0
            }
            let text = String(decoding: body.prefix(200), as: UTF8.self)
            report("not ready: \(url) answered \(status)\(text.isEmpty ? "" : ": \(text)")")
        } catch {
            let why = "\(error)"
            report("not ready: " + (why.hasPrefix(url) ? why : "\(url): \(why)"))
        }
        return 1
    }

    /// Runs the check off the main thread and exits with its status.
    static func run(_ given: String) -> Never {
        Task.detached {
            exit(await check(given))
        }
        dispatchMain()
    }

    private static func report(_ message: String) {
        FileHandle.standardError.write(Data("usher: \(message)\n".utf8))
    }
}
