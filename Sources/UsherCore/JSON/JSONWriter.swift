/// Where a `JSONEncodable` value writes itself: bytes (`JSONWriter`, for
/// responses) or a `JSONValue` tree (`JSONTreeBuilder`, for everything that
/// wants a value). One field list per type serves both.
///
/// Members are written as `key` then one value; containers as begin, values,
/// end. Sinks place the commas.
package protocol JSONSink {
    mutating func beginObject()
    mutating func endObject()
    mutating func beginArray()
    mutating func endArray()
    /// An object member's name; must need no escaping (a literal of ours).
    mutating func key(_ name: StaticString)
    mutating func string(_ value: String)
    mutating func int(_ value: Int)
    mutating func null()
    /// A time as an RFC 3339 string (`Timestamp.rfc3339`).
    mutating func timestamp(_ value: Timestamp)
    mutating func value(_ value: JSONValue)
}

extension JSONSink {
    // Optionals are written as `null` when absent.
    package mutating func string(_ value: String?) { if let value { string(value) } else { null() } }
    package mutating func int(_ value: Int?) { if let value { int(value) } else { null() } }
    package mutating func timestamp(_ value: Timestamp?) { if let value { timestamp(value) } else { null() } }
    package mutating func value(_ value: JSONValue?) { if let value { self.value(value) } else { null() } }

    /// Any encodable value (e.g. an element of an array).
    package mutating func encode(_ value: some JSONEncodable) { value.writeJSON(to: &self) }

    /// An array of encodable values.
    package mutating func array(_ values: [some JSONEncodable]) {
        beginArray()
        for value in values { value.writeJSON(to: &self) }
        endArray()
    }
}

/// A value that writes itself to a `JSONSink`: straight to bytes on the hot
/// path (building a `JSONValue` tree first costs an allocation per member and
/// a second walk), or as a tree through `json()`.
package protocol JSONEncodable {
    func writeJSON<Sink: JSONSink>(to sink: inout Sink)
}

extension JSONEncodable {
    /// Compact JSON text as UTF-8 bytes.
    package var encodedJSON: [UInt8] {
        var writer = JSONWriter()
        writeJSON(to: &writer)
        return writer.finish()
    }

    /// The same value as a tree, members in the order written.
    package func json() -> JSONValue {
        var builder = JSONTreeBuilder()
        writeJSON(to: &builder)
        return builder.result
    }
}

extension JSONValue: JSONEncodable {
    package func writeJSON<Sink: JSONSink>(to sink: inout Sink) { sink.value(self) }
}

/// Writes compact JSON text into a buffer it grows itself, with plain stores
/// (appending to an `Array` byte by byte checks uniqueness and capacity each
/// time). Used only through `encodedJSON`, which calls `finish()`: the one
/// place the buffer is freed. The small writers (`key`, `int`, `null`, object
/// brackets) are inlined into each type's field list: there a member name's
/// length is a constant, and its copy becomes a few stores instead of a call
/// to `memcpy` (callgrind: −1.1k instructions per GET state, −1.2k per
/// enqueue+complete request).
struct JSONWriter: JSONSink {
    private var base: UnsafeMutablePointer<UInt8>
    private var count = 0
    private var capacity: Int
    private var needsComma = false
    /// The second of the last timestamp written, and where its text starts.
    private var lastSecond = Int64.min
    private var lastSecondAt = 0

    init(capacity: Int = 1024) {
        self.capacity = capacity
        base = .allocate(capacity: capacity)
    }

    /// The text written, as an array; frees the buffer (the writer is done).
    mutating func finish() -> [UInt8] {
        let bytes = [UInt8](UnsafeBufferPointer(start: base, count: count))
        base.deallocate()
        capacity = 0
        count = 0
        return bytes
    }

    @inline(__always)
    private mutating func reserve(_ n: Int) {
        if count + n > capacity { grow(n) }
    }

