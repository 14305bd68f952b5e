import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Gives freed heap memory back to the system after large frees (a resource
/// deleted): glibc keeps freed pages inside its arenas otherwise, so the
/// process would stay at its high-water mark.
///
/// A request schedules one `malloc_trim(0)` `delay` seconds later on a
/// utility queue, after the deleted resource's last references are gone;
/// requests meanwhile share it, so trims run at most once per `delay`.
final class MemoryTrimmer: Sendable {
    private let pending = Atomic<Bool>(false)
    private let delay: Double

    init(delay: Double = 1) {
        self.delay = delay
    }

    /// Asks for a trim soon.
    func request() {
        guard !pending.exchange(true, ordering: .acquiringAndReleasing) else { return }
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + delay) { [self] in
            pending.store(false, ordering: .releasing)
            Self.trim()
        }
    }

    /// Returns free heap pages to the system now (glibc only; elsewhere nothing).
    static func trim() {
        _ = mallocTrim?(0)
    }

    /// glibc's `malloc_trim`, found at run time: `<malloc.h>` is not in
    /// Swift's Glibc module, and other C libraries do not have it.
    private static let mallocTrim: (@convention(c) (Int) -> Int32)? = {
        #if canImport(Glibc)
            guard let symbol = dlsym(nil, "malloc_trim") else { return nil }
            return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
        #else
            return nil
        #endif
    }()
}
