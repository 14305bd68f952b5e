/// An operation's answer: ready now (a manager in memory answers on the
/// caller's thread, with no task), later (one in Redis answers after a
/// round trip, which the caller awaits without holding a thread), or handed
/// back (one round trip whose answer is passed on from the thread that read
/// it: no task, no continuation). Its methods are inlinable, so that a
/// caller in another module gets them specialized (no generic metadata built
/// per call).
package enum Pending<Value: Sendable, Failure: Error>: Sendable {
    /// Where a handed-back answer goes; called once, on whatever thread has it.
    package typealias Receiver = @Sendable (Result<Value, Failure>) -> Void

    case ready(Result<Value, Failure>)
    case later(@Sendable () async -> Result<Value, Failure>)
    /// Starts the work when called; the work calls the receiver once with the
    /// answer. Must be started exactly once.
    case handedBack(@Sendable (@escaping Receiver) -> Void)

    /// Awaits `body` later.
    @inlinable
    package static func async(_ body: @escaping @Sendable () async throws(Failure) -> Value) -> Pending {
        .later {
            do throws(Failure) { return .success(try await body()) } catch { return .failure(error) }
        }
    }

    /// The value, awaiting it if it is not ready.
    @inlinable
    package func value() async throws(Failure) -> Value {
        switch self {
        case .ready(let result): try result.get()
        case .later(let work): try await work().get()
        case .handedBack: try await result().get()
        }
    }

    /// The same answer, transformed.
    @inlinable
    package func map<T: Sendable>(_ transform: @escaping @Sendable (Value) -> T) -> Pending<T, Failure> {
        switch self {
        case .ready(let result): .ready(result.map(transform))
        case .later(let work): .later { await work().map(transform) }
        case .handedBack(let start): .handedBack { receive in start { receive($0.map(transform)) } }
        }
    }

    /// The value of an answer that is ready (a memory resource's); one that
    /// would come later is a programming error.
    @inlinable
    package func readyValue() throws(Failure) -> Value {
        guard case .ready(let result) = self else { preconditionFailure("readyValue of an answer that comes later") }
        return try result.get()
    }

    /// The result, awaiting it if it is not ready.
    @inlinable
    package func result() async -> Result<Value, Failure> {
        switch self {
        case .ready(let result): result
        case .later(let work): await work()
        case .handedBack(let start): await withCheckedContinuation { done in start { done.resume(returning: $0) } }
        }
    }

    /// Continues with `next` once the value is there; a failure skips it.
    /// A handed-back answer continues as a later one (`next` may wait).
    @inlinable
    package func flatMap<T: Sendable>(_ next: @escaping @Sendable (Value) -> Pending<T, Failure>) -> Pending<T, Failure>
    {
        switch self {
        case .ready(.success(let value)): next(value)
        case .ready(.failure(let error)): .ready(.failure(error))
        case .later, .handedBack:
            .later {
                switch await self.result() {
                case .success(let value): await next(value).result()
                case .failure(let error): .failure(error)
                }
            }
        }
    }

    /// The same answer with both outcomes turned into a value: one that cannot fail.
    @inlinable
    package func resolving<T: Sendable>(
        _ success: @escaping @Sendable (Value) -> T, failure: @escaping @Sendable (Failure) -> T
    ) -> Pending<T, Never> {
        @Sendable func resolve(_ result: Result<Value, Failure>) -> Result<T, Never> {
            switch result {
            case .success(let value): .success(success(value))
            case .failure(let error): .success(failure(error))
            }
        }
        switch self {
        case .ready(let result): return .ready(resolve(result))
        case .later(let work): return .later { resolve(await work()) }
        case .handedBack(let start): return .handedBack { receive in start { receive(resolve($0)) } }
        }
    }

    /// The same answer with the failure transformed.
    @inlinable
    package func mapError<E: Error>(_ transform: @escaping @Sendable (Failure) -> E) -> Pending<Value, E> {
        switch self {
        case .ready(let result): .ready(result.mapError(transform))
        case .later(let work): .later { await work().mapError(transform) }
        case .handedBack(let start): .handedBack { receive in start { receive($0.mapError(transform)) } }
        }
    }
}
