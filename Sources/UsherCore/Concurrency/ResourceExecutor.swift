import Dispatch
import Foundation
import Synchronization

/// The serial executor behind every manager actor: an actor's jobs run on a
/// serial Dispatch queue while holding a pthread mutex, and code that is not
/// async (an HTTP server thread answering a request that needs no waiting) can
/// take the same lock and run isolated to the actor synchronously.
///
/// This keeps the actor model (all state is actor-isolated; every async caller
/// hops onto the actor as usual) while letting the common request path avoid a
/// task, a thread hop and a suspend/resume round trip.
package final class ResourceExecutor: SerialExecutor, @unchecked Sendable {
    /// An adaptive mutex: under brief contention (two server threads on one
    /// hot queue) it spins a little instead of sleeping in the kernel at once.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// The thread holding `mutex`, or 0: answers `checkIsolated` and makes
    /// `withLock` re-entrant on the same thread.
    private let owner = Atomic<UInt>(0)
    private let queue: DispatchQueue

    /// Creates an executor whose jobs run on a serial queue with this label.
    init(label: String = "usher.resource") {
        queue = DispatchQueue(label: label)
        mutex = .allocate(capacity: 1)
        var attributes = pthread_mutexattr_t()
        Self.check(pthread_mutexattr_init(&attributes), "pthread_mutexattr_init")
        #if os(Linux)
            Self.check(
                pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP)), "pthread_mutexattr_settype")
        #endif
        Self.check(pthread_mutex_init(mutex, &attributes), "pthread_mutex_init")
        Self.check(pthread_mutexattr_destroy(&attributes), "pthread_mutexattr_destroy")
    }

    deinit {
        Self.check(pthread_mutex_destroy(mutex), "pthread_mutex_destroy")
        mutex.deallocate()
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        queue.async {
            self.withLock { unowned.runSynchronously(on: self.asUnownedSerialExecutor()) }
        }
    }

    package func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Called by the runtime for `assumeIsolated` from a thread it does not know:
    /// isolated exactly when this thread holds the lock.
    package func checkIsolated() {
        precondition(owner.load(ordering: .relaxed) == Self.currentThread, "not on the resource's executor")
    }

    /// Runs `body` holding the executor's lock (re-entrant on the same thread).
    func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        let me = Self.currentThread
        if owner.load(ordering: .relaxed) == me { return try body() }
        Self.check(pthread_mutex_lock(mutex), "pthread_mutex_lock")
        owner.store(me, ordering: .relaxed)
        defer {
            owner.store(0, ordering: .relaxed)
            Self.check(pthread_mutex_unlock(mutex), "pthread_mutex_unlock")
        }
        return try body()
    }

    /// Stops the process when a pthread call fails, as `Locked` and swift-nio's
    /// `NIOLock` do: a lock that did not lock guards nothing.
    private static func check(_ status: Int32, _ call: StaticString) {
        precondition(status == 0, "\(call) failed with error \(status)")
    }

    private static var currentThread: UInt {
        #if os(Linux)
            return UInt(pthread_self())
        #else
            return UInt(bitPattern: pthread_self())
        #endif
    }
}

/// An actor that runs on a `ResourceExecutor`, so that synchronous callers can
/// run isolated to it without awaiting.
package protocol LockIsolatedActor: Actor {
    /// The executor the actor runs on.
    nonisolated var executor: ResourceExecutor { get }
}

extension LockIsolatedActor {
    /// Runs `body` isolated to the actor, synchronously, from any thread.
    ///
    /// Use it for short operations only: it blocks while the actor runs a job.
    @inlinable
    package nonisolated func withIsolation<T: Sendable, E: Error>(
        _ body: (isolated Self) throws(E) -> T
    ) throws(E) -> T {
        try executor.withLock { () throws(E) -> T in
            // Holding the executor's lock is being isolated to the actor: the
            // runtime asks `checkIsolated`, which says so. `assumeIsolated`
            // rethrows untyped errors, so the typed error travels in a `Result`.
            // `body` runs on this thread before the call returns, so it is never
            // shared with another isolation domain.
            nonisolated(unsafe) let body = body
            let result = assumeIsolated { actor -> Result<T, E> in
                do throws(E) {
                    return .success(try body(actor))
                } catch {
                    return .failure(error)
                }
            }
            return try result.get()
        }
    }
}
