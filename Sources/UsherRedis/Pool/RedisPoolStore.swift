import Foundation
import Locking
import RedisClient
import UsherCore

/// One pool kept in Redis: every `LeasePool` operation as one call of
/// `pool.lua`, on the line of `line.lua`, with the same semantics. The
/// storage budget (`max_stored_bytes`) does not apply: Redis's `maxmemory` bounds it.
package struct RedisPoolStore: Sendable {
    static let script = ResourceScript(kindSources: PackageResources.line_lua, PackageResources.pool_lua)
    /// The parts of a pool's keys, in the order `pool.lua` reads `KEYS`: the line's, then the elements'.
    static let parts = RedisQueueStore.parts + ["el", "order", "free", "elements"]

    let keys: ResourceKeys
    let connections: RedisConnectionPool
    let time: ScriptTime
    let channel: String
    let onDeadline: @Sendable (Timestamp?) -> Void
    /// Hears that a script found the resource's keys missing.
    let onMissing: @Sendable () -> Void
    let keyList: [String]
    /// The declared elements, decoded once: every state and config answer carries them.
    let declared = DeclaredElements()

    package init(
        keys: ResourceKeys, connections: RedisConnectionPool, time: ScriptTime, channel: String,
        onDeadline: @escaping @Sendable (Timestamp?) -> Void,
        onMissing: @escaping @Sendable () -> Void = {}
    ) {
        self.keys = keys
        self.connections = connections
        self.time = time
        self.channel = channel
        self.onDeadline = onDeadline
        self.onMissing = onMissing
        self.keyList = Self.parts.map(keys.key)
    }

    // MARK: - Resource

    /// Creates the pool with its declared elements, all free, or answers the
    /// existing one's config with `created == false`.
    package func create(_ config: PoolConfig) async throws(PoolError) -> (config: PoolConfig, created: Bool) {
        var arguments = [String(config.maxWaiting)] + Self.leaseArguments(config.leaseSeconds)
        arguments += [config.grow.map { String($0.maxSize) } ?? "", config.grow?.prefix ?? ""]
        arguments.append(Self.elementsText(config.elements))
        arguments += RedisQueueStore.secondsArguments(config.idleSeconds)
        arguments += RedisQueueStore.secondsArguments(config.claimSeconds)
        for e in config.elements { arguments += [e.id, e.data.map(RedisQueueStore.jsonText) ?? ""] }
        let reply = try await run("create", arguments)
        return (try Self.config(reply.dropFirst(), declared: declared), reply.first?.string == "1")
    }

    /// Removes every key of the pool; true when it existed.
    package func delete() async throws(PoolError) -> Bool {
        try await run("delete", []).first?.string == "1"
    }

    package func config() async throws(PoolError) -> PoolConfig {
        try Self.config(try await run("config", [])[...], declared: declared)
    }

    /// `PATCH`: the config after the change (the notice carries what changed).
    package func apply(_ patch: PoolPatch) async throws(PoolError) -> PoolConfig {
        var arguments = [patch.maxWaiting.map { String($0) } ?? ""]
        arguments += patch.leaseSeconds.map(Self.leaseArguments) ?? ["", ""]
        if let grow = patch.grow {
            arguments += ["1", String(grow.maxSize), grow.prefix]
        } else {
            arguments += ["0", "", ""]
        }
        arguments += RedisQueueStore.secondsArguments(patch.idleSeconds)
        arguments += RedisQueueStore.secondsArguments(patch.claimSeconds)
        return try Self.config(try await run("patch", arguments)[...], declared: declared)
    }

    /// Elements, free and leased elements, fetchers waiting (the list route's
    /// summary), and when the fetcher waiting longest started waiting.
    package func counts() async throws(PoolError) -> (
        size: Int, available: Int, leased: Int, waiting: Int, oldestWaitingSince: Timestamp?
    ) {
        let reply = try await run("counts", [])
        let n = reply.map { $0.int.map(Int.init) }
        guard n.count == 5, let size = n[0], let available = n[1], let leased = n[2], let waiting = n[3] else {
            throw .backendUnavailable("unexpected counts reply")
        }
        return (size, available, leased, waiting, reply[4].int.map(Timestamp.init(micros:)))
    }

    /// Applies what is due (any instance may run it at a deadline it knows).
    package func tick() async throws(PoolError) {
        _ = try await run("tick", [])
    }

    // MARK: - Leases

    /// `LeasePool.fetch`: a free element, or `exhausted`. With `waiting`, a
    /// fetch that finds none is answered `waiting` in the line (the caller
    /// parks on it and `withdraw`s it when its wait ends, at `heardUntil`:
    /// its client counts as heard of until then; nil, now).
    package func fetch(_ r: FetchRequest, waiting: Bool = false, heardUntil: Timestamp? = nil) async throws(PoolError)
        -> Lease
    {
        if let problem = LeasePool.leaseProblem(r.leaseSeconds, limit: 0) { throw problem }
        var arguments = [r.id ?? "", r.holder ?? ""]
        arguments += r.leaseSeconds.map(Self.leaseArguments).map { [$0[1], $0[0]] } ?? ["-1", ""]
        arguments += [waiting ? "1" : "0", heardUntil.map { String($0.micros) } ?? ""]
        return try lease(try await run("fetch", arguments, lease: r.leaseSeconds).first)
    }

    /// A waiting fetch whose wait ended leaves the line as if it had never
    /// come (`exhausted`, as when it is not there); one that was given an
    /// element by now keeps it.
    package func withdraw(id: String) async throws(PoolError) -> Lease {
        try lease(try await run("withdraw", [id], lease: nil, leaseID: id).first)
    }

    package func recycle(lease id: String) async throws(PoolError) -> Lease {
        try lease(try await run("recycle", [id], leaseID: id).first)
    }

    /// Recycles the element's lease: `not_leased` when it is free.
    package func recycle(element id: String) async throws(PoolError) -> Lease {
        try lease(try await run("recycle_element", [id]).first)
    }

    /// See `LeasePool.recycleUndelivered`: nil, changing nothing, when the
    /// lease no longer holds grant `fence`.
    package func recycleUndelivered(lease id: String, fence: Int64) async throws(PoolError) -> Lease? {
        let reply = try await run("undelivered", [id, String(fence)], leaseID: id)
        return reply.isEmpty ? nil : try lease(reply.first)
    }

    package func extend(lease id: String, leaseSeconds: Double?) async throws(PoolError) -> Lease {
        if let problem = LeasePool.leaseProblem(leaseSeconds, limit: 0) { throw problem }
        let arguments = [id] + (leaseSeconds.map(Self.leaseArguments).map { [$0[1], $0[0]] } ?? ["", ""])
        return try lease(try await run("extend", arguments, lease: leaseSeconds, leaseID: id).first)
    }

    /// One lease, live or remembered; a call naming it. `heardUntil`: a
    /// long-poll parked on it until then (its client counts as heard of meanwhile).
    package func lease(id: String, heardUntil: Timestamp? = nil) async throws(PoolError) -> Lease {
        try lease(try await run("lease", [id, heardUntil.map { String($0.micros) } ?? ""], leaseID: id).first)
    }

    // MARK: - State and elements

    /// `LeasePool.state`: the same pages, cursors and `more`.
    package func state(limit: Int, after cursor: Int64? = nil) async throws(PoolError) -> PoolState {
        let limit = min(max(0, limit), 1_000_000_000)
        let reply = try await run("state", [String(limit), cursor.map { String($0) } ?? ""])
        let header = 15
        let configEnd = header + 7
        guard reply.count >= configEnd, let elementCount = reply[1].int, let waitingCount = reply[2].int,
            reply.count == configEnd + Int(elementCount + waitingCount)
        else { throw .backendUnavailable("unexpected state reply") }
        let n = reply[3..<header].map { $0.int.map(Int.init) }
        guard n[0...3].allSatisfy({ $0 != nil }), n[5...].allSatisfy({ $0 != nil }) else {
            throw .backendUnavailable("unexpected state reply")
        }
        var elements: [(element: PoolElement, order: Int64)] = []
        for item in reply[configEnd..<(configEnd + Int(elementCount))] {
            guard case .bulk(let bytes) = item, let e = Self.element(bytes) else {
                throw .backendUnavailable("unexpected element")
            }
            elements.append(e)
        }
        var waiting: [Lease] = []
        for item in reply[(configEnd + Int(elementCount))...] { waiting.append(try lease(item)) }
        var state = PoolState(
            name: keys.name, config: try Self.config(reply[header..<configEnd], declared: declared), size: n[0]!,
            available: n[1]!,
            leased: n[2]!, waiting: n[3]!, nextExpiryAt: reply[7].int.map(Timestamp.init(micros:)),
            elements: elements.map(\.element),
            counts: PoolCounts(
                fetched: n[5]!, recycled: n[6]!, expired: n[7]!, revoked: n[8]!, grown: n[9]!, abandoned: n[10]!,
                unclaimed: n[11]!))
        state.waitingLeases = waiting
        state.cursors = elements.map { "e\($0.order)" }
        state.more = reply[0].string == "1"
        return state
    }

    /// `PUT …/elements/{id}`: a new element (created), or new data for one.
    package func putElement(_ id: String, data: JSONValue?) async throws(PoolError) -> (
        element: PoolElement, created: Bool
    ) {
        let reply = try await run("put_element", [id, data.map(RedisQueueStore.jsonText) ?? ""])
        guard reply.count == 2, case .bulk(let bytes) = reply[0], let e = Self.element(bytes) else {
            throw .backendUnavailable("unexpected element")
        }
        return (e.element, reply[1].string == "1")
    }

    /// `DELETE …/elements/{id}[?force=true]`.
    package func removeElement(_ id: String, force: Bool) async throws(PoolError) -> ElementRemoval {
        let reply: [RedisReply]
        do {
            reply = try await run("remove_element", [id, force ? "1" : "0"])
        } catch .elementLeased(_, let lease) {
            throw .elementLeased(element: id, lease: lease)
        }
        guard reply.count == 2, case .bulk(let bytes) = reply[0], let e = Self.element(bytes) else {
            throw .backendUnavailable("unexpected element")
        }
        let ended: Lease? = reply[1].string == "" ? nil : try lease(reply[1])
        return ElementRemoval(element: e.element, endedLease: ended)
    }

    // MARK: - Calls

    /// Runs `operation`; reports the next deadline; maps refusals to
    /// `PoolError`. `lease` is the lease asked for (for the message of a too
    /// long one); `leaseID` the lease the operation is about.
    private func run(_ operation: String, _ arguments: [String], lease: Double? = nil, leaseID: String? = nil)
        async throws(PoolError) -> [RedisReply]
    {
        do {
            return try await Self.script.call(
                operation, keys: keyList, time: time, channel: channel, arguments: [keys.name] + arguments,
                on: connections, onDeadline: onDeadline,
                onMissing: onMissing
            ).dropFirst().map { $0 }
        } catch {
            if case .refused("exhausted", let detail) = error {
                onDeadline(Int64(detail).map(Timestamp.init(micros:)))
            }
            throw Self.error(error, lease: lease, leaseID: leaseID)
        }
    }

    static func error(_ failure: ScriptFailure, lease: Double?, leaseID: String?) -> PoolError {
        switch failure {
        case .unavailable(let why), .redis(let why):
            return .backendUnavailable(why)
        case .refused(let code, let detail):
            switch code {
            case "gone": return .gone
            case "not_found": return .notFound("lease \"\(detail)\"")
            case "element_not_found": return .notFound("element \"\(detail)\"")
            case "element_free": return .notLeased("element \"\(detail)\" is not leased", status: nil)
            case "element_leased":
                return .elementLeased(element: "", lease: detail)
            case "not_granted":
                let status = LeaseStatus(VisitorStatus(rawValue: detail) ?? .completed)
                return .notLeased(
                    "lease \"\(leaseID ?? "?")\" is not active (it is \(status.rawValue))", status: status)
            case "exhausted": return .exhausted(nextExpiryAt: Int64(detail).map(Timestamp.init(micros:)))
            case "full": return .full(retryAfterSeconds: Int(detail) ?? 1)
            case "too_many_elements":
                return .tooManyElements(limit: Int(detail) ?? PoolConfig.Limits.elements.upperBound)
            case "lease_excess":
                if let lease, let limit = Double(detail), let problem = LeasePool.leaseProblem(lease, limit: limit) {
                    return problem
                }
                return .invalid(field: "lease_seconds", message: "too long for this pool")
            default:
                return .backendUnavailable("\(code) \(detail)")
            }
        }
    }

    // MARK: - Encoding

    /// Seconds as text Lua's `tonumber` reads back, and in µs (a positive one at least 1).
    static func leaseArguments(_ seconds: Double) -> [String] {
        [RedisQueueStore.secondsText(seconds), String(RedisQueueStore.micros(seconds))]
    }

    /// The declared elements as stored (compared on a repeated `PUT`).
    static func elementsText(_ elements: [PoolElementSpec]) -> String {
        let list: [JSONValue] = elements.map { e in
            var fields: [(String, JSONValue)] = [("id", .string(e.id))]
            if let data = e.data { fields.append(("data", data)) }
            return .object(fields)
        }
        return RedisQueueStore.jsonText(.array(list))
    }

    // MARK: - Decoding

    /// max_waiting, lease seconds, grow max ('' none), grow prefix, elements, idle seconds, claim seconds.
    static func config(_ fields: ArraySlice<RedisReply>, declared: DeclaredElements? = nil) throws(PoolError)
        -> PoolConfig
    {
        let f = fields.map { $0.string ?? "" }
        guard f.count == 7, let maxWaiting = Int(f[0]), let lease = Double(f[1]), let idle = Double(f[5]),
            let claim = Double(f[6])
        else {
            throw .backendUnavailable("unexpected config")
        }
        let elements: [PoolElementSpec]
        if let declared { elements = try declared.elements(f[4]) } else { elements = try DeclaredElements.decode(f[4]) }
        let grow = Int(f[2]).map { PoolGrow(maxSize: $0, prefix: f[3]) }
        return PoolConfig(
            elements: elements, leaseSeconds: lease, maxWaiting: maxWaiting, grow: grow, idleSeconds: idle,
            claimSeconds: claim)
    }

    func lease(_ reply: RedisReply?) throws(PoolError) -> Lease {
        guard case .bulk(let bytes)? = reply,
            let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
            let lease = Self.lease(object)
        else { throw .backendUnavailable("unexpected lease") }
        return lease
    }

    /// A lease as `pool.lua` writes it (every number as text), and the
    /// line's status of it (`cancelled` for a fetch that left unserved).
    static func leaseAndStatus(_ object: [String: Any]) -> (lease: Lease, status: VisitorStatus)? {
        func text(_ name: String) -> String? { object[name] as? String }
        func time(_ name: String) -> Timestamp? { text(name).flatMap { Int64($0) }.map(Timestamp.init(micros:)) }
        guard let id = text("id"), let status = text("status").flatMap(VisitorStatus.init(rawValue:)) else {
            return nil
        }
        var data: JSONValue?
        if let raw = text("data") {
            guard let value = try? JSONValue.parse(raw) else { return nil }
            data = value
        }
        let lease = Lease(
            id: id, element: text("element"), elementData: data, holder: text("holder"), status: LeaseStatus(status),
            leasedAt: time("granted_at"), expiresAt: time("expires_at"),
            endedAt: status == .granted ? nil : time("finished_at"), fence: text("fence").flatMap { Int64($0) },
            reason: text("reason"))
        return (lease, status)
    }

    static func lease(_ object: [String: Any]) -> Lease? { leaseAndStatus(object)?.lease }

    /// An element as `pool.lua` writes it, and its order (where a page resumes after it).
    static func element(_ bytes: [UInt8]) -> (element: PoolElement, order: Int64)? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
            let id = object["id"] as? String, let order = (object["order"] as? String).flatMap({ Int64($0) }),
            let transitions = (object["transitions"] as? String).flatMap({ Int($0) })
        else { return nil }
        var data: JSONValue?
        if let raw = object["data"] as? String {
            guard let value = try? JSONValue.parse(raw) else { return nil }
            data = value
        }
        var lease: Lease?
        if let l = object["lease"] as? [String: Any] {
            guard let decoded = Self.lease(l) else { return nil }
            lease = decoded
        }
        let element = PoolElement(
            id: id, data: data, lease: lease, leaseTransitions: transitions,
            lastHolder: object["last_holder"] as? String
        )
        return (element, order)
    }

    /// Decodes a notice `pool.lua` published; nil for another kind's or a malformed one.
    package static func decodeNotice(_ payload: [UInt8]) -> PoolNotice? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any] else { return nil }
        return decodeNotice(object)
    }

    /// Decodes a notice already parsed into Foundation objects.
    package static func decodeNotice(_ object: [String: Any]) -> PoolNotice? {
        guard object["kind"] as? String == "pool", let name = object["name"] as? String,
            let time = (object["time"] as? String).flatMap({ Int64($0) })
        else { return nil }
        var notice = PoolNotice(name: name, time: Timestamp(micros: time))
        if object["deleted"] as? Bool == true {
            notice.deleted = true
            return notice
        }
        func leases(_ field: String) -> [(lease: Lease, status: VisitorStatus)]? {
            var out: [(Lease, VisitorStatus)] = []
            for case let text as String in object[field] as? [Any] ?? [] {
                guard let o = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
                    let decoded = leaseAndStatus(o)
                else { return nil }
                out.append(decoded)
            }
            return out
        }
        guard let changed = leases("changed"), let withdrawn = leases("withdrawn") else { return nil }
        notice.changed = changed
        notice.withdrawn = withdrawn.map(\.lease)
        notice.next = (object["next"] as? String).flatMap { Int64($0) }.map(Timestamp.init(micros:))
        if let before = object["config_before"] as? [String], let after = object["config"] as? [String],
            let b = try? config(before.map { RedisReply.bulk(Array($0.utf8)) }[...]),
            let a = try? config(after.map { RedisReply.bulk(Array($0.utf8)) }[...])
        {
            notice.updated = (b, a)
        }
        return notice
    }
}

