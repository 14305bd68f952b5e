import Answers
import Testing

@testable import HTTPServer
@testable import Locking

@Suite struct HTTPHandlerResultTests {
    @Test func observersSeeTheDeferredResponseInOrder() async {
        let seen = Locked<[String]>([])
        let result = HTTPHandlerResult.deferred { HTTPResponse(status: 202) }
            .observingDeferred { r in seen.withLock { $0.append("first \(r.status)") } }
            .observingDeferred { r in seen.withLock { $0.append("second \(r.status)") } }
        guard case .answer(.later(let work), let finished) = result, let finished else {
            Issue.record("not a deferred result with an observer")
            return
        }
        finished(await work().get())
        #expect(seen.withLock { $0 } == ["first 202", "second 202"])
    }

    @Test func observersSeeTheHandedOverResponseInOrder() {
        let seen = Locked<[String]>([])
        let result = HTTPHandlerResult.answer(.handedBack { answer in answer(.success(HTTPResponse(status: 201))) })
            .observingDeferred { r in seen.withLock { $0.append("first \(r.status)") } }
            .observingDeferred { r in seen.withLock { $0.append("second \(r.status)") } }
        guard case .answer(.handedBack(let start), let finished) = result, let finished else {
            Issue.record("not a handed-over result with an observer")
            return
        }
        #expect(result.isDeferred)
        start { finished($0.get()) }
        #expect(seen.withLock { $0 } == ["first 201", "second 201"])
    }

    @Test func otherResultsAreLeftAsTheyAre() {
        let result = HTTPHandlerResult.respond(HTTPResponse(status: 204)).observingDeferred { _ in
            Issue.record("called")
        }
        guard let response = result.immediate else {
            Issue.record("changed")
            return
        }
        #expect(response.status == 204)
    }
}
