extension Array where Element: Sendable {
    /// Runs `body` for every element at once, one child task each, and
    /// returns when all have: Redis calls started together go out in one
    /// write, so N of them cost about one round trip.
    func forEachAtOnce(_ body: @escaping @Sendable (Element) async -> Void) async {
        await withTaskGroup(of: Void.self) { group in
            for element in self {
                group.addTask { await body(element) }
            }
        }
    }

    /// `transform` of every element, all run at once as in `forEachAtOnce`,
    /// in the array's order; once all have ended, the first error in that
    /// order is thrown (the one a loop awaiting them in turn would stop at).
    func mapAtOnce<T: Sendable, Failure: Error>(
        _ transform: @escaping @Sendable (Element) async throws(Failure) -> T
    ) async throws(Failure) -> [T] {
        let answered = await withTaskGroup(of: (index: Int, result: Result<T, Failure>).self) { group in
            for (index, element) in enumerated() {
                group.addTask {
                    do throws(Failure) { return (index, .success(try await transform(element))) } catch {
                        return (index, .failure(error))
                    }
                }
            }
            var answered: [(index: Int, result: Result<T, Failure>)] = []
            answered.reserveCapacity(count)
            for await answer in group { answered.append(answer) }
            return answered
        }
        return try answered.sorted { $0.index < $1.index }.map { (answer) throws(Failure) -> T in
            try answer.result.get()
        }
    }
}
