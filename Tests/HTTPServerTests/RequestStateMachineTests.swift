import Testing

@testable import HTTPServer
@testable import Locking

/// Counts undo calls.
private final class Counter: Sendable {
    private let value = Locked(0)
    func add() { value.withLock { $0 += 1 } }
    var count: Int { value.withLock { $0 } }
}

/// Every path of a request's life, without a network.
@Suite struct RequestStateMachineTests {
    private func receiving() -> RequestStateMachine {
        var machine = RequestStateMachine()
        #expect(machine.headChecked(.success(nil), maxBodyBytes: 10) == .receive)
        return machine
    }

    private func parked() -> RequestStateMachine {
        var machine = receiving()
        guard case .handle = machine.called() else {
            Issue.record("not handled")
            return machine
        }
        machine.parked()
        return machine
    }

    /// A response whose undo counts into `counter`.
    private func response(_ counter: Counter) -> HTTPResponse {
        var response = HTTPResponse(status: 200)
        response.undelivered = { counter.add() }
        return response
    }

    @Test func aRefusedHeadIsAnsweredAndNothingElseHappens() {
        var machine = RequestStateMachine()
        #expect(machine.headChecked(.failure(.badRequest("x")), maxBodyBytes: 10) == .refuse(.badRequest("x")))
        #expect(machine.bodyArrived(count: 5, maxBodyBytes: 10) == .drop)
        guard case .none = machine.called() else {
            Issue.record("refused request handled")
            return
        }
        #expect(machine.completed(delivered: false) == nil)
    }

    @Test func aDeclaredOversizeBodyIsRefusedBeforeItIsRead() {
        var machine = RequestStateMachine()
        #expect(machine.headChecked(.success(11), maxBodyBytes: 10) == .refuse(.payloadTooLarge(limit: 10)))
        var fits = RequestStateMachine()
        #expect(fits.headChecked(.success(10), maxBodyBytes: 10) == .receive)
    }

    @Test func aBodyPassingTheLimitIsRefusedAtThatChunk() {
        var machine = receiving()
        #expect(machine.bodyArrived(count: 6, maxBodyBytes: 10) == .append)
        #expect(machine.bodyArrived(count: 4, maxBodyBytes: 10) == .append)
        #expect(machine.bodyArrived(count: 1, maxBodyBytes: 10) == .refuseAndClose(.payloadTooLarge(limit: 10)))
        #expect(machine.bodyArrived(count: 1, maxBodyBytes: 10) == .drop)
        guard case .none = machine.called() else {
            Issue.record("refused request handled")
            return
        }
    }

    @Test func aDeferredAnswerGoesOutOnTheCallAfterResume() {
        let undone = Counter()
        var machine = parked()
        guard case .none = machine.called() else {
            Issue.record("answered while parked")
            return
        }
        guard case .resume = machine.workFinished(response(undone), peerGone: false) else {
            Issue.record("not resumed")
            return
        }
        guard case .queue(let answer) = machine.called() else {
            Issue.record("not queued")
            return
        }
        #expect(answer.status == 200)
        #expect(machine.completed(delivered: true) == nil)
        #expect(undone.count == 0)
    }

    @Test func aHangUpCancelsResumesOnceAndUndoesTheLateAnswer() {
        let undone = Counter()
        var machine = parked()
        #expect(machine.hungUp() == .cancelWorkAndResume)
        #expect(machine.hungUp() == .none)
        #expect(machine.isAbandoned)
        guard case .close = machine.called() else {
            Issue.record("not closed")
            return
        }
        // The work ends later, after the connection closed: only undo.
        guard case .undo(let undo) = machine.workFinished(response(undone), peerGone: false) else {
            Issue.record("resumed twice")
            return
        }
        undo?()
        #expect(undone.count == 1)
    }

    @Test func anAnswerForAClientSeenGoneIsUndoneAndTheConnectionClosed() {
        let undone = Counter()
        var machine = parked()
        guard case .resumeAndUndo(let undo) = machine.workFinished(response(undone), peerGone: true) else {
            Issue.record("answer handed to a gone client")
            return
        }
        undo?()
        #expect(undone.count == 1)
        guard case .close = machine.called() else {
            Issue.record("not closed")
            return
        }
        #expect(machine.hungUp() == .none)
    }

    @Test func anAnswerThatFailsToGoOutIsUndone() {
        let undone = Counter()
        var machine = parked()
        _ = machine.workFinished(response(undone), peerGone: false)
        _ = machine.called()
        machine.completed(delivered: false)?()
        #expect(undone.count == 1)
        // Once only.
        #expect(machine.completed(delivered: false) == nil)

        var immediate = receiving()
        _ = immediate.called()
        immediate.answered(undelivered: response(undone).undelivered)
        immediate.completed(delivered: false)?()
        #expect(undone.count == 2)
    }

    @Test func aHangUpAfterTheAnswerIsQueuedChangesNothing() {
        let undone = Counter()
        var machine = parked()
        _ = machine.workFinished(response(undone), peerGone: false)
        #expect(machine.hungUp() == .none)
        guard case .queue = machine.called() else {
            Issue.record("not queued")
            return
        }
        #expect(machine.completed(delivered: true) == nil)
    }
}
