import Testing

@testable import UsherCore

@Suite struct SegmentedArrayTests {
    @Test func appendsReadsAndWritesAcrossSegments() {
        var a = SegmentedArray<Int>()
        #expect(a.count == 0)
        let n = 3 * 4096 + 17  // several segments, the last partly filled
        for i in 0..<n { a.append(i * 2) }
        #expect(a.count == n)
        #expect(a[0] == 0)
        #expect(a[4095] == 8190)
        #expect(a[4096] == 8192)
        #expect(a[n - 1] == (n - 1) * 2)
        a[4096] = -1
        a[n - 1] += 1
        #expect(a[4096] == -1)
        #expect(a[4095] == 8190)
        #expect(a[n - 1] == (n - 1) * 2 + 1)
    }

    @Test func copiesAreIndependent() {
        var a = SegmentedArray<String>()
        for i in 0..<5000 { a.append("s\(i)") }
        let b = a
        a[4999] = "changed"
        a[0].append("!")
        #expect(b[4999] == "s4999")
        #expect(b[0] == "s0")
        #expect(a[4999] == "changed")
        #expect(a[0] == "s0!")
    }
}

@Suite struct ShardedDictionaryTests {
    @Test func behavesLikeADictionary() {
        var d = ShardedDictionary<Int32>()
        var reference: [String: Int32] = [:]
        var generator = SystemRandomNumberGenerator()
        for step in 0..<20_000 {
            let key = "k\(Int.random(in: 0..<3000, using: &generator))"
            switch Int.random(in: 0..<4, using: &generator) {
            case 0:
                #expect(d.updateValue(Int32(step), forKey: key) == reference.updateValue(Int32(step), forKey: key))
            case 1:
                #expect(d.removeValue(forKey: key) == reference.removeValue(forKey: key))
            case 2:
                d[key] = Int32(step)
                reference[key] = Int32(step)
            default:
                d[key] = nil
                reference[key] = nil
            }
            #expect(d[key] == reference[key])
            #expect(d.count == reference.count)
        }
        for (key, value) in reference { #expect(d[key] == value) }
    }

    @Test func acceptsAnyString() {
        var d = ShardedDictionary<Int>()
        let keys = ["", "a", "é", "🙂 emoji", String(repeating: "long key ", count: 40), "v1", "V1"]
        for (i, key) in keys.enumerated() { d[key] = i }
        #expect(d.count == keys.count)
        for (i, key) in keys.enumerated() { #expect(d[key] == i) }
        #expect(d["missing"] == nil)
    }
}
