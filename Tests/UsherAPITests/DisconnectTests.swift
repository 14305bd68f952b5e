import Foundation
import TestSupport
import Testing

@testable import HTTPServer
@testable import UsherAPI
@testable import UsherCore

/// What a client that hangs up keeps: nothing. The app is called as the
/// server calls it (`handle`, then a deferred answer's work in a task); the
/// server's part is played by hand: cancelling that task is the hang-up of a
/// parked request, calling `undelivered` an answer that never reached its client.
@Suite struct DisconnectTests {
    // MARK: - Queues

    @Test func aParkedVisitorIsCancelledWhenItsClientHangsUp() async throws {
        let h = try DisconnectHarness(#"{"queues": {"deploy": {"capacity": 1, "hold_seconds": 60}}}"#)
        #expect(try h.now("POST", "/v1/queues/deploy/visitors", body: #"{"id": "a"}"#).json["status"].text == "granted")
        let parked = try h.park("POST", "/v1/queues/deploy/visitors", [("wait", "30")], body: #"{"id": "b"}"#)
        let queue = try h.queue("deploy")
        await h.eventually { await queue.waiterCount == 1 }
        parked.cancel()
        let answer = await parked.value
        #expect(answer.json["status"].text == "cancelled" && answer.json["reason"].text == "disconnected")
        #expect(answer.undelivered == nil)
        let b = try h.now("GET", "/v1/queues/deploy/visitors/b").json
        #expect(b["status"].text == "cancelled" && b["reason"].text == "disconnected")
        // The slot a frees goes to nobody.
        _ = try h.now("POST", "/v1/queues/deploy/visitors/a/complete")
        let counts = try h.now("GET", "/v1/queues/deploy").json["counts"]
        #expect(counts?["holding"] == .int(0) && counts?["waiting"] == .int(0) && counts?["cancelled_total"] == .int(1))
        #expect(await queue.waiterCount == 0)
    }

    @Test func aVisitorCancelledBeforeItParksIsWithdrawnToo() async throws {
        let h = try DisconnectHarness(#"{"queues": {"deploy": {"capacity": 1}}}"#)
        _ = try h.now("POST", "/v1/queues/deploy/visitors", body: #"{"id": "a"}"#)
        let work = try h.deferred("POST", "/v1/queues/deploy/visitors", [("wait", "30")], body: #"{"id": "b"}"#)
        let parked = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await work()
        }
        #expect(await parked.value.json["status"].text == "cancelled")
        #expect(try h.now("GET", "/v1/queues/deploy/visitors/b").json["reason"].text == "disconnected")
    }

    @Test func keepLeavesTheVisitorInLine() async throws {
        let h = try DisconnectHarness(#"{"queues": {"deploy": {"capacity": 1}}}"#)
        _ = try h.now("POST", "/v1/queues/deploy/visitors", body: #"{"id": "a"}"#)
        let parked = try h.park(
            "POST", "/v1/queues/deploy/visitors", [("wait", "30"), ("on_disconnect", "keep")], body: #"{"id": "b"}"#)
        let queue = try h.queue("deploy")
        await h.eventually { await queue.waiterCount == 1 }
        parked.cancel()
        #expect(await parked.value.json["status"].text == "waiting")
        _ = try h.now("POST", "/v1/queues/deploy/visitors/a/complete")
        let b = try h.now("GET", "/v1/queues/deploy/visitors/b").json
        #expect(b["status"].text == "granted")
    }

    @Test func anUnknownOnDisconnectIsABadRequest() throws {
        let h = try DisconnectHarness(#"{"queues": {"deploy": {}}}"#)
        let r = try h.now("POST", "/v1/queues/deploy/visitors", [("wait", "1"), ("on_disconnect", "stay")])
        #expect(r.status == 400 && r.json["field"].text == "on_disconnect")
    }

    @Test func aGrantThatWasNotDeliveredIsReleased() async throws {
        let h = try DisconnectHarness(#"{"queues": {"deploy": {"capacity": 1, "hold_seconds": 60}}}"#)
        _ = try h.now("POST", "/v1/queues/deploy/visitors", body: #"{"id": "a"}"#)
        let parked = try h.park("POST", "/v1/queues/deploy/visitors", [("wait", "30")], body: #"{"id": "b"}"#)
        _ = try h.now("POST", "/v1/queues/deploy/visitors", body: #"{"id": "c"}"#)
        let queue = try h.queue("deploy")
        await h.eventually { await queue.waiterCount == 1 }
        _ = try h.now("POST", "/v1/queues/deploy/visitors/a/complete")
        let answer = await parked.value
        #expect(answer.json["status"].text == "granted")
        try undo(answer)
        let b = try h.now("GET", "/v1/queues/deploy/visitors/b").json
        #expect(b["status"].text == "released" && b["reason"].text == "undelivered")
        // Its slot passed on at once.
        #expect(try h.now("GET", "/v1/queues/deploy/visitors/c").json["status"].text == "granted")
        // A second call (or one after the visitor moved on) changes nothing.
        try undo(answer)
        #expect(try h.now("GET", "/v1/queues/deploy/visitors/c").json["status"].text == "granted")
    }

    @Test func anImmediateGrantCarriesTheUndoAndKeepDoesNot() throws {
        let h = try DisconnectHarness(#"{"queues": {"deploy": {"capacity": 2}}}"#)
        let granted = try h.now("POST", "/v1/queues/deploy/visitors", [("wait", "30")], body: #"{"id": "a"}"#)
        try undo(granted)
        #expect(try h.now("GET", "/v1/queues/deploy/visitors/a").json["reason"].text == "undelivered")
        let kept = try h.now("POST", "/v1/queues/deploy/visitors", [("on_disconnect", "keep")], body: #"{"id": "b"}"#)
        #expect(kept.json["status"].text == "granted" && kept.undelivered == nil)
    }

    @Test func anUndoAfterTheHoldExpiredLeavesTheNextHolderAlone() async throws {
        let h = try DisconnectHarness(#"{"queues": {"deploy": {"capacity": 1, "hold_seconds": 10}}}"#)
        let a = try h.now("POST", "/v1/queues/deploy/visitors", body: #"{"id": "a"}"#)
        _ = try h.now("POST", "/v1/queues/deploy/visitors", body: #"{"id": "b"}"#)
        h.clock.advance(by: 10)
        try undo(a)
        #expect(try h.now("GET", "/v1/queues/deploy/visitors/a").json["status"].text == "expired")
        #expect(try h.now("GET", "/v1/queues/deploy/visitors/b").json["status"].text == "granted")
    }

    /// A grant and a hang-up at the same moment: whichever the queue sees
    /// first wins, and the undo covers the other order. Either way the dead
    /// client ends up holding nothing and nobody else is kept waiting.
    @Test func aGrantRacingAHangUpNeverLeavesTheSlotHeld() async throws {
        for round in 0..<50 {
            let h = try DisconnectHarness(#"{"queues": {"deploy": {"capacity": 1, "hold_seconds": 60}}}"#)
            _ = try h.now("POST", "/v1/queues/deploy/visitors", body: #"{"id": "a"}"#)
            let parked = try h.park("POST", "/v1/queues/deploy/visitors", [("wait", "30")], body: #"{"id": "b"}"#)
            let queue = try h.queue("deploy")
            await h.eventually { await queue.waiterCount == 1 }
            if round % 2 == 0 {
                parked.cancel()
                _ = try h.now("POST", "/v1/queues/deploy/visitors/a/complete")
            } else {
                _ = try h.now("POST", "/v1/queues/deploy/visitors/a/complete")
                parked.cancel()
            }
            let answer = await parked.value
            let status = answer.json["status"].text
            let b = try h.now("GET", "/v1/queues/deploy/visitors/b").json
            #expect(b["status"].text == status, "the answer tells the state")
            if status == "granted" {
                try undo(answer)
            } else {
                #expect(status == "cancelled" && answer.undelivered == nil)
            }
            let counts = try h.now("GET", "/v1/queues/deploy").json["counts"]
            #expect(counts?["holding"] == .int(0) && counts?["waiting"] == .int(0))
        }
    }

    // MARK: - Retries with the same id

    /// The client's first request was answered a grant it never saw; its
    /// retry with the same id is answered that grant; the first request's
    /// undo, coming after, must leave it alone: the client holds it now.
    @Test func aGrantAnsweredToARetryOutlivesTheFirstRequestsUndo() async throws {
        let h = try DisconnectHarness(#"{"queues": {"deploy": {"capacity": 1, "hold_seconds": 60}}}"#)
        _ = try h.now("POST", "/v1/queues/deploy/visitors", body: #"{"id": "a"}"#)
        let parked = try h.park("POST", "/v1/queues/deploy/visitors", [("wait", "30")], body: #"{"id": "b"}"#)
        _ = try h.now("POST", "/v1/queues/deploy/visitors", body: #"{"id": "c"}"#)
        let queue = try h.queue("deploy")
        await h.eventually { await queue.waiterCount == 1 }
        _ = try h.now("POST", "/v1/queues/deploy/visitors/a/complete")
        let first = await parked.value
        #expect(first.json["status"].text == "granted")
        let retry = try h.now("POST", "/v1/queues/deploy/visitors", body: #"{"id": "b"}"#)
        #expect(retry.status == 200 && retry.json["status"].text == "granted")
        #expect(retry.json["fence"] == first.json["fence"])
        try undo(first)
        let b = try h.now("GET", "/v1/queues/deploy/visitors/b").json
        #expect(b["status"].text == "granted" && b["fence"] == first.json["fence"])
        #expect(try h.now("GET", "/v1/queues/deploy/visitors/c").json["status"].text == "waiting")
        // Nor does the retry's own undo: which answer reached the client is unknown.
        try undo(retry)
        #expect(try h.now("GET", "/v1/queues/deploy/visitors/b").json["status"].text == "granted")
    }

    /// A retry that parks beside the first request: both are answered the
    /// grant, and the first one's undo leaves it to the retry.
    @Test func aParkedRetryKeepsTheGrantTheFirstRequestCouldNotDeliver() async throws {
        let h = try DisconnectHarness(#"{"queues": {"deploy": {"capacity": 1, "hold_seconds": 60}}}"#)
        _ = try h.now("POST", "/v1/queues/deploy/visitors", body: #"{"id": "a"}"#)
        let first = try h.park("POST", "/v1/queues/deploy/visitors", [("wait", "30")], body: #"{"id": "b"}"#)
        let queue = try h.queue("deploy")
        await h.eventually { await queue.waiterCount == 1 }
        let retry = try h.park("POST", "/v1/queues/deploy/visitors", [("wait", "30")], body: #"{"id": "b"}"#)
        await h.eventually { await queue.waiterCount == 2 }
        _ = try h.now("POST", "/v1/queues/deploy/visitors/a/complete")
        let (firstAnswer, retryAnswer) = (await first.value, await retry.value)
        #expect(firstAnswer.json["status"].text == "granted" && retryAnswer.json["status"].text == "granted")
        try undo(firstAnswer)
        #expect(try h.now("GET", "/v1/queues/deploy/visitors/b").json["status"].text == "granted")
    }

    /// The other order: an undo that came first is what the retry is told.
    @Test func aRetryAfterTheUndoIsToldTheGrantWasTakenBack() async throws {
        let h = try DisconnectHarness(#"{"queues": {"deploy": {"capacity": 1, "hold_seconds": 60}}}"#)
        let first = try h.now("POST", "/v1/queues/deploy/visitors", body: #"{"id": "a"}"#)
        try undo(first)
        let retry = try h.now("POST", "/v1/queues/deploy/visitors", body: #"{"id": "a"}"#).json
        #expect(retry["status"].text == "released" && retry["reason"].text == "undelivered")
    }

    @Test func aLeaseAnsweredToARetryOutlivesTheFirstRequestsUndo() async throws {
        let h = try DisconnectHarness(#"{"pools": {"gpus": {"elements": ["g1"]}}}"#)
        _ = try h.now("POST", "/v1/pools/gpus/fetch", body: #"{"id": "held"}"#)
        let parked = try h.park("POST", "/v1/pools/gpus/fetch", [("wait", "30")], body: #"{"id": "w"}"#)
        let pool = try h.pool("gpus")
        await h.eventually { await pool.waiterCount == 1 }
        _ = try h.now("POST", "/v1/pools/gpus/recycle", body: #"{"lease": "held"}"#)
        let first = await parked.value
        #expect(first.json["status"].text == "active")
        let retry = try h.now("POST", "/v1/pools/gpus/fetch", [("wait", "30")], body: #"{"id": "w"}"#)
        #expect(retry.json["status"].text == "active")
        #expect(retry.json["fence"] == first.json["fence"])
        try undo(first)
        try undo(retry)
        let w = try h.now("GET", "/v1/pools/gpus/leases/w").json
        #expect(w["status"].text == "active" && w["reason"] == nil)
        #expect(try h.now("GET", "/v1/pools/gpus").json["counts"]?["available"] == .int(0))
    }

    @Test func aParkedRetryKeepsTheLeaseTheFirstFetchCouldNotDeliver() async throws {
        let h = try DisconnectHarness(#"{"pools": {"gpus": {"elements": ["g1"]}}}"#)
        _ = try h.now("POST", "/v1/pools/gpus/fetch", body: #"{"id": "held"}"#)
        let first = try h.park("POST", "/v1/pools/gpus/fetch", [("wait", "30")], body: #"{"id": "w"}"#)
        let pool = try h.pool("gpus")
        await h.eventually { await pool.waiterCount == 1 }
        let retry = try h.park("POST", "/v1/pools/gpus/fetch", [("wait", "30")], body: #"{"id": "w"}"#)
        await h.eventually { await pool.waiterCount == 2 }
        _ = try h.now("POST", "/v1/pools/gpus/recycle", body: #"{"lease": "held"}"#)
        let (firstAnswer, retryAnswer) = (await first.value, await retry.value)
        #expect(firstAnswer.json["status"].text == "active")
        #expect(retryAnswer.json["status"].text == "active")
        try undo(firstAnswer)
        #expect(try h.now("GET", "/v1/pools/gpus/leases/w").json["status"].text == "active")
    }

    // MARK: - Pools

    @Test func aWaitingFetchLeavesTheLineWhenItsClientHangsUp() async throws {
        let h = try DisconnectHarness(#"{"pools": {"gpus": {"elements": ["g1"]}}}"#)
        let held = try h.now("POST", "/v1/pools/gpus/fetch").json
        let parked = try h.park("POST", "/v1/pools/gpus/fetch", [("wait", "30")], body: #"{"id": "w"}"#)
        let pool = try h.pool("gpus")
        await h.eventually { await pool.waiterCount == 1 }
        parked.cancel()
        let answer = await parked.value
        #expect(answer.status == 409 && answer.undelivered == nil)
        #expect(try h.now("GET", "/v1/pools/gpus").json["counts"]?["waiting"] == .int(0))
        guard case .string(let lease)? = held["id"] else { throw Failure("no lease id") }
        _ = try h.now("POST", "/v1/pools/gpus/recycle", body: #"{"lease": "\#(lease)"}"#)
        #expect(try h.now("GET", "/v1/pools/gpus").json["counts"]?["available"] == .int(1))
    }

    @Test func aLeaseThatWasNotDeliveredIsRecycled() async throws {
        let h = try DisconnectHarness(#"{"pools": {"gpus": {"elements": ["g1"]}}}"#)
        let held = try h.now("POST", "/v1/pools/gpus/fetch", body: #"{"id": "held"}"#)
        let parked = try h.park("POST", "/v1/pools/gpus/fetch", [("wait", "30")], body: #"{"id": "w"}"#)
        let pool = try h.pool("gpus")
        await h.eventually { await pool.waiterCount == 1 }
        _ = try h.now("POST", "/v1/pools/gpus/recycle", body: #"{"lease": "held"}"#)
        let answer = await parked.value
        #expect(answer.json["status"].text == "active")
        try undo(answer)
        let state = try h.now("GET", "/v1/pools/gpus").json
        #expect(state["counts"]?["available"] == .int(1) && state["counts"]?["recycled_total"] == .int(2))
        #expect(state["elements"].first?["status"].text == "free")
        // The held lease, answered at once, carries its undo too.
        #expect(held.undelivered != nil)
        let again = try h.now("POST", "/v1/pools/gpus/fetch", [("on_disconnect", "keep")])
        #expect(again.json["status"].text == "active" && again.undelivered == nil)
    }

    @Test func anUndeliveredLeaseShowsItsReason() async throws {
        let h = try DisconnectHarness(#"{"pools": {"gpus": {"elements": ["g1"]}}}"#)
        let lease = try h.now("POST", "/v1/pools/gpus/fetch", [("wait", "5")], body: #"{"id": "l"}"#)
        try undo(lease)
        let pool = try h.pool("gpus")
        let ended = try pool.withIsolation { p throws(PoolError) in try p.lease(id: "l") }
        #expect(ended.status == .recycled && ended.reason == "undelivered")
    }

    // MARK: - Pipelines

    @Test func aParkedConsumerThatHangsUpTakesNothing() async throws {
        let h = try DisconnectHarness(#"{"pipelines": {"jobs": {"ack_seconds": 60}}}"#)
        let parked = try h.park("POST", "/v1/pipelines/jobs/take", [("wait", "30")])
        let pipeline = try h.pipeline("jobs")
        await h.eventually { await pipeline.waitingConsumers == 1 }
        parked.cancel()
        #expect(await parked.value.status == 204)
        _ = try h.now("POST", "/v1/pipelines/jobs/items", body: #"{"id": "x", "payload": 1}"#)
        let x = try h.now("GET", "/v1/pipelines/jobs/items/x").json
        #expect(x["status"].text == "ready" && x["deliveries"] == .int(0))
    }

    @Test func itemsThatWereNotDeliveredGoBackWithoutCountingADelivery() async throws {
        let h = try DisconnectHarness(#"{"pipelines": {"jobs": {"ack_seconds": 60, "max_deliveries": 1}}}"#)
        let parked = try h.park("POST", "/v1/pipelines/jobs/take", [("wait", "30")])
        let pipeline = try h.pipeline("jobs")
        await h.eventually { await pipeline.waitingConsumers == 1 }
        _ = try h.now("POST", "/v1/pipelines/jobs/items", body: #"{"id": "x", "payload": 1}"#)
        let answer = await parked.value
        #expect(answer.status == 200)
        try undo(answer)
        let x = try h.now("GET", "/v1/pipelines/jobs/items/x").json
        #expect(x["status"].text == "ready" && x["deliveries"] == .int(0))
        // With max_deliveries 1 it would be dead had the hand-out counted; the next consumer gets it.
        let next = try h.now("POST", "/v1/pipelines/jobs/take").json["items"]
        #expect(next.first?["id"].text == "x" && next.first?["deliveries"] == .int(1))
        #expect(try h.now("GET", "/v1/pipelines/jobs/items/x").json["deliveries"] == .int(1))
        #expect(try h.now("GET", "/v1/pipelines/jobs/dead").json["dead"] == .int(0))
    }

    @Test func keepLeavesTakenItemsInFlight() throws {
        let h = try DisconnectHarness(#"{"pipelines": {"jobs": {}}}"#)
        _ = try h.now("POST", "/v1/pipelines/jobs/items", body: #"{"id": "x", "payload": 1}"#)
        let taken = try h.now("POST", "/v1/pipelines/jobs/take", [("on_disconnect", "keep")])
        #expect(taken.status == 200 && taken.undelivered == nil)
    }

    @Test func aParkedProducerThatHangsUpPushesNothing() async throws {
        let h = try DisconnectHarness(#"{"pipelines": {"jobs": {"capacity": 1}}}"#)
        _ = try h.now("POST", "/v1/pipelines/jobs/items", body: #"{"id": "x", "payload": 1}"#)
        let parked = try h.park(
            "POST", "/v1/pipelines/jobs/items", [("wait", "30")], body: #"{"id": "y", "payload": 2}"#)
        let pipeline = try h.pipeline("jobs")
        await h.eventually { await pipeline.waitingProducers == 1 }
        parked.cancel()
        #expect(await parked.value.status == 429)
        _ = try h.now("DELETE", "/v1/pipelines/jobs/items/x")
        #expect(try h.now("GET", "/v1/pipelines/jobs/items/y").status == 404)
    }

    // MARK: - Windows and machines: waits that only read

    @Test func aShowingWaitAndAMachineWaitAreDroppedOnHangUp() async throws {
        let h = try DisconnectHarness(#"{"windows": {"alerts": {}}, "machines": {"m": {"definition": "player"}}}"#)
        let showing = try h.park("GET", "/v1/windows/alerts/showing", [("wait", "30")])
        let window = try h.window("alerts")
        await h.eventually { await window.waiterCount == 1 }
        showing.cancel()
        #expect(await showing.value.status == 204)
        #expect(await window.waiterCount == 0)
        let machine = try h.park("GET", "/v1/machines/m", [("wait", "30")])
        let m = try h.app.registry.lookup(.machines, "m", as: StateMachine.self)
        await h.eventually { await m.waitingCount == 1 }
        machine.cancel()
        #expect(await machine.value.status == 200)
        #expect(await m.waitingCount == 0)
    }
}

/// Plays the server's part for an answer that could not be handed to its client.
func undo(_ response: HTTPResponse, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let undelivered = try #require(response.undelivered, sourceLocation: sourceLocation)
    undelivered()
}

/// The app on a manual clock, called directly as the server calls it.
struct DisconnectHarness {
    let clock = ManualClock()
    let app: UsherApp

    init(_ configJSON: String) throws {
        var config = try UsherConfig.parse(try JSONValue.parse(configJSON))
        config.logLevel = .error
        app = try UsherApp(config: config, clock: clock)
    }

    func handle(_ method: String, _ path: String, _ query: [(name: String, value: String)], body: String)
        -> HTTPHandlerResult
    {
        app.handle(HTTPRequest(method: method, path: path, query: query, body: Data(body.utf8)))
    }

    /// An answer the app gives at once.
    func now(
        _ method: String, _ path: String, _ query: [(name: String, value: String)] = [], body: String = ""
    ) throws -> HTTPResponse {
        guard let response = handle(method, path, query, body: body).immediate else {
            throw Failure("\(method) \(path) did not answer at once")
        }
        return response
    }

    /// A deferred answer's work.
    func deferred(
        _ method: String, _ path: String, _ query: [(name: String, value: String)] = [], body: String = ""
    ) throws -> @Sendable () async -> HTTPResponse {
        guard case .answer(.later(let work), _) = handle(method, path, query, body: body) else {
            throw Failure("\(method) \(path) did not park")
        }
        return { await work().get() }
    }

    /// A deferred answer's work, running as the server runs it: in a task, which a hang-up cancels.
    func park(
        _ method: String, _ path: String, _ query: [(name: String, value: String)] = [], body: String = ""
    ) throws -> Task<HTTPResponse, Never> {
        let work = try deferred(method, path, query, body: body)
        return Task { await work() }
    }

    func queue(_ name: String) throws -> VisitorQueue { try app.registry.lookup(.queues, name, as: VisitorQueue.self) }
    func pool(_ name: String) throws -> LeasePool { try app.registry.lookup(.pools, name, as: LeasePool.self) }
    func pipeline(_ name: String) throws -> Pipeline { try app.registry.lookup(.pipelines, name, as: Pipeline.self) }
    func window(_ name: String) throws -> WindowSlot { try app.registry.lookup(.windows, name, as: WindowSlot.self) }

    func eventually(_ condition: () async -> Bool, sourceLocation: SourceLocation = #_sourceLocation) async {
        await expectEventually(10, condition, sourceLocation: sourceLocation)
    }
}

struct Failure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension HTTPResponse {
    /// The body as JSON (null when it is not JSON).
    var json: JSONValue { (try? JSONValue.parse(Data(body))) ?? .null }
}

extension JSONValue {
    /// The string, if this is one.
    var text: String? { if case .string(let s) = self { s } else { nil } }
}

extension JSONValue? {
    /// The string, if this is one.
    var text: String? { self?.text }
    /// The first element, if this is a non-empty array.
    var first: JSONValue? { if case .array(let a)? = self { a.first } else { nil } }
}
