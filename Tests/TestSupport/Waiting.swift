import Foundation
import Testing

// The one family of waiting helpers the tests share. Each answers whether the
// condition came to hold in time; `expectEventually` records an issue when
// it did not. Deadlines are wall time, generous because the whole suite runs
// in parallel on two cores and can keep every thread busy for seconds.

/// Checks `condition` every `interval` for up to `seconds`, without holding
/// a thread between checks.
package func poll(
    _ seconds: Double = 30, every interval: Duration = .milliseconds(10), _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let end = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while ContinuousClock.now < end {
        if try await condition() { return true }
        try? await Task.sleep(for: interval)
    }
    return try await condition()
}

/// `poll` for code on a thread of its own (a synchronous test body, a
/// background client): sleeps the thread `milliseconds` between checks.
package func pollBlocking(_ seconds: Double, every milliseconds: Int = 5, _ condition: () throws -> Bool) rethrows
    -> Bool
{
    let end = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while ContinuousClock.now < end {
        if try condition() { return true }
        usleep(useconds_t(milliseconds * 1000))
    }
    return try condition()
}

/// Yields between checks instead of sleeping, for conditions that need only
/// other tasks to run (a waiter parking under a `ManualClock`), for up to
/// `seconds` of wall time: a count of yields passes in a fraction of a second
/// on a loaded machine.
package func yieldUntil(_ seconds: Double = 10, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let end = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while ContinuousClock.now < end {
        if try await condition() { return true }
        await Task.yield()
    }
    return try await condition()
}

/// `yieldUntil`, recording an issue at the caller when `condition` never held.
package func expectEventually(
    _ seconds: Double = 10, _ condition: () async throws -> Bool, sourceLocation: SourceLocation = #_sourceLocation
) async rethrows {
    if try await !yieldUntil(seconds, condition) {
        Issue.record("the condition never held", sourceLocation: sourceLocation)
    }
}

/// Runs `body` every `interval` until it does not throw; after `limit` its
/// error is thrown.
package func retrying<R>(
    within limit: Duration = .seconds(2), every interval: Duration = .milliseconds(20), _ body: () async throws -> R
) async throws -> R {
    let deadline = ContinuousClock.now + limit
    while true {
        do { return try await body() } catch {
            if ContinuousClock.now > deadline { throw error }
            try await Task.sleep(for: interval)
        }
    }
}

/// Runs blocking `work` on a thread of its own, so no cooperative thread
/// waits on a socket or a semaphore.
package func onThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try work() }) }.start()
    }
}

/// A new, empty folder under the system's temporary directory; the caller removes it.
package func temporaryDirectory(_ label: String = "test") throws -> URL {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("usher-\(label)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return dir
}

/// The `usher` binary `swift build` made, for tests that start it as a process.
package let usherBinary: URL = {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    return root.appendingPathComponent(".build/debug/usher")
}()
