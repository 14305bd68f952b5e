import Answers

extension Pending {
    /// Runs `body` now. Kept in the managers' module, which calls it on
    /// every operation: there it is specialized, across modules it is not.
    package static func now(_ body: () throws(Failure) -> Value) -> Pending {
        do throws(Failure) { return .ready(.success(try body())) } catch { return .ready(.failure(error)) }
    }
}
