import Answers
import Dispatch
import Testing

@testable import UsherCore

@Suite struct PendingTests {
    private struct Refusal: Error, Equatable { let code: Int }

    /// An answer handed back later from a Dispatch thread, as a Redis connection's queue does.
    private static func handedBack(_ result: Result<Int, Refusal>) -> Pending<Int, Refusal> {
        .handedBack { receive in DispatchQueue.global().async { receive(result) } }
    }

    @Test func handedBackValuesAreAwaited() async throws {
        #expect(try await Self.handedBack(.success(4)).value() == 4)
        await #expect(throws: Refusal(code: 7)) { try await Self.handedBack(.failure(Refusal(code: 7))).value() }
    }

    @Test func mapAndMapErrorStayHandedBack() async throws {
        let mapped = Self.handedBack(.success(4)).map { $0 * 10 }
        guard case .handedBack = mapped else {
            Issue.record("map of a handed-back answer is not handed back")
            return
        }
        #expect(try await mapped.value() == 40)
        let failed = Self.handedBack(.failure(Refusal(code: 1))).mapError { Refusal(code: $0.code + 1) }
        guard case .handedBack = failed else {
            Issue.record("mapError of a handed-back answer is not handed back")
            return
        }
        #expect(await failed.result() == .failure(Refusal(code: 2)))
    }

    @Test func flatMapContinuesLaterAndSkipsOnFailure() async throws {
        let next = Self.handedBack(.success(2)).flatMap { value in Pending<Int, Refusal>.async { value + 1 } }
        guard case .later = next else {
            Issue.record("flatMap of a handed-back answer is not later")
            return
        }
        #expect(try await next.value() == 3)
        let skipped = Self.handedBack(.failure(Refusal(code: 3))).flatMap { _ -> Pending<Int, Refusal> in
            Issue.record("continued after a failure")
            return .ready(.success(0))
        }
        #expect(await skipped.result() == .failure(Refusal(code: 3)))
    }
}
