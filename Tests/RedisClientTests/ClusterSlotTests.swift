import Testing

@testable import RedisClient

/// Slots as Redis computes them (the expected values are `CLUSTER KEYSLOT`'s on Redis 7.0).
@Suite struct ClusterSlotTests {
    @Test func crc16KnownVectors() {
        #expect(ClusterSlot.crc16(Array("123456789".utf8)) == 0x31C3)
        #expect(ClusterSlot.crc16([UInt8]()) == 0)
        #expect(ClusterSlot.of("123456789") == 0x31C3)
    }

    @Test func slotsOfKeys() {
        let expected: [(String, Int)] = [
            ("somekey", 11058), ("foo{hash_tag}", 2515), ("{user1000}.following", 3443), ("{user1000}.x", 3443),
            ("usher:{queue:a}:meta", 6244), ("usher:resources", 5563), ("", 0),
        ]
        for (key, slot) in expected { #expect(ClusterSlot.of(key) == slot, "\(key)") }
    }

    @Test func hashTags() {
        // An empty tag hashes the whole key; the first `{` and the first `}` after it decide.
        #expect(ClusterSlot.of("{}") == 15257)
        #expect(ClusterSlot.of("foo{}{bar}") == 8363)
        #expect(ClusterSlot.of("foo{{bar}}zap") == 4015)
        #expect(ClusterSlot.of("foo{bar}{zap}") == 5061)
        #expect(ClusterSlot.of("foo{bar}{zap}") == ClusterSlot.of("bar"))
        #expect(ClusterSlot.of("a{b") == ClusterSlot.of(Array("a{b".utf8)))
        #expect(ClusterSlot.of("usher:{queue:a}:wait") == ClusterSlot.of("usher:{queue:a}:meta"))
    }

    @Test func slotMapsAreRead() throws {
        func node(_ host: String, _ port: Int64) -> RedisReply {
            .array([.bulk(Array(host.utf8)), .integer(port), .bulk(Array("id".utf8)), .array([])])
        }
        let reply = RedisReply.array([
            .array([.integer(0), .integer(100), node("", 7000)]),
            .array([.integer(101), .integer(16000), node("10.0.0.2", 7001), node("10.0.0.3", 7002)]),
        ])
        let map = try SlotMap(clusterSlots: reply, askedHost: "10.0.0.1")
        #expect(map.owner(0) == RedisCluster.Address(host: "10.0.0.1", port: 7000))
        #expect(map.owner(100) == RedisCluster.Address(host: "10.0.0.1", port: 7000))
        #expect(map.owner(101) == RedisCluster.Address(host: "10.0.0.2", port: 7001))
        #expect(map.owner(16001) == nil)
        #expect(map.masters.count == 2)
        #expect(throws: RedisError.self) {
            try SlotMap(clusterSlots: .array([.array([.integer(5), .integer(16384), node("h", 1)])]), askedHost: "h")
        }
        #expect(throws: RedisError.self) { try SlotMap(clusterSlots: .status("OK"), askedHost: "h") }
    }

    @Test func redirectionsAreRead() {
        let node = RedisCluster.Address(host: "10.0.0.1", port: 7000)
        #expect(
            Redirect("MOVED 3999 127.0.0.1:6381", from: node)
                == .moved(slot: 3999, to: RedisCluster.Address(host: "127.0.0.1", port: 6381)))
        #expect(Redirect("ASK 3999 :6381", from: node) == .ask(RedisCluster.Address(host: "10.0.0.1", port: 6381)))
        #expect(Redirect("ASK 1 ::1:6381", from: node) == .ask(RedisCluster.Address(host: "::1", port: 6381)))
        #expect(Redirect("TRYAGAIN Multiple keys request during rehashing of slot", from: node) == .tryAgain)
        #expect(Redirect("NOSCRIPT No matching script", from: node) == nil)
        #expect(Redirect("MOVED x y", from: node) == nil)
    }
}
