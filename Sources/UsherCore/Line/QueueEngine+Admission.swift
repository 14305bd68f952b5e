// Admission: what a request may ask for, and how a visitor gets its slot and id.

extension QueueEngine {
    static func micros(_ seconds: Double) -> Int64 {
        seconds > 0 ? max(1, Timestamp.micros(fromSeconds: seconds)) : 0
    }

    func handle(_ id: String) throws(QueueError) -> Int32 {
        guard let h = ids[id] else { throw .notFound("visitor \"\(id)\"") }
        return h
    }

    /// Checks what `VisitorRequest.parse` checks (for callers that build requests
    /// in code) and whether the hold suits this queue.
    func check(_ r: VisitorRequest) throws(QueueError) {
        if let id = r.id, !Names.isValid(id) {
            throw .invalid(field: "id", message: "must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
        }
        if let key = r.key, !Names.isValidKey(key) {
            throw .invalid(field: "key", message: "must be 1 to 256 characters")
        }
        if let a = r.action, !Names.isValidKey(a) {
            throw .invalid(field: "action", message: "must be 1 to 256 characters")
        }
        guard QueueConfig.Limits.priority.contains(r.priority) else {
            throw .invalid(field: "priority", message: "must be between -1000000 and 1000000")
        }
        if let d = r.delaySeconds, !Durations.isAllowed(d) {
            throw .invalid(field: "delay_seconds", message: Durations.range())
        }
        try checkHold(r.holdSeconds)
    }

    /// A client may ask for a shorter hold than the queue's, never a longer
    /// one, and for 0 (no limit) only when the queue has no limit; under
    /// `.ownOverrides` any hold in range is allowed.
    func checkHold(_ seconds: Double?) throws(QueueError) {
        guard let s = seconds else { return }
        guard Durations.isAllowed(s) else {
            throw .invalid(field: "hold_seconds", message: Durations.range())
        }
        guard holdPolicy == .atMostResource,
            let problem = HoldPolicy.excess(
                s, limit: config.holdSeconds, resource: "queue", holds: "holds", field: "hold_seconds")
        else { return }
        throw .invalid(field: "hold_seconds", message: problem)
    }

    /// 429 with a Retry-After of about one slot's turnover: mean hold ÷ capacity.
    func full() -> QueueError {
        let hold = holds.mean ?? Double(holdMicros)
        let seconds = (hold / 1_000_000 / Double(max(1, config.capacity))).rounded(.up)
        return .full(retryAfterSeconds: Int(min(3600, max(1, seconds))))
    }

    /// Stores a new record, charged to the budget (first priced with the
    /// client's id, then corrected for a server-made one), or throws
    /// `storageFull` having changed nothing.
    mutating func create(_ r: VisitorRequest, status: VisitorStatus, now: Timestamp) throws(QueueError) -> Int32 {
        let priced = StorageBudget.cost(r.id, r.key, r.action, payload: r.payload)
        do throws(StorageFull) { try storage.reserve(priced) } catch { throw .storageFull(error) }
        let h = vacant.popLast() ?? Int32(records.count)
        let id: String
        if let given = r.id {
            id = given
            ids[id] = h
        } else {
            id = assignServerID(h)
        }
        var rec = VisitorRecord(id: id, enqueuedAt: now.micros, status: status)
        rec.key = r.key
        rec.action = r.action
        rec.payload = r.payload
        rec.priority = Int32(r.priority)
        rec.hold = r.holdSeconds.map(Self.micros) ?? -1
        if Int(h) == records.count {
            records.append(rec)
        } else {
            records[Int(h)] = rec
        }
        counts.enqueuedTotal += 1
        if r.id == nil { storage.charge(id.utf8.count) }
        return h
    }

    /// What record `h` is charged: its id, key, action and payload.
    func storedBytes(_ h: Int32) -> Int {
        let r = records[Int(h)]
        return StorageBudget.cost(r.id, r.key, r.action, payload: r.payload)
    }

    /// Indexes `h` under the next free `idPrefix` + base-36 counter, skipping ids a
    /// client already took (one hash lookup when the id is free).
    mutating func assignServerID(_ h: Int32) -> String {
        while true {
            serverIDs += 1
            let id = Self.serverID(prefix: idPrefix, counter: serverIDs)
            guard let taken = ids.updateValue(h, forKey: id) else { return id }
            ids[id] = taken
        }
    }

    /// `prefix` + `counter` in base 36 (lower case), written in place:
    /// `String(_:radix:)` and a concatenation cost ~1,500 instructions a visitor.
    static func serverID(prefix: String, counter: UInt64) -> String {
        var prefix = prefix
        return prefix.withUTF8 { head in
            var digits = 1
            var rest = counter / 36
            while rest > 0 {
                rest /= 36
                digits += 1
            }
            return String(unsafeUninitializedCapacity: head.count + digits) { buffer in
                _ = buffer.initialize(from: head)
                var value = counter
                var i = head.count + digits - 1
                repeat {
                    let digit = UInt8(truncatingIfNeeded: value % 36)
                    buffer[i] = digit < 10 ? 0x30 + digit : 0x61 + digit - 10
                    value /= 36
                    i -= 1
                } while value > 0
                return head.count + digits
            }
        }
    }

    mutating func configChanged() {
        holdMicros = Self.micros(config.holdSeconds)
        oppositesOf = [:]
        for pair in config.opposites where pair.count == 2 {
            oppositesOf[pair[0], default: []].append(pair[1])
            oppositesOf[pair[1], default: []].append(pair[0])
        }
    }
}