    @inline(never)
    private mutating func grow(_ n: Int) {
        let larger = max(capacity * 2, count + n)
        let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: larger)
        grown.initialize(from: base, count: count)
        base.deallocate()
        base = grown
        capacity = larger
    }

    @inline(__always)
    private mutating func byte(_ b: UInt8) {
        reserve(1)
        base[count] = b
        count += 1
    }

    @inline(__always)
    private mutating func raw(_ source: UnsafeBufferPointer<UInt8>) {
        reserve(source.count)
        if let start = source.baseAddress { (base + count).update(from: start, count: source.count) }
        count += source.count
    }

    @inline(__always)
    private mutating func separate() {
        if needsComma { byte(0x2C) }
        needsComma = false
    }

    @inline(__always)
    mutating func beginObject() {
        separate()
        byte(0x7B)
    }

    @inline(__always)
    mutating func endObject() {
        byte(0x7D)
        needsComma = true
    }

    mutating func beginArray() {
        separate()
        byte(0x5B)
    }

    mutating func endArray() {
        byte(0x5D)
        needsComma = true
    }

    @inline(__always)
    mutating func key(_ name: StaticString) {
        separate()
        reserve(name.utf8CodeUnitCount + 3)
        base[count] = 0x22
        (base + count + 1).update(from: name.utf8Start, count: name.utf8CodeUnitCount)
        count += name.utf8CodeUnitCount + 1
        base[count] = 0x22
        base[count + 1] = 0x3A
        count += 2
    }

    mutating func string(_ value: String) {
        separate()
        needsComma = true
        // Most strings need no escape: check and copy the contiguous bytes.
        var value = value
        let copied = value.withUTF8 { bytes -> Bool in
            for b in bytes where b < 0x20 || b == 0x22 || b == 0x5C { return false }
            byte(0x22)
            raw(bytes)
            byte(0x22)
            return true
        }
        if copied { return }
        var escaped: [UInt8] = []
        JSONValue.writeString(value, to: &escaped)
        escaped.withUnsafeBufferPointer { raw($0) }
    }

    @inline(__always)
    mutating func int(_ value: Int) {
        separate()
        needsComma = true
        reserve(20)
        if value < 0 {
            base[count] = 0x2D
            count += 1
        }
        var magnitude = value.magnitude
        var digits = 1
        var rest = magnitude
        while rest >= 10 {
            rest /= 10
            digits += 1
        }
        var i = count + digits - 1
        repeat {
            base[i] = 0x30 + UInt8(truncatingIfNeeded: magnitude % 10)
            magnitude /= 10
            i -= 1
        } while magnitude > 0
        count += digits
    }

    @inline(__always)
    mutating func null() {
        separate()
        reserve(4)
        base[count] = 0x6E
        base[count + 1] = 0x75
        base[count + 2] = 0x6C
        base[count + 3] = 0x6C
        count += 4
        needsComma = true
    }

    mutating func timestamp(_ value: Timestamp) {
        separate()
        reserve(26)
        base[count] = 0x22
        let (second, millis) = value.secondAndMillis
        if second == lastSecond {
            // Same second as the last time written (a visitor's enqueued_at
            // and granted_at, usually): copy its date and time, write the millis.
            for i in 0..<20 { base[count + 1 + i] = base[lastSecondAt + i] }
            base[count + 21] = 0x30 + UInt8(truncatingIfNeeded: millis / 100)
            base[count + 22] = 0x30 + UInt8(truncatingIfNeeded: millis / 10 % 10)
            base[count + 23] = 0x30 + UInt8(truncatingIfNeeded: millis % 10)
            base[count + 24] = 0x5A
        } else {
            value.writeRFC3339(into: UnsafeMutableRawBufferPointer(start: base + count + 1, count: 24))
            lastSecond = second
            lastSecondAt = count + 1
        }
        base[count + 25] = 0x22
        count += 26
        needsComma = true
    }

    /// Recurses once per level: every value the server holds is at most
    /// `max_json_depth` deep (`JSONLimits`), plus the response's own few levels.
    mutating func value(_ value: JSONValue) {
        switch value {
        case .null: null()
        case .bool(let b): literal(b ? Self.trueText : Self.falseText)
        case .int(let i): int(i)
        case .double(let d):
            if d.isFinite { literal(d.description) } else { null() }
        case .string(let s): string(s)
        case .array(let elements):
            beginArray()
            for element in elements { self.value(element) }
            endArray()
        case .object(let members):
            beginObject()
            for (name, member) in members {
                string(name)
                byte(0x3A)
                needsComma = false
                self.value(member)
            }
            endObject()
        }
    }

    private static let trueText = "true"
    private static let falseText = "false"

    /// A bare token (`true`, a number's digits).
    private mutating func literal(_ text: String) {
        separate()
        var text = text
        text.withUTF8 { raw($0) }
        needsComma = true
    }
}

/// Builds a `JSONValue` from what is written to it.
package struct JSONTreeBuilder: JSONSink {
    /// An open container and the member name it will have in its parent.
    private enum Container {
        case object([(String, JSONValue)], key: String?)
        case array([JSONValue], key: String?)
    }

    private var stack: [Container] = []
    private var pendingKey: String?
    private var finished: JSONValue?

    package init() {}

    /// The value written (null when nothing was).
    package var result: JSONValue { finished ?? .null }

    private mutating func add(_ value: JSONValue) {
        guard let top = stack.popLast() else {
            finished = value
            return
        }
        switch top {
        case .object(var members, let key):
            members.append((pendingKey ?? "", value))
            stack.append(.object(members, key: key))
        case .array(var elements, let key):
            elements.append(value)
            stack.append(.array(elements, key: key))
        }
        pendingKey = nil
    }

    package mutating func beginObject() {
        stack.append(.object([], key: pendingKey))
        pendingKey = nil
    }

    package mutating func beginArray() {
        stack.append(.array([], key: pendingKey))
        pendingKey = nil
    }

    package mutating func endObject() {
        guard case .object(let members, let key)? = stack.popLast() else {
            preconditionFailure("endObject without beginObject")
        }
        pendingKey = key
        add(.object(members))
    }

    package mutating func endArray() {
        guard case .array(let elements, let key)? = stack.popLast() else {
            preconditionFailure("endArray without beginArray")
        }
        pendingKey = key
        add(.array(elements))
    }

    package mutating func key(_ name: StaticString) { pendingKey = name.description }
    package mutating func string(_ value: String) { add(.string(value)) }
    package mutating func int(_ value: Int) { add(.int(value)) }
    package mutating func null() { add(.null) }
    package mutating func timestamp(_ value: Timestamp) { add(.string(value.rfc3339)) }
    package mutating func value(_ value: JSONValue) { add(value) }
}
