import Foundation
import Locking
import RedisClient
import UsherCore

/// One pool kept in Redis: every `LeasePool` operation as one call of
/// `pool.lua`, on the line of `line.lua`, with the same semantics. The
/// storage budget (`max_stored_bytes`) does not apply: Redis's `maxmemory` bounds it.
package struct RedisPoolStore: ScriptStore {
    /// The parts of a pool's keys, in the order `pool.lua` reads `KEYS`: the line's, then the elements'.
    static let parts = RedisQueueStore.parts + ["el", "order", "free", "elements"]

    let runner: ScriptRunner<PoolScript>
    var keys: ResourceKeys { runner.keys }
    /// The declared elements, decoded once: every state and config answer carries them.
    let declared = DeclaredElements()

    init(runner: ScriptRunner<PoolScript>) {
        self.runner = runner
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
        let declared = declared
        return try await run(.create, arguments) { r throws(ReplyShapeError) in
            let created = try r.flag("created")
            return (try Self.config(&r, declared: declared), created)
        }
    }

    /// Removes every key of the pool; true when it existed.
    package func delete() async throws(PoolError) -> Bool {
        try await runner.delete(.delete, context: PoolScript.Context())
    }

    package func config() async throws(PoolError) -> PoolConfig {
        let declared = declared
        return try await run(.config) { r throws(ReplyShapeError) in try Self.config(&r, declared: declared) }
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
        let declared = declared
        return try await run(.patch, arguments) { r throws(ReplyShapeError) in try Self.config(&r, declared: declared) }
    }

    /// Elements, free and leased elements, fetchers waiting (the list route's
    /// summary), and when the fetcher waiting longest started waiting.
    package func counts() async throws(PoolError) -> (
        size: Int, available: Int, leased: Int, waiting: Int, oldestWaitingSince: Timestamp?
    ) {
        try await run(.counts) { r throws(ReplyShapeError) in
            let counts = (
                size: try r.int("size"), available: try r.int("available"), leased: try r.int("leased"),
                waiting: try r.int("waiting"), oldestWaitingSince: try r.timestamp("oldest waiting since")
            )
            guard r.isAtEnd else { throw ReplyShapeError(what: "end of the counts") }
            return counts
        }
    }

    /// Applies what is due (any instance may run it at a deadline it knows).
    package func tick() async throws(PoolError) {
        try await runner.run(ScriptCall(.tick, context: PoolScript.Context()))
    }

    // MARK: - Leases

    /// `LeasePool.fetch`: a free element, or `exhausted`. With `waiting`, a
    /// fetch that finds none is answered `waiting` in the line (the caller
    /// parks on it and `withdraw`s it when its wait ends, at `heardUntil`:
    /// its client counts as heard of until then; nil, now).
    package func fetch(_ r: FetchRequest, waiting: Bool = false, heardUntil: Timestamp? = nil) async throws(PoolError)
        -> Lease
    {
        try await fetchOutcome(r, waiting: waiting, heardUntil: heardUntil).lease
    }

    /// `fetch`, and whether it made the lease (false: a known `id`).
    func fetchOutcome(_ r: FetchRequest, waiting: Bool = false, heardUntil: Timestamp? = nil) async throws(PoolError)
        -> FetchOutcome
    {
        if let problem = LeasePool.leaseProblem(r.leaseSeconds, limit: 0) { throw problem }
        var arguments = [r.id ?? "", r.holder ?? ""]
        arguments += r.leaseSeconds.map(Self.leaseArguments).map { [$0[1], $0[0]] } ?? ["-1", ""]
        arguments += [waiting ? "1" : "0", heardUntil.map { String($0.micros) } ?? ""]
        return try await runner.run(
            ScriptCall(.fetch, arguments, context: PoolScript.Context(lease: r.leaseSeconds)) {
                r throws(ReplyShapeError) in
                FetchOutcome(lease: try Self.lease(&r), created: try r.flag("created"))
            })
    }

    /// A waiting fetch whose wait ended leaves the line as if it had never
    /// come (`exhausted`, as when it is not there); one that was given an
    /// element by now keeps it.
    func withdraw(id: String) async throws(PoolError) -> Lease {
        try await leaseCall(.withdraw, [id], PoolScript.Context(leaseID: id))
    }

    package func recycle(lease id: String) async throws(PoolError) -> Lease {
        try await leaseCall(.recycle, [id], PoolScript.Context(leaseID: id))
    }

    /// Recycles the element's lease: `not_leased` when it is free.
    package func recycle(element id: String) async throws(PoolError) -> Lease {
        try await leaseCall(.recycleElement, [id], PoolScript.Context())
    }

    /// See `LeasePool.recycleUndelivered`: nil, changing nothing, when the
    /// lease no longer holds grant `fence`.
    func recycleUndelivered(lease id: String, fence: Int64) async throws(PoolError) -> Lease? {
        try await runner.run(
            ScriptCall(.undelivered, [id, String(fence)], context: PoolScript.Context(leaseID: id)) {
                r throws(ReplyShapeError) in r.isAtEnd ? nil : try Self.lease(&r)
            })
    }

    func extend(lease id: String, leaseSeconds: Double?) async throws(PoolError) -> Lease {
        if let problem = LeasePool.leaseProblem(leaseSeconds, limit: 0) { throw problem }
        let arguments = [id] + (leaseSeconds.map(Self.leaseArguments).map { [$0[1], $0[0]] } ?? ["", ""])
        return try await leaseCall(.extend, arguments, PoolScript.Context(lease: leaseSeconds, leaseID: id))
    }

    /// One lease, live or remembered; a call naming it. `heardUntil`: a
    /// long-poll parked on it until then (its client counts as heard of meanwhile).
    package func lease(id: String, heardUntil: Timestamp? = nil) async throws(PoolError) -> Lease {
        try await leaseCall(
            .lease, [id, heardUntil.map { String($0.micros) } ?? ""], PoolScript.Context(leaseID: id))
    }

    // MARK: - State and elements

    /// `LeasePool.state`: the same pages, cursors and `more`.
    package func state(limit: Int, after cursor: Int64? = nil) async throws(PoolError) -> PoolState {
        let limit = min(max(0, limit), 1_000_000_000)
        let (name, declared) = (keys.name, declared)
        return try await run(.state, [String(limit), cursor.map { String($0) } ?? ""]) {
            r throws(ReplyShapeError) in try Self.state(&r, name: name, declared: declared)
        }
    }

    /// more, the two list lengths, the figures, the config, then the page's elements and waiting leases.
    private static func state(_ r: inout ReplyReader, name: String, declared: DeclaredElements) throws(ReplyShapeError)
        -> PoolState
    {
        let more = try r.flag("more")
        let elementCount = try r.int("element count")
        let waitingCount = try r.int("waiting count")
        let size = try r.int("size")
        let available = try r.int("available")
        let leased = try r.int("leased")
        let waitingTotal = try r.int("waiting")
        let nextExpiryAt = try r.timestamp("next expiry")
        let counts = PoolCounts(
            fetched: try r.int("fetched"), recycled: try r.int("recycled"), expired: try r.int("expired"),
            revoked: try r.int("revoked"), grown: try r.int("grown"), abandoned: try r.int("abandoned"),
            unclaimed: try r.int("unclaimed"))
        let config = try Self.config(&r, declared: declared)
        let elements = try r.list(elementCount) { r throws(ReplyShapeError) in try Self.element(&r) }
        let waiting = try r.list(waitingCount) { r throws(ReplyShapeError) in try Self.lease(&r) }
        guard r.isAtEnd else { throw ReplyShapeError(what: "end of the state") }
        var state = PoolState(
            name: name, config: config, size: size, available: available, leased: leased, waiting: waitingTotal,
            nextExpiryAt: nextExpiryAt, elements: elements.map(\.element), counts: counts)
        state.waitingLeases = waiting
        state.cursors = elements.map { "e\($0.order)" }
        state.more = more
        return state
    }

    /// `PUT …/elements/{id}`: a new element (created), or new data for one.
    func putElement(_ id: String, data: JSONValue?) async throws(PoolError) -> (
        element: PoolElement, created: Bool
    ) {
        try await run(.putElement, [id, data.map(RedisQueueStore.jsonText) ?? ""]) { r throws(ReplyShapeError) in
            (try Self.element(&r).element, try r.flag("created"))
        }
    }

    /// `DELETE …/elements/{id}[?force=true]`.
    func removeElement(_ id: String, force: Bool) async throws(PoolError) -> ElementRemoval {
        do {
            return try await run(.removeElement, [id, force ? "1" : "0"]) { r throws(ReplyShapeError) in
                let element = try Self.element(&r).element
                let ended = try r.optional { r throws(ReplyShapeError) in try Self.lease(&r) }
                return ElementRemoval(element: element, endedLease: ended)
            }
        } catch .elementLeased(_, let lease) {
            throw .elementLeased(element: id, lease: lease)
        }
    }

    // MARK: - Calls

    /// `operation` with no context for its refusals, its reply read by `read`.
    private func run<Reply: Sendable>(
        _ operation: PoolScript.Operation, _ arguments: [String] = [],
        read: @escaping @Sendable (inout ReplyReader) throws(ReplyShapeError) -> Reply
    ) async throws(PoolError) -> Reply {
        try await runner.run(ScriptCall(operation, arguments, context: PoolScript.Context(), read: read))
    }

    /// `operation` answering one lease.
    private func leaseCall(_ operation: PoolScript.Operation, _ arguments: [String], _ context: PoolScript.Context)
        async throws(PoolError) -> Lease
    {
        try await runner.run(
            ScriptCall(operation, arguments, context: context) { r throws(ReplyShapeError) in try Self.lease(&r) })
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

    /// The config as `pool.lua`'s `config_fields` lists it (`declared`: the elements' cache).
    static func config(_ r: inout ReplyReader, declared: DeclaredElements? = nil) throws(ReplyShapeError)
        -> PoolConfig
    {
        let maxWaiting = try r.value("max_waiting") { Int($0) }
        let lease = try r.value("lease_seconds") { Double($0) }
        let growMax = try r.text("grow max_size")
        let growPrefix = try r.text("grow prefix")
        let elements = try r.value("elements") { text in
            if let declared { try? declared.elements(text) } else { try? DeclaredElements.decode(text) }
        }
        let idle = try r.value("idle_seconds") { Double($0) }
        let claim = try r.value("claim_seconds") { Double($0) }
        let grow = Int(growMax).map { PoolGrow(maxSize: $0, prefix: growPrefix) }
        return PoolConfig(
            elements: elements, leaseSeconds: lease, maxWaiting: maxWaiting, grow: grow, idleSeconds: idle,
            claimSeconds: claim)
    }

    /// A lease (JSON text).
    static func lease(_ r: inout ReplyReader) throws(ReplyShapeError) -> Lease {
        guard let object = try? JSONSerialization.jsonObject(with: Data(try r.bytes("lease"))) as? [String: Any],
            let lease = Self.lease(object)
        else { throw ReplyShapeError(what: "lease") }
        return lease
    }

    /// An element (JSON text) and its order.
    static func element(_ r: inout ReplyReader) throws(ReplyShapeError) -> (element: PoolElement, order: Int64) {
        guard let element = element(try r.bytes("element")) else { throw ReplyShapeError(what: "element") }
        return element
    }

    /// A lease as `pool.lua` writes it (every number as text), and the
    /// line's status of it (`cancelled` for a fetch that left unserved).
    static func leaseAndStatus(_ object: [String: Any]) -> (lease: Lease, status: VisitorStatus)? {
        func text(_ name: String) -> String? { object[name] as? String }
        func time(_ name: String) -> Timestamp? { text(name).flatMap { Int64($0) }.map(Timestamp.init(micros:)) }
        guard let id = text("id"), let status = text("status").flatMap(VisitorStatus.init(rawValue:)),
            let createdAt = time("created_at")
        else { return nil }
        var data: JSONValue?
        if let raw = text("data") {
            guard let value = try? JSONValue.parse(raw) else { return nil }
            data = value
        }
        let lease = Lease(
            id: id, element: text("element"), elementData: data, holder: text("holder"), status: LeaseStatus(status),
            createdAt: createdAt, grantedAt: time("granted_at"), expiresAt: time("expires_at"),
            finishedAt: status == .granted ? nil : time("finished_at"), fence: text("fence").flatMap { Int64($0) },
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
    static func decodeNotice(_ payload: [UInt8]) -> PoolNotice? {
        guard let record = LineNoticeRecord.decode(payload, kind: "pool"), let time = Int64(record.time) else {
            return nil
        }
        var notice = PoolNotice(name: record.name, time: Timestamp(micros: time))
        if record.deleted == true {
            notice.deleted = true
            return notice
        }
        func leases(_ texts: [String]?) -> [(lease: Lease, status: VisitorStatus)]? {
            var out: [(Lease, VisitorStatus)] = []
            for text in texts ?? [] {
                guard let o = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
                    let decoded = leaseAndStatus(o)
                else { return nil }
                out.append(decoded)
            }
            return out
        }
        guard let changed = leases(record.changed), let withdrawn = leases(record.withdrawn) else { return nil }
        notice.changed = changed
        notice.withdrawn = withdrawn.map(\.lease)
        notice.next = record.next.flatMap { Int64($0) }.map(Timestamp.init(micros:))
        if let before = record.configBefore, let after = record.config,
            let b = try? config(texts: before), let a = try? config(texts: after)
        {
            notice.updated = (b, a)
        }
        return notice
    }
}

extension RedisPoolStore {
    /// A config as a notice lists it.
    static func config(texts: [String]) throws(ReplyShapeError) -> PoolConfig {
        var r = ReplyReader(texts: texts)
        return try config(&r)
    }
}

/// `pool.lua` on `line.lua`: its operations and refusals.
enum PoolScript: ScriptKind {
    static let script = ResourceScript(kindSources: PackageResources.line_lua, PackageResources.pool_lua)

    enum Operation: String, Sendable {
        case create, delete, config, patch, counts, tick, fetch, withdraw, recycle, undelivered, extend, lease, state
        case recycleElement = "recycle_element"
        case putElement = "put_element"
        case removeElement = "remove_element"
    }

    enum Refusal: String, ScriptRefusal {
        case gone, exhausted, full
        case notFound = "not_found"
        case notGranted = "not_granted"
        case elementNotFound = "element_not_found"
        case elementFree = "element_free"
        case elementLeased = "element_leased"
        case tooManyElements = "too_many_elements"
        case leaseExcess = "lease_excess"
    }

    /// The lease asked for (for the message of a too long one) and the lease the call is about.
    struct Context: Sendable {
        var lease: Double? = nil
        var leaseID: String? = nil
    }

    static func failure(_ refusal: Refusal, detail: String, context: Context) -> PoolError {
        switch refusal {
        case .gone: return .gone
        case .notFound: return .notFound("lease \"\(detail)\"")
        case .elementNotFound: return .notFound("element \"\(detail)\"")
        case .elementFree: return .notLeased("element \"\(detail)\" is not leased", status: nil)
        case .elementLeased: return .elementLeased(element: "", lease: detail)
        case .notGranted:
            let status = LeaseStatus(VisitorStatus(rawValue: detail) ?? .completed)
            return .notLeased(
                "lease \"\(context.leaseID ?? "?")\" is not active (it is \(status.rawValue))", status: status)
        case .exhausted: return .exhausted(nextExpiryAt: deadline(of: .exhausted, detail: detail))
        case .full: return .full(retryAfterSeconds: Int(detail) ?? 1)
        case .tooManyElements: return .tooManyElements(limit: Int(detail) ?? PoolConfig.Limits.elements.upperBound)
        case .leaseExcess:
            if let lease = context.lease, let limit = Double(detail),
                let problem = LeasePool.leaseProblem(lease, limit: limit)
            {
                return problem
            }
            return .invalid(field: "lease_seconds", message: "too long for this pool")
        }
    }

    /// An exhausted pool's next expiry, which the timer arms.
    static func deadline(of refusal: Refusal, detail: String) -> Timestamp? {
        refusal == .exhausted ? Int64(detail).map(Timestamp.init(micros:)) : nil
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
struct PoolNotice: Sendable {
    package var name: String
    /// The operation's time.
    var time: Timestamp
    /// Each lease whose status changed or that started waiting, as it stands
    /// after the operation, with the line's status of it.
    var changed: [(lease: Lease, status: VisitorStatus)] = []
    /// Waiting fetches that gave up (left as if they had never come), as they last were.
    var withdrawn: [Lease] = []
    /// The pool's next deadline, if any.
    package var next: Timestamp?
    var deleted = false
    /// The config before and after a `PATCH`; nil for other operations.
    var updated: (before: PoolConfig, after: PoolConfig)?

    init(name: String, time: Timestamp) {
        self.name = name
        self.time = time
    }
}
