import Testing

@testable import RedisClient

@Suite struct RedisSettingsTests {
    @Test func parsesURLs() throws {
        #expect(try RedisEndpoint(url: "redis://localhost") == RedisEndpoint(host: "localhost"))
        #expect(
            try RedisEndpoint(url: "redis://alice:s%40cret@10.0.0.5:6380/2")
                == RedisEndpoint(host: "10.0.0.5", port: 6380, database: 2, user: "alice", password: "s@cret"))
        #expect(
            try RedisEndpoint(url: "redis://:pw@[::1]:7000/")
                == RedisEndpoint(host: "::1", port: 7000, database: 0, user: nil, password: "pw"))
    }

    @Test func refusesBadURLs() {
        for url in ["http://x", "redis://", "redis://h:0", "redis://h:port", "redis://h/db", "redis://pw@h"] {
            #expect(throws: RedisError.self, "\(url)") { try RedisEndpoint(url: url) }
        }
        #expect {
            try RedisEndpoint(url: "rediss://h:6379")
        } throws: {
            String(describing: $0).contains("TLS")
        }
    }

    @Test func passwordOverridesTheURLs() throws {
        var settings = RedisSettings(url: "redis://u:old@h")
        settings.password = "new"
        #expect(try settings.endpoint().password == "new")
        #expect(try settings.endpoint().user == "u")
    }

    @Test func sha1MatchesKnownDigests() {
        #expect(SHA1.hex([]) == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
        #expect(SHA1.hex(Array("abc".utf8)) == "a9993e364706816aba3e25717850c26c9cd0d89d")
        let long = Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)
        #expect(SHA1.hex(long) == "84983e441c3bd26ebaae4aa1f95129e5e54670f1")
    }

    @Test func backoffDoublesToTwoSeconds() {
        var backoff = RedisBackoff()
        let delays = (0..<8).map { _ in backoff.next() }
        #expect(delays.prefix(3) == [.milliseconds(50), .milliseconds(100), .milliseconds(200)])
        #expect(delays.last == .seconds(2))
        backoff.reset()
        #expect(backoff.next() == .milliseconds(50))
    }
}
