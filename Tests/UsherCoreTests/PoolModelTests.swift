import Testing

@testable import UsherCore

/// Seeded random sequences of every pool operation, with the clock moving:
/// after each step, no element is under two leases, and the pool and its
/// engine agree (`checkInvariants`).
@Suite struct PoolModelTests {
    struct Rng: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    @Test(arguments: [1, 2, 3, 4, 5, 6] as [UInt64])
    func randomOperationsKeepThePoolConsistent(_ seed: UInt64) throws {
        var rng = Rng(state: seed)
        let clock = ManualClock()
        let p = LeasePool(
            name: "m",
            config: PoolConfig(elements: PoolFixtures.elements(3), leaseSeconds: 10, grow: PoolGrow(maxSize: 6)),
            clock: clock)
        var leases: [String] = []
        var active: [String: String] = [:]  // element → lease, as the clients saw it
        for step in 0..<600 {
            switch Int.random(in: 0..<10, using: &rng) {
            case 0, 1, 2:
                if let l = try? p.fetchNow(FetchRequest(leaseSeconds: Double.random(in: 1...10, using: &rng))) {
                    leases.append(l.id)
                    let e = try #require(l.element)
                    if let other = active[e],
                        (try? p.withIsolation { p throws(PoolError) in try p.lease(id: other) })?.status == .active
                    {
                        Issue.record("step \(step): \(e) leased to \(other) and \(l.id)")
                    }
                    active[e] = l.id
                }
            case 3, 4:
                if let id = leases.randomElement(using: &rng) { _ = try? p.recycleNow(lease: id) }
            case 5:
                _ = try? p.recycleNow(element: "e\(Int.random(in: 0..<4, using: &rng))")
            case 6:
                if let id = leases.randomElement(using: &rng) {
                    _ = try? p.withIsolation { p throws(PoolError) in try p.extend(lease: id, leaseSeconds: 5) }
                }
            case 7:
                let id = ["e0", "e1", "e2", "x", "el-1"].randomElement(using: &rng)!
                if Bool.random(using: &rng) {
                    _ = try? p.withIsolation { p throws(PoolError) in
                        try p.removeElement(id, force: Bool.random(using: &rng))
                    }
                } else {
                    _ = try? p.withIsolation { p throws(PoolError) in try p.putElement(id, data: .int(step)) }
                }
            default:
                clock.advance(by: Double.random(in: 0...4, using: &rng))
            }
            try p.checkInvariants()
        }
        #expect(try p.stateNow().counts.fetchedTotal > 50)
    }
}
