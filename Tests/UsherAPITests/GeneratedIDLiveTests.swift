import Foundation
import HTTPTestClient
import Testing

@testable import UsherAPI

/// Server-made ids: one scheme for every kind (docs/api.md, "Generated ids").
@Suite struct GeneratedIDLiveTests {
    static func isGenerated(_ id: String?) -> Bool {
        guard let id else { return false }
        return id.utf8.count == 16 && id.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    @Test func everyKindMakesTimeOrderedIDsThatWorkInURLs() throws {
        let s = try AppTester(
            #"""
            {"queues": {"q": {"capacity": 1}}, "windows": {"w": {}},
             "pools": {"p": {"elements": ["e0", "e1"]}}, "pipelines": {"f": {}}}
            """#)
        let visitors = try (0..<3).map { _ in try s.call("POST", "/v1/queues/q/visitors", "{}").json["id"] as? String }
        #expect(visitors.allSatisfy(Self.isGenerated))
        #expect(visitors == visitors.sorted { $0! < $1! } && Set(visitors).count == 3)
        let v = try #require(visitors.last ?? nil)
        #expect(try s.call("GET", "/v1/queues/q/visitors/\(v)").json["status"] as? String == "waiting")

        let item = try s.call("POST", "/v1/windows/w/show", #"{"title": "t"}"#).json["id"] as? String
        #expect(Self.isGenerated(item))
        let dismissed = try s.call("POST", "/v1/windows/w/dismiss", #"{"id": "\#(item ?? "")"}"#)
        #expect(dismissed.json["id"] as? String == item)

        let lease = try s.call("POST", "/v1/pools/p/fetch", "{}").json["id"] as? String
        #expect(Self.isGenerated(lease))
        #expect(try s.call("POST", "/v1/pools/p/leases/\(lease ?? "")/extend", "{}").status == 200)

        let pushed = try s.call("POST", "/v1/pipelines/f/items", #"{"payload": 1}"#).json["id"] as? String
        #expect(Self.isGenerated(pushed))
        #expect(try s.call("GET", "/v1/pipelines/f/items/\(pushed ?? "")").status == 200)
    }

    @Test func aQueueDeletedAndCreatedAgainNeverRepeatsAnID() throws {
        let s = try AppTester()
        var seen: [String] = []
        for _ in 0..<3 {
            #expect(try s.call("PUT", "/v1/queues/again", #"{"capacity": 0}"#).status == 201)
            for _ in 0..<5 {
                let id = try s.call("POST", "/v1/queues/again/visitors", "{}").json["id"] as? String
                #expect(Self.isGenerated(id))
                seen.append(id ?? "")
            }
            #expect(try s.call("DELETE", "/v1/queues/again").status == 204)
        }
        #expect(Set(seen).count == seen.count && seen == seen.sorted())
    }
}
