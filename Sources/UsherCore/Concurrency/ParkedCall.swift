// Parked long-polls, the one way every manager does them: a queue's, a
// window's and a pool's waiters (`EngineHost`), a pipeline's consumers and
// producers, a machine's `waitForVersion`.

/// A long-poll's answer, boxed.
///
/// A parked request's async frames stay on the heap for as long as it waits:
/// boxed, every frame that holds the answer (the continuation's result slot,
/// the temporaries around it) holds one reference, not a view or snapshot,
/// so the frames fit in fewer of the task allocator's 1 KiB slabs.
final class WaitAnswer<Value: Sendable, Failure: Error>: Sendable {
    let result: Result<Value, Failure>

    init(_ result: Result<Value, Failure>) {
        self.result = result
    }

    /// Out of line, so that the unboxed value is not laid out in the caller's async frame.
    @inline(never)
    func get() throws(Failure) -> Value {
        try result.get()
    }
}

/// One parked caller: its continuation and its deadline timer.
///
/// The owner keeps it in a table, isolated to the owner's actor; whoever
/// takes it out of the table answers it, so it is answered exactly once.
struct ParkedCall<Answer: Sendable>: Sendable {
    let continuation: CheckedContinuation<Answer, Never>
    /// The call's deadline; cancelled (and so freed at once) when it is answered.
    var timer: (any ScheduledTimer)?

    init(_ continuation: CheckedContinuation<Answer, Never>) {
        self.continuation = continuation
    }

    /// Cancels the deadline timer and resumes the caller.
    func answer(_ answer: Answer) {
        timer?.cancel()
        continuation.resume(returning: answer)
    }
}

extension LockIsolatedActor {
    /// Suspends the caller until its `ParkedCall` is answered.
    ///
    /// `register` runs at once, isolated, with the new call: it checks again
    /// whether there is anything to wait for (reaching here may have taken
    /// an executor hop, and a change made meanwhile woke nobody) and either
    /// answers the call at once or stores it with its deadline timer, in
    /// one isolated step. When the caller's task is cancelled, `cancelled`
    /// runs isolated in a new task (never blocking here: the runtime holds
    /// the task's status lock while it runs cancellation handlers) and
    /// answers the call if it is still parked.
    ///
    /// Both take the actor as an `isolated` parameter: a closure is isolated
    /// to the actor only if it uses it, and the continuation's body below
    /// must run on the actor. A body that does not name `self` is
    /// nonisolated and may run beside the actor's own jobs (README.md here).
    @inline(__always)
    func parkCall<Answer: Sendable>(
        _ register: (isolated Self, ParkedCall<Answer>) -> Void,
        onCancel cancelled: @escaping @Sendable (isolated Self) -> Void
    ) async -> Answer {
        await withTaskCancellationHandler {
            await withCheckedContinuation { register(self, ParkedCall($0)) }
        } onCancel: {
            Task { await cancelled(self) }
        }
    }
}
