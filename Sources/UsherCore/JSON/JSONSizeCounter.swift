/// A `JSONSink` that writes nothing and counts the bytes `JSONWriter` would
/// write: the exact size of an answer's element, without building it (a
/// page is cut at `max_response_bytes` before it is encoded once).
package struct JSONSizeCounter: JSONSink {
    /// The bytes counted so far.
    package private(set) var count = 0
    private var needsComma = false

    package init() {}

    /// The encoded size of `value`.
    package static func size(of value: some JSONEncodable) -> Int {
        var counter = JSONSizeCounter()
        value.writeJSON(to: &counter)
        return counter.count
    }

    /// The encoded size of a JSON value.
    package static func size(of value: JSONValue) -> Int {
        var counter = JSONSizeCounter()
        counter.value(value)
        return counter.count
    }

    private mutating func separate() {
        if needsComma { count += 1 }
        needsComma = false
    }

    package mutating func beginObject() {
        separate()
        count += 1
    }

    package mutating func endObject() {
        count += 1
        needsComma = true
    }

    package mutating func beginArray() {
        separate()
        count += 1
    }

    package mutating func endArray() {
        count += 1
        needsComma = true
    }

    package mutating func key(_ name: StaticString) {
        separate()
        count += name.utf8CodeUnitCount + 3
    }

    package mutating func string(_ value: String) {
        separate()
        needsComma = true
        count += Self.quotedLength(value)
    }

    package mutating func int(_ value: Int) {
        separate()
        needsComma = true
        var digits = value < 0 ? 2 : 1
        var rest = value.magnitude
        while rest >= 10 {
            rest /= 10
            digits += 1
        }
        count += digits
    }

    package mutating func null() {
        separate()
        needsComma = true
        count += 4
    }

    package mutating func timestamp(_ value: Timestamp) {
        separate()
        needsComma = true
        count += 26
    }

    package mutating func value(_ value: JSONValue) {
        switch value {
        case .null: null()
        case .bool(let b):
            separate()
            needsComma = true
            count += b ? 4 : 5
        case .int(let i): int(i)
        case .double(let d):
            if d.isFinite {
                separate()
                needsComma = true
                count += d.description.utf8.count
            } else {
                null()
            }
        case .string(let s): string(s)
        case .array(let elements):
            beginArray()
            for element in elements { self.value(element) }
            endArray()
        case .object(let members):
            beginObject()
            for (name, member) in members {
                string(name)
                count += 1
                needsComma = false
                self.value(member)
            }
            endObject()
        }
    }

    /// A string's length with its quotes and escapes, as `JSONValue.writeString` writes it.
    static func quotedLength(_ s: String) -> Int {
        var n = 2
        for b in s.utf8 {
            switch b {
            case 0x22, 0x5C, 0x0A, 0x0D, 0x09: n += 2
            case 0..<0x20: n += 6
            default: n += 1
            }
        }
        return n
    }
}
