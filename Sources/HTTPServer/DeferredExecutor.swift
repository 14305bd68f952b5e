import Dispatch

/// Where deferred answers run: a Dispatch queue of the server's own, so a
/// parked request is answered even when something else in the process has
/// filled Swift's cooperative thread pool with blocking work.
final class DeferredExecutor: TaskExecutor, @unchecked Sendable {
    private let queue = DispatchQueue(label: "usher.http.deferred", attributes: .concurrent)

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        queue.async { unowned.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }
}
