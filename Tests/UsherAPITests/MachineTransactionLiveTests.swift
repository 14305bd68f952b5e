import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import UsherAPI
@testable import UsherCore

/// `POST /v1/machines/{m}/transactions`, `…/{id}/commit`, `…/{id}/abort`.
@Suite struct MachineTransactionLiveTests {
    static let config = #"""
        {"machine_transaction_seconds": 7, "max_machine_transaction_seconds": 60,
         "machines": {"player": {"definition": "player"}}}
        """#
    static let base = "/v1/machines/player"

    @Test func openCommitAndTheConflictsInBetween() throws {
        let s = try LiveServer(Self.config)
        let c = s.client()
        let v0 = try #require(try c.request("GET", Self.base).json["version"] as? Int)

        let opened = try c.request(
            "POST", "\(Self.base)/transactions", body: #"{"event": "prepare", "data": {"track": 3}}"#)
        #expect(opened.status == 201)
        let id = try #require(opened.json["id"] as? String)
        #expect(opened.json["event"] as? String == "prepare")
        #expect(opened.json["from"] as? String == "NotReady")
        #expect(opened.json["to"] as? String == "Ready")
        #expect(opened.json["status"] as? String == "open")
        #expect(opened.json["version"] as? Int == v0 + 1)
        #expect(opened.headers["etag"] == "\"\(v0 + 1)\"")
        let expiresAt = try #require(opened.json["expires_at"] as? String)

        // The machine stays in its state and shows the transaction.
        let held = try c.request("GET", Self.base)
        #expect(held.json["state"] as? String == "NotReady")
        #expect(held.json["allowed_events"] as? [String] == [])
        #expect((held.json["transaction"] as? [String: Any])?["id"] as? String == id)
        #expect(held.headers["etag"] == "\"\(v0 + 1)\"")

        // Every other event or transaction is refused, naming it and its expiry.
        for (path, body) in [
            ("\(Self.base)/events/prepare", "{}"), ("\(Self.base)/transactions", #"{"event": "prepare"}"#),
        ] {
            let refused = try c.request("POST", path, body: body)
            #expect(refused.status == 409)
            #expect(refused.code == "transaction_open")
            #expect(refused.json["transaction"] as? String == id)
            #expect(refused.json["event"] as? String == "prepare")
            #expect(refused.json["expires_at"] as? String == expiresAt)
        }

        let committed = try c.request("POST", "\(Self.base)/transactions/\(id)/commit")
        #expect(committed.status == 200)
        #expect(committed.json["to"] as? String == "Ready")
        #expect(committed.json["from"] as? String == "NotReady")
        #expect(committed.json["event"] as? String == "prepare")
        #expect(committed.json["version"] as? Int == v0 + 2)
        #expect(committed.json["fence"] as? Int == v0 + 2)
        #expect(committed.headers["etag"] == "\"\(v0 + 2)\"")

        let state = try c.request("GET", Self.base).json
        #expect(state["transaction"] is NSNull)
        #expect(state["allowed_events"] as? [String] == ["start"])
        let last = try #require((state["history"] as? [[String: Any]])?.last)
        #expect(last["cause"] as? String == "event")
        #expect(last["transaction"] as? String == id)
        #expect((last["data"] as? [String: Any])?["track"] as? Int == 3)

        for action in ["commit", "abort"] {
            let late = try c.request("POST", "\(Self.base)/transactions/\(id)/\(action)")
            #expect(late.status == 409)
            #expect(late.code == "transaction_ended")
            #expect(late.json["current_status"] as? String == "committed")
            #expect(late.json["status"] as? Int == 409)
        }
        #expect(try c.request("POST", "\(Self.base)/transactions/nope/commit").status == 404)
        #expect(try c.request("POST", "\(Self.base)/transactions/nope/abort").code == "not_found")
    }

    @Test func abortRecordsTheAttemptAndLeavesTheState() throws {
        let s = try AppTester(Self.config)
        #expect(try s.call("POST", "\(Self.base)/events/prepare").status == 200)
        let opened = try s.call("POST", "\(Self.base)/transactions", #"{"event": "start"}"#)
        let id = try #require(opened.json["id"] as? String)
        let version = try #require(opened.json["version"] as? Int)
        let aborted = try s.call("POST", "\(Self.base)/transactions/\(id)/abort", "{}")
        #expect(aborted.status == 200)
        #expect(aborted.json["status"] as? String == "aborted")
        #expect(aborted.json["version"] as? Int == version + 1)
        #expect(aborted.headers["etag"] == "\"\(version + 1)\"")

        let state = try s.call("GET", Self.base).json
        #expect(state["state"] as? String == "Ready")
        #expect(state["version"] as? Int == version + 1)
        let last = try #require((state["history"] as? [[String: Any]])?.last)
        #expect(last["cause"] as? String == "aborted")
        #expect(last["from"] as? String == "Ready")
        #expect(last["to"] as? String == "Ready")
        #expect(last["attempted"] as? String == "Running")
        #expect(last["transaction"] as? String == id)
        #expect(
            try s.call("POST", "\(Self.base)/transactions/\(id)/commit").json["current_status"] as? String == "aborted")
        #expect(try s.call("POST", "\(Self.base)/events/start").status == 200)
    }

    @Test func ifMatchAndBadRequests() throws {
        let s = try AppTester(Self.config)
        let version = try #require(try s.call("GET", Self.base).json["version"] as? Int)
        let path = "\(Self.base)/transactions"
        let stale = try s.call("POST", path, #"{"event": "prepare"}"#, headers: ["If-Match": "\"\(version - 1)\""])
        #expect(stale.status == 412)
        #expect(stale.json["version"] as? Int == version)

        #expect(try s.call("POST", path, "{}").json["field"] as? String == "event")
        #expect(try s.call("POST", path, #"{"event": "prepare", "timeout_seconds": 0.001}"#).status == 400)
        let tooLong = try s.call("POST", path, #"{"event": "prepare", "timeout_seconds": 61}"#)
        #expect(tooLong.status == 400)
        #expect(tooLong.json["field"] as? String == "timeout_seconds")
        #expect(try s.call("POST", path, #"{"event": "prepare", "bogus": 1}"#).json["field"] as? String == "bogus")
        let unknown = try s.call("POST", path, #"{"event": "fly"}"#)
        #expect(unknown.status == 404)
        #expect(unknown.json["allowed_events"] as? [String] == ["prepare"])
        #expect(try s.call("POST", path, #"{"event": "start"}"#).code == "invalid_transition")
        #expect(try s.call("GET", Self.base).json["version"] as? Int == version)

        let fresh = try s.call("POST", path, #"{"event": "prepare"}"#, headers: ["If-Match": "\(version)"])
        #expect(fresh.status == 201)
        let id = try #require(fresh.json["id"] as? String)
        #expect(try s.call("POST", "\(path)/\(id)/commit", #"{"x": 1}"#).status == 400)
        #expect(try s.call("POST", "\(path)/\(id)/commit?wait=1").status == 400)
    }

    @Test func theTimeoutExpiresTheTransaction() throws {
        let clock = ManualClock()
        let s = try AppTester(Self.config, clock: clock)
        let opened = try s.call("POST", "\(Self.base)/transactions", #"{"event": "prepare"}"#)
        let id = try #require(opened.json["id"] as? String)
        // The default timeout: machine_transaction_seconds.
        let parser = ISO8601DateFormatter()
        parser.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let openedAt = try #require(parser.date(from: opened.json["opened_at"] as? String ?? ""))
        let expiresAt = try #require(parser.date(from: opened.json["expires_at"] as? String ?? ""))
        #expect(expiresAt.timeIntervalSince(openedAt) == 7)
        clock.advance(by: 7)
        let state = try s.call("GET", Self.base).json
        #expect(state["transaction"] is NSNull)
        #expect(state["state"] as? String == "NotReady")
        #expect((state["history"] as? [[String: Any]])?.last?["cause"] as? String == "expired")
        let late = try s.call("POST", "\(Self.base)/transactions/\(id)/commit")
        #expect(late.code == "transaction_ended")
        #expect(late.json["current_status"] as? String == "expired")
    }

    @Test func longPollsWakeOnOpenCommitAndAbort() throws {
        let s = try AppTester(Self.config)
        var version = try #require(try s.call("GET", Self.base).json["version"] as? Int)
        func poll(during action: () throws -> Void) throws -> [String: Any] {
            let v = version
            let response = s.inBackground { try s.call("GET", "\(Self.base)?wait=10&version=\(v)") }
            s.untilParked(1)
            try action()
            let r = try #require(response())
            version = try #require(r.json["version"] as? Int)
            return r.json
        }
        var id = ""
        var seen = try poll {
            id = try #require(
                try s.call("POST", "\(Self.base)/transactions", #"{"event": "prepare"}"#).json["id"] as? String)
        }
        #expect((seen["transaction"] as? [String: Any])?["id"] as? String == id)
        seen = try poll { _ = try s.call("POST", "\(Self.base)/transactions/\(id)/commit") }
        #expect(seen["state"] as? String == "Ready")
        id = try #require(try s.call("POST", "\(Self.base)/transactions", #"{"event": "start"}"#).json["id"] as? String)
        version += 1
        seen = try poll { _ = try s.call("POST", "\(Self.base)/transactions/\(id)/abort") }
        #expect(seen["state"] as? String == "Ready")
        #expect(seen["transaction"] is NSNull)
    }

    @Test func metricsCountTransactionsByOutcome() throws {
        let clock = ManualClock()
        let s = try AppTester(Self.config, clock: clock)
        let path = "\(Self.base)/transactions"
        func open(_ event: String) throws -> String {
            try #require(try s.call("POST", path, #"{"event": "\#(event)"}"#).json["id"] as? String)
        }
        #expect(try s.call("POST", "\(path)/\(try open("prepare"))/commit").status == 200)
        #expect(try s.call("POST", "\(path)/\(try open("start"))/abort").status == 200)
        #expect(try s.call("POST", "\(path)/\(try open("start"))/abort").status == 200)
        _ = try open("start")
        clock.advance(by: 7)
        let text = try s.call("GET", "/metrics").text
        #expect(text.contains("# TYPE usher_machine_transactions_total counter"))
        for (outcome, n) in [("committed", 1), ("aborted", 2), ("expired", 1)] {
            #expect(
                text.contains(
                    #"usher_machine_transactions_total{kind="machines",name="player",outcome="\#(outcome)"} \#(n)"#),
                "\(outcome)")
        }
    }

    @Test func theEventStreamShowsEachStep() throws {
        let s = try LiveServer(Self.config)
        let events = try SSEReader(port: s.port, "/v1/events?kind=machines&name=player")
        let path = "\(Self.base)/transactions"
        let first = try #require(try s.call("POST", path, #"{"event": "prepare"}"#).json["id"] as? String)
        #expect(try s.call("POST", "\(path)/\(first)/commit").status == 200)
        let second = try #require(try s.call("POST", path, #"{"event": "start"}"#).json["id"] as? String)
        #expect(try s.call("POST", "\(path)/\(second)/abort").status == 200)
        var seen: [(String, String?)] = []
        for _ in 0..<5 {
            let e = try #require(try events.next())
            let body = e.data["data"] as? [String: Any]
            seen.append((e.type, body?["status"] as? String ?? body?["transaction"] as? String))
        }
        #expect(
            seen.map(\.0) == [
                "transaction-opened", "transition", "transaction-committed", "transaction-opened",
                "transaction-aborted",
            ])
        #expect(seen.map(\.1) == ["open", first, "committed", "open", "aborted"])
    }

    @Test func deletingTheMachineEndsItsTransaction() throws {
        let s = try AppTester(Self.config)
        #expect(try s.call("PUT", "/v1/machines/m", #"{"definition": "player"}"#).status == 201)
        let id = try #require(
            try s.call("POST", "/v1/machines/m/transactions", #"{"event": "prepare"}"#).json["id"] as? String)
        #expect(try s.call("DELETE", "/v1/machines/m").status == 204)
        #expect(try s.call("POST", "/v1/machines/m/transactions/\(id)/commit").status == 404)
        #expect(try s.call("PUT", "/v1/machines/m", #"{"definition": "player"}"#).status == 201)
        let fresh = try s.call("GET", "/v1/machines/m").json
        #expect(fresh["transaction"] is NSNull)
        #expect(fresh["state"] as? String == "NotReady")
    }

    @Test func theDefaultTimeoutMayNotPassTheMax() throws {
        #expect(throws: FieldError.self) {
            try UsherConfig.parse(
                try JSONValue.parse(#"{"machine_transaction_seconds": 90, "max_machine_transaction_seconds": 60}"#))
        }
        #expect(throws: FieldError.self) {
            try UsherConfig.parse(try JSONValue.parse(#"{"machine_transaction_seconds": 0.001}"#))
        }
    }
}
