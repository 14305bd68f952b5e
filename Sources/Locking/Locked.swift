#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value behind a `pthread_mutex_t`, with the `withLock` API of
/// `Synchronization.Mutex`.
///
/// On Linux `Mutex` locks with raw futex calls that ThreadSanitizer cannot see,
/// so it reports races on every value a `Mutex` guards; it intercepts
/// `pthread_mutex_lock`, so the same code behind `Locked` is checked for real.
/// Copies share one lock and one value, like a reference.
public struct Locked<Value>: @unchecked Sendable {
    @usableFromInline let storage: LockedStorage<Value>

    /// Puts `value` behind a new lock.
    @inlinable
    public init(_ value: sending Value) {
        storage = LockedStorage.make(value)
    }

    /// Runs `body` with exclusive access to the value.
    @inlinable
    public func withLock<Result, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        // The storage outlives the call (`self` holds it), so the pointers stay valid.
        let mutex = storage.withUnsafeMutablePointerToElements { $0 }
        nonisolated(unsafe) let value = storage.withUnsafeMutablePointerToHeader { $0 }
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value.pointee)
    }
}

/// The value (header) and the mutex (one element) in a single allocation, so
/// the mutex never moves.
@usableFromInline
final class LockedStorage<Value>: ManagedBuffer<Value, pthread_mutex_t> {
    @inlinable
    static func make(_ value: sending Value) -> LockedStorage {
        let buffer = create(minimumCapacity: 1) { _ in value }
        let storage = unsafeDowncast(buffer, to: LockedStorage.self)
        storage.withUnsafeMutablePointerToElements { mutex in
            var attributes = pthread_mutexattr_t()
            pthread_mutexattr_init(&attributes)
            #if os(Linux)
            // Spins a little under brief contention before sleeping, as `Mutex` does.
            pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
            #endif
            pthread_mutex_init(mutex, &attributes)
            pthread_mutexattr_destroy(&attributes)
        }
        return storage
    }

    @inlinable
    deinit {
        _ = withUnsafeMutablePointerToElements { pthread_mutex_destroy($0) }
    }
}
