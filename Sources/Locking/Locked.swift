#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A value behind a `pthread_mutex_t`, with the `withLock` API of
/// `Synchronization.Mutex`.
///
/// The rule: every lock in Usher and its tests is a `Locked`, never a `Mutex` (one word may be an `Atomic`).
///
/// On Linux `Mutex` locks with raw futex calls that ThreadSanitizer cannot see,
/// so it reports races on every value a `Mutex` guards; it intercepts
/// `pthread_mutex_lock`, so the same code behind `Locked` is checked for real.
package struct Locked<Value: ~Copyable>: ~Copyable, @unchecked Sendable {
    /// The mutex, then the value, in one allocation that never moves.
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline let value: UnsafeMutablePointer<Value>

    /// Puts `value` behind a new lock.
    @inlinable
    package init(_ value: consuming sending Value) {
        let offset = Self.valueOffset
        let bytes = UnsafeMutableRawPointer.allocate(
            byteCount: offset + MemoryLayout<Value>.size,
            alignment: max(MemoryLayout<pthread_mutex_t>.alignment, MemoryLayout<Value>.alignment)
        )
        mutex = bytes.bindMemory(to: pthread_mutex_t.self, capacity: 1)
        self.value = (bytes + offset).bindMemory(to: Value.self, capacity: 1)
        self.value.initialize(to: value)
        var attributes = pthread_mutexattr_t()
        Self.check(pthread_mutexattr_init(&attributes), "pthread_mutexattr_init")
        #if os(Linux)
            // Spins a little under brief contention before sleeping, as `Mutex` does.
            Self.check(
                pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP)), "pthread_mutexattr_settype")
        #endif
        Self.check(pthread_mutex_init(mutex, &attributes), "pthread_mutex_init")
        Self.check(pthread_mutexattr_destroy(&attributes), "pthread_mutexattr_destroy")
    }

    @inlinable
    deinit {
        Self.check(pthread_mutex_destroy(mutex), "pthread_mutex_destroy")
        value.deinitialize(count: 1)
        UnsafeMutableRawPointer(mutex).deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    @inlinable
    package borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        Self.check(pthread_mutex_lock(mutex), "pthread_mutex_lock")
        defer { Self.check(pthread_mutex_unlock(mutex), "pthread_mutex_unlock") }
        nonisolated(unsafe) let value = value
        return try body(&value.pointee)
    }

    /// Stops the process when a pthread call fails, as swift-nio's `NIOLock` does:
    /// a lock that did not lock guards nothing.
    @inlinable
    static func check(_ status: Int32, _ call: StaticString) {
        precondition(status == 0, "\(call) failed with error \(status)")
    }

    @inlinable
    static var valueOffset: Int {
        let alignment = MemoryLayout<Value>.alignment
        return (MemoryLayout<pthread_mutex_t>.size + alignment - 1) / alignment * alignment
    }
}
