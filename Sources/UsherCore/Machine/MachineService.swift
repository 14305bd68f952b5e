import Answers

/// A machine, whichever backend holds it: what the routes call. `StateMachine`
/// keeps it in memory and answers at once; a Redis-backed machine answers
/// after a round trip. Operations mean what `StateMachine`'s do.
package protocol MachineService: AnyObject, Sendable {
    var name: String { get }
    /// The machine as it is now.
    func readSnapshot() -> Pending<MachineSnapshot, MachineError>
    func fireEvent(_ event: String, expectedVersion: Int64?, data: JSONValue?) -> Pending<
        TransitionResult, MachineError
    >
    func openTransaction(event: String, expectedVersion: Int64?, data: JSONValue?, seconds: Double) -> Pending<
        MachineTransaction, MachineError
    >
    func commitTransaction(_ id: String) -> Pending<TransitionResult, MachineError>
    func abortTransaction(_ id: String) -> Pending<MachineTransaction, MachineError>
    /// The snapshot once the version differs from `version`, or at `deadline`
    /// (or when the task is cancelled).
    func parkUntilVersion(other version: Int64, until deadline: Timestamp) async throws(MachineError)
        -> MachineSnapshot
}

extension StateMachine: MachineService {
    package nonisolated func readSnapshot() -> Pending<MachineSnapshot, MachineError> {
        .ready(.success(withIsolation { $0.snapshot() }))
    }

    package nonisolated func fireEvent(_ event: String, expectedVersion: Int64?, data: JSONValue?) -> Pending<
        TransitionResult, MachineError
    > {
        .now { () throws(MachineError) in
            try withIsolation { m throws(MachineError) in
                try m.fire(event: event, expectedVersion: expectedVersion, data: data)
            }
        }
    }

    package nonisolated func openTransaction(
        event: String, expectedVersion: Int64?, data: JSONValue?, seconds: Double
    ) -> Pending<MachineTransaction, MachineError> {
        .now { () throws(MachineError) in
            try withIsolation { m throws(MachineError) in
                try m.open(event: event, expectedVersion: expectedVersion, data: data, seconds: seconds)
            }
        }
    }

    package nonisolated func commitTransaction(_ id: String) -> Pending<TransitionResult, MachineError> {
        .now { () throws(MachineError) in
            try withIsolation { m throws(MachineError) in try m.commit(transaction: id) }
        }
    }

    package nonisolated func abortTransaction(_ id: String) -> Pending<MachineTransaction, MachineError> {
        .now { () throws(MachineError) in
            try withIsolation { m throws(MachineError) in try m.abort(transaction: id) }
        }
    }

    package func parkUntilVersion(other version: Int64, until deadline: Timestamp) async throws(MachineError)
        -> MachineSnapshot
    {
        try await waitForVersion(other: version, until: deadline)
    }
}