/// A pool's declared elements as stored (JSON text, never changed after the
/// pool's creation), and the last text decoded.
final class DeclaredElements: Sendable {
    private let last = Locked<(text: String, elements: [PoolElementSpec])?>(nil)

    func elements(_ text: String) throws(PoolError) -> [PoolElementSpec] {
        if let last = last.withLock({ $0 }), last.text == text { return last.elements }
        let elements = try Self.decode(text)
        last.withLock { $0 = (text, elements) }
        return elements
    }

    static func decode(_ text: String) throws(PoolError) -> [PoolElementSpec] {
        guard case .array(let list)? = try? JSONValue.parse(text) else {
            throw .backendUnavailable("unexpected config")
        }
        var elements: [PoolElementSpec] = []
        for item in list {
            guard case .string(let id)? = item["id"] else { throw .backendUnavailable("unexpected config") }
            elements.append(PoolElementSpec(id: id, data: item["data"]))
        }
        return elements
    }
}

/// What one pool operation changed, as every instance hears it.
package struct PoolNotice: Sendable {
    package var name: String
    /// The operation's time.
    package var time: Timestamp
    /// Each lease whose status changed or that started waiting, as it stands
    /// after the operation, with the line's status of it.
    package var changed: [(lease: Lease, status: VisitorStatus)] = []
    /// Waiting fetches that gave up (left as if they had never come), as they last were.
    package var withdrawn: [Lease] = []
    /// The pool's next deadline, if any.
    package var next: Timestamp?
    package var deleted = false
    /// The config before and after a `PATCH`; nil for other operations.
    package var updated: (before: PoolConfig, after: PoolConfig)?

    init(name: String, time: Timestamp) {
        self.name = name
        self.time = time
    }
}
