import Foundation
import Testing

@testable import UsherCore

/// Every finite double, written as clients write it, parses to that same double.
@Suite struct ExactDoublesTests {
    /// Finite doubles from seeded random bit patterns: every sign and
    /// exponent, subnormals (rare in random patterns, so added), and the edges.
    static func doubles(_ count: Int, seed: UInt64) -> [Double] {
        var generator = SeededGenerator(seed: seed)
        var found: [Double] = [
            0, -0.0, 0.30000000000000004, 1.0000000000000002, .leastNonzeroMagnitude, -.leastNonzeroMagnitude,
            .leastNormalMagnitude, .leastNormalMagnitude.nextDown, .greatestFiniteMagnitude,
            -.greatestFiniteMagnitude, 1e300, 123_456_789.123_456_79, 9_007_199_254_740_994,
        ]
        for _ in 0..<count / 10 { found.append(Double(bitPattern: generator.next() & 0x800F_FFFF_FFFF_FFFF)) }
        while found.count < count {
            let double = Double(bitPattern: generator.next())
            if double.isFinite { found.append(double) }
        }
        return found
    }

    /// The doubles a parsed array of numbers holds.
    static func parsedDoubles(_ text: String) throws -> [Double] {
        guard case .array(let elements) = try JSONValue.parse(text) else { return [] }
        return elements.map { element in
            switch element {
            case .double(let d): d
            case .int(let i): Double(i)
            default: .nan
            }
        }
    }

    static func same(_ a: [Double], _ b: [Double]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { $0.bitPattern == $1.bitPattern }
    }

    /// The shortest form (`description`, as JavaScript, Python and Go write doubles).
    @Test func shortestFormsParseToTheSameDouble() throws {
        let sent = Self.doubles(3000, seed: 25)
        let parsed = try Self.parsedDoubles("[" + sent.map { "\($0)" }.joined(separator: ",") + "]")
        let changed = zip(sent, parsed).filter { $0.bitPattern != $1.bitPattern }
        #expect(changed.isEmpty, "\(changed.count) changed, e.g. \(changed.prefix(3))")
    }

    /// C's `%.17g`, and a double's exact value in full.
    @Test func seventeenDigitsAndTheExactValueParseToTheSameDouble() throws {
        let sent = Self.doubles(2000, seed: 2025)
        let seventeen = sent.map { String(format: "%.17g", $0) }
        #expect(Self.same(sent, try Self.parsedDoubles("[" + seventeen.joined(separator: ",") + "]")))
        let exact = sent.prefix(50).map { String(format: "%.766e", $0) }
        #expect(Self.same(Array(sent.prefix(50)), try Self.parsedDoubles("[" + exact.joined(separator: ",") + "]")))
        #expect(try JSONValue.parse("4.9406564584124654e-324") == .double(.leastNonzeroMagnitude))
    }

    /// Foundation's encoder writes what the parser reads back: the stores keep payloads so.
    @Test func encodedDoublesParseBack() throws {
        let sent = Self.doubles(2000, seed: 7)
        let text = String(decoding: try JSONEncoder().encode(sent), as: UTF8.self)
        #expect(Self.same(sent, try Self.parsedDoubles(text)))
        #expect(try JSONValue.parse("-0").isNegativeZero)
        guard case .array(let elements)? = try JSONValue.parse(#"{"a": [1, -0]}"#)["a"] else {
            Issue.record("no array")
            return
        }
        #expect(elements.last?.isNegativeZero == true)
    }

    /// Numbers in objects and nested arrays are read from their text too.
    @Test func membersAndNestedElementsAreRead() throws {
        let sent = Self.doubles(500, seed: 11)
        let members = sent.enumerated().map { #""m\#($0.offset)": [\#($0.element), {"x": \#($0.element)}]"# }
        let parsed = try JSONValue.parse("{" + members.joined(separator: ",") + "}")
        let changed = sent.enumerated().filter { i, double in
            guard case .array(let got)? = parsed["m\(i)"], case .double(let a)? = got.first,
                case .double(let b)? = got.last?["x"]
            else { return true }
            return a.bitPattern != double.bitPattern || b.bitPattern != double.bitPattern
        }
        #expect(changed.isEmpty, "\(changed.count) of \(sent.count) changed, e.g. \(changed.prefix(3))")
    }

    /// A text that no double spells to its digits is refused, not rounded.
    @Test func textsNoDoubleSpellsAreRefused() {
        for changed in [
            "0.30000000000000001", "4e-324", "1e-400", "2.4703282292062327e-324", "0.29999999999999998",
            "1.00000000000000000001e300", "18446744073709551617", "1e400",
        ] {
            #expect(!ExactNumbers.isKept(changed), "\(changed)")
        }
        for kept in ["0.29999999999999999", "0.3", "3e-1", "5e-324", "0.1000000000000000055511151231257827", "-0"] {
            #expect(ExactNumbers.isKept(kept), "\(kept)")
        }
    }
}

extension JSONValue {
    fileprivate var isNegativeZero: Bool {
        if case .double(let d) = self { d == 0 && d.sign == .minus } else { false }
    }
}
