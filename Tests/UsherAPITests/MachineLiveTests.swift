import Foundation
import HTTPTestClient
import Testing

@testable import Locking

@Suite struct MachineLiveTests {
    static let config = #"""
        {"definitions": {"door": {"initial": "closed",
           "transitions": [{"event": "open", "from": "closed", "to": "opened"},
                           {"event": "close", "from": "opened", "to": "closed"}],
           "timeouts": [{"state": "opened", "after_seconds": 0.2, "event": "close"}]}},
         "machines": {"player": {"definition": "player"}}}
        """#

    @Test func aConditionalGetAnswers304UntilTheVersionMoves() throws {
        let s = try LiveServer(Self.config)
        let c = s.client()
        let first = try c.request("GET", "/v1/machines/player")
        let tag = try #require(first.headers["etag"])
        #expect(first.headers["cache-control"] == "no-cache")  // it has a validator
        let same = try c.request("GET", "/v1/machines/player", headers: ["If-None-Match": tag])
        #expect(same.status == 304 && same.body.isEmpty && same.headers["etag"] == tag, "\(same.status)")
        #expect(
            try c.request("GET", "/v1/machines/player", headers: ["If-None-Match": "W/\(tag), \"1\""]).status == 304)
        #expect(try c.request("GET", "/v1/machines/player", headers: ["If-None-Match": "*"]).status == 304)
        // A tag this server did not make, or an older one: the whole state.
        for other in [#""1""#, "nonsense", #""""#] {
            let whole = try c.request("GET", "/v1/machines/player", headers: ["If-None-Match": other])
            #expect(whole.status == 200 && whole.json["version"] != nil, "\(other)")
        }
        // With wait: parked while the tag is current, answered 200 when it moves.
        let moved = s.inBackground {
            try s.client().request("GET", "/v1/machines/player?wait=10", headers: ["If-None-Match": tag])
        }
        s.untilParked(1)
        let fired = try c.request("POST", "/v1/machines/player/events/prepare")
        let seen = try #require(moved())
        #expect(seen.status == 200 && seen.json["state"] as? String == "Ready")
        #expect(seen.headers["etag"] == "\"\(try #require(fired.json["version"] as? Int))\"")
        // The wait ends with nothing new: 304, not the same body again.
        let newTag = try #require(seen.headers["etag"])
        let quiet = try c.request("GET", "/v1/machines/player?wait=0.2", headers: ["If-None-Match": newTag])
        #expect(quiet.status == 304 && quiet.body.isEmpty)
    }

    @Test func lifecycleAndPlayerPath() throws {
        let s = try LiveServer(Self.config)
        let c = s.client()
        let state = try c.request("GET", "/v1/machines/player")
        #expect(state.status == 200)
        #expect(state.json["state"] as? String == "NotReady")
        #expect(state.json["allowed_events"] as? [String] == ["prepare"])
        let version = try #require(state.json["version"] as? Int)
        #expect(state.headers["etag"] == "\"\(version)\"")

        let prepared = try c.request("POST", "/v1/machines/player/events/prepare")
        #expect(prepared.status == 200)
        #expect(prepared.json["to"] as? String == "Ready")
        #expect(prepared.json["from"] as? String == "NotReady")
        #expect(prepared.json["version"] as? Int == version + 1)

        let invalid = try c.request("POST", "/v1/machines/player/events/teardown")
        #expect(invalid.status == 409)
        #expect(invalid.code == "invalid_transition")
        #expect(invalid.json["state"] as? String == "Ready")
        #expect(invalid.json["allowed_events"] as? [String] == ["start"])

        let unknown = try c.request("POST", "/v1/machines/player/events/fly")
        #expect(unknown.status == 404)
        #expect(unknown.json["allowed_events"] as? [String] == ["start"])

        let stale = try c.request("POST", "/v1/machines/player/events/start", headers: ["If-Match": "\"\(version)\""])
        #expect(stale.status == 412)
        #expect(stale.code == "precondition_failed")
        let fresh = try c.request(
            "POST", "/v1/machines/player/events/start", body: #"{"data": {"track": 3}}"#,
            headers: ["If-Match": "\(version + 1)"])
        #expect(fresh.status == 200)
        #expect(fresh.json["to"] as? String == "Running")

        let history = try #require(try c.request("GET", "/v1/machines/player").json["history"] as? [[String: Any]])
        #expect(history.map { $0["event"] as? String } == ["prepare", "start"])
        #expect(history.last?["cause"] as? String == "event")
    }

    @Test func createInlineAndConflicts() throws {
        let s = try AppTester(Self.config)
        let def = #"{"initial": "a", "transitions": [{"event": "go", "from": "a", "to": "b"}]}"#
        #expect(try s.call("PUT", "/v1/machines/m1", def).status == 201)
        #expect(try s.call("PUT", "/v1/machines/m1", def).status == 200)
        #expect(try s.call("PUT", "/v1/machines/m1", #"{"definition": "player"}"#).code == "already_exists")
        #expect(
            try s.call("PUT", "/v1/machines/m2", #"{"definition": {"initial": "x", "transitions": []}}"#).status == 201)
        let bad = try s.call(
            "PUT", "/v1/machines/m3",
            #"{"initial": "a", "states": ["a"], "transitions": [{"event": "go", "from": "a", "to": "zz"}]}"#)
        #expect(bad.status == 400)
        #expect((bad.json["detail"] as? String)?.contains("zz") == true)
        #expect(try s.call("PUT", "/v1/machines/m4", #"{"definition": "nope"}"#).status == 400)
        #expect(try s.call("PUT", "/v1/machines/m5", "{}").status == 400)
        let list = try s.call("GET", "/v1/machines")
        let machines = try #require(list.json["machines"] as? [[String: Any]])
        #expect(machines.count == 3)
        // The list shows each definition as the machine's own GET does.
        for summary in machines {
            let name = try #require(summary["name"] as? String)
            let own = try s.call("GET", "/v1/machines/\(name)")
            let listed = try JSONSerialization.data(
                withJSONObject: try #require(summary["definition"]), options: [.sortedKeys, .fragmentsAllowed])
            let shown = try JSONSerialization.data(
                withJSONObject: try #require(own.json["definition"]), options: [.sortedKeys, .fragmentsAllowed])
            #expect(listed == shown, "\(name)")
        }
        #expect(
            (machines.first { $0["name"] as? String == "m2" }?["definition"] as? [String: Any])?["initial"] as? String
                == "x")
        #expect(try s.call("DELETE", "/v1/machines/m1").status == 204)
        #expect(try s.call("GET", "/v1/machines/m1").status == 404)
    }

    @Test func timeoutFiresAsATransition() throws {
        let s = try AppTester(Self.config)
        #expect(try s.call("PUT", "/v1/machines/d", #"{"definition": "door"}"#).status == 201)
        let opened = try s.call("POST", "/v1/machines/d/events/open")
        let version = try #require(opened.json["version"] as? Int)
        let waited = try s.call("GET", "/v1/machines/d?wait=5&version=\(version)")
        #expect(waited.json["state"] as? String == "closed")
        let last = (waited.json["history"] as? [[String: Any]])?.last
        #expect(last?["cause"] as? String == "timeout")
        #expect(last?["event"] as? String == "close")
    }

    @Test func fiftyRacingClientsMakeAValidPath() throws {
        let s = try LiveServer(Self.config)
        let start = try #require(try s.call("GET", "/v1/machines/player").json["version"] as? Int)
        let wins = Locked(0)
        let errors = Locked<[String]>([])
        let group = DispatchGroup()
        for _ in 0..<50 {
            group.enter()
            Thread {
                defer { group.leave() }
                let c = s.client()
                for i in 0..<20 {
                    let event = ["prepare", "start", "teardown"][i % 3]
                    guard let r = try? c.request("POST", "/v1/machines/player/events/\(event)") else {
                        errors.withLock { $0.append("transport") }
                        return
                    }
                    switch r.status {
                    case 200: wins.withLock { $0 += 1 }
                    case 409: break
                    default: errors.withLock { $0.append("\(r.status) \(r.text)") }
                    }
                }
            }.start()
        }
        #expect(group.wait(timeout: .now() + 60) == .success)
        #expect(errors.withLock { $0 } == [])
        let final = try s.call("GET", "/v1/machines/player").json
        let version = try #require(final["version"] as? Int)
        #expect(version - start == wins.withLock { $0 })
        let history = try #require(final["history"] as? [[String: Any]])
        #expect(history.count == min(50, version - start))
        let next = ["NotReady": "Ready", "Ready": "Running", "Running": "NotReady"]
        for (i, entry) in history.enumerated() {
            let from = try #require(entry["from"] as? String)
            #expect(entry["to"] as? String == next[from])
            if i > 0 {
                #expect(history[i - 1]["to"] as? String == from)
                #expect(history[i - 1]["version"] as? Int == (entry["version"] as? Int ?? 0) - 1)
            }
        }
        #expect(history.last?["to"] as? String == final["state"] as? String)
    }
}
