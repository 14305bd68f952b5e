/// One pool (docs/api.md, Pools; the seed's auto-recycling object pool): named elements
/// leased out and recycled, expired leases recycling themselves.
///
/// A pool is a resource behind a visitor queue (seed 000), and runs on the
/// queue engine: the engine's capacity is the number of elements, a fetch is
/// a visitor, and a lease is a granted visitor. So the waiting fetchers are
/// the engine's FIFO line (with `max_waiting` and the host's long-poll), and
/// lease expiry, `extend`, fences and the totals are the engine's holds. What
/// the pool adds is which element each lease has (`ElementTable`): after
/// every engine operation, including the timer's, the elements of leases
/// that ended are freed and handed to the leases granted in the same step
/// (`engineDidChange`), before any waiter is answered, so an expiry serves
/// a waiting fetcher at once.
///
/// Adding (or growing) an element raises the capacity by one; removing one
/// lowers it first and then ends its lease, so no grant happens in between.
package actor LeasePool: EngineHost {
    /// Finished leases kept visible (and their client ids remembered).
    static let history = 1000

    /// The executor the actor runs on; `withIsolation` takes its lock.
    package nonisolated let executor: ResourceExecutor
    /// Runs the actor's jobs on `executor`.
    package nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    /// The pool's name.
    package nonisolated let name: String

    let clock: any UsherClock
    /// Where state changes are emitted (nil: nowhere).
    package nonisolated let events: EventLog?
    static let eventKind = "pool"
    /// Events carry the lease; their type is its new status (`waiting`,
    /// `recycled`, `expired`, `revoked`), `leased` when it is active, and
    /// `cancelled` for a fetch that left the line unserved.
    func event(for v: VisitorView) -> (type: String, subject: EventSubject) {
        let lease = lease(v)
        let type =
            switch (v.status, lease.status) {
            case (.cancelled, _), (.merged, _): "cancelled"
            case (_, .active): "leased"
            default: lease.status.rawValue
            }
        return (type, .lease(lease))
    }
    var engine: QueueEngine
    var host = HostState()
    var table = ElementTable()
    /// The config: mutable fields as patched, `elements` as declared at creation.
    package private(set) var config: PoolConfig
    var grownTotal = 0
    var grownIDs = 0

    /// A pool holding the declared elements, all free; fences start at the
    /// clock's current time in µs.
    package init(
        name: String, config: PoolConfig, clock: any UsherClock, events: EventLog? = nil,
        budget: StorageBudget = StorageBudget()
    ) {
        self.name = name
        self.events = events
        self.clock = clock
        self.config = config
        self.executor = ResourceExecutor(label: "usher.pool.\(name)")
        for e in config.elements { table.append(e.id, data: e.data) }
        self.engine = QueueEngine(
            name: name, config: config.queueConfig(size: config.elements.count), createdAt: clock.now(),
            holdPolicy: .atMostResource, budget: budget)
        engine.unclaimedStatus = .completed
        // Declared elements came in the config, already admitted: charged, not checked.
        for e in config.elements { engine.storage.charge(Self.storedBytes(e.id, e.data)) }
    }

    /// What an element is charged: its id and data (in the engine's account,
    /// so deleting the pool gives it back with the leases).
    static func storedBytes(_ id: String, _ data: JSONValue?) -> Int {
        StorageBudget.cost(id, payload: data)
    }

    /// What an element's `last_holder` is charged.
    static func holderBytes(_ holder: String?) -> Int { holder?.utf8.count ?? 0 }

    /// Takes `bytes` from the budget for an element, or throws `storageFull`.
    func reserveElement(_ bytes: Int) throws(PoolError) {
        do throws(StorageFull) { try engine.storage.reserve(bytes) } catch { throw .storageFull(error) }
    }

    deinit { host.timer?.cancel() }

    /// A fetcher whose client hung up leaves the line as if it had never come.
    static func withdrawWaiting(_ id: String, in engine: inout QueueEngine, now: Timestamp) throws(QueueError) {
        _ = try engine.withdraw(id: id, now: now)
    }

    /// Totals, after applying `now` (the last ones once closed).
    package var counts: PoolCounts {
        if host.phase != .closed {
            engine.advance(to: clock.now())
            afterOperation()
        }
        return PoolCounts(engine.counts, grown: grownTotal)
    }

    // MARK: - Fetch

    /// `POST …/fetch` without `wait`: a free element (expired leases are
    /// recycled first, and `grow` may create one), or `pool_exhausted`. A
    /// known `id` answers its lease, now safe from undos (`noteRetry`).
    package func fetch(_ r: FetchRequest) throws(PoolError) -> Lease {
        try fetchOutcome(r).lease
    }

    /// `fetch`, and whether it made the lease (false: a known `id`).
    func fetchOutcome(_ r: FetchRequest) throws(PoolError) -> FetchOutcome {
        try checkLease(r.leaseSeconds)
        try run(nil) { (e, now) in e.advance(to: now) }
        if let id = r.id, let known = engine.noteRetry(id: id) {
            guard !known.status.isWaiting else { throw exhausted() }
            return FetchOutcome(lease: lease(known), created: false)
        }
        try grow(forWaiters: 1)
        guard table.available > 0 else { throw exhausted() }
        let v = try run(nil) { (e, now) throws(QueueError) in try e.enqueue(r.visitorRequest, now: now).view }
        return FetchOutcome(lease: leaseNow(v.id), created: true)
    }

    /// `POST …/fetch?wait=S`: as `fetch`, but when nothing is free the caller
    /// waits in FIFO order (the engine's line) until an element is free for
    /// it, or `deadline`: then it leaves the line as if it had never come,
    /// and gets `pool_exhausted`. More than `max_waiting` waiting: `full`.
    package func fetch(_ r: FetchRequest, until deadline: Timestamp) async throws(PoolError) -> Lease {
        try await fetchOutcome(r, until: deadline).lease
    }

    /// `fetch(_:until:)`, and whether this request made the lease.
    func fetchOutcome(_ r: FetchRequest, until deadline: Timestamp) async throws(PoolError) -> FetchOutcome {
        try checkLease(r.leaseSeconds)
        try run(nil) { (e, now) in e.advance(to: now) }
        let id: String
        let created: Bool
        if let given = r.id, let known = engine.noteRetry(id: given) {
            guard known.status.isWaiting else { return FetchOutcome(lease: lease(known), created: false) }
            (id, created) = (given, false)
        } else {
            try grow(forWaiters: 1)
            let v = try run(nil) { (e, now) throws(QueueError) in try e.enqueue(r.visitorRequest, now: now).view }
            guard v.status.isWaiting else { return FetchOutcome(lease: leaseNow(v.id), created: true) }
            (id, created) = (v.id, true)
        }
        do throws(QueueError) {
            _ = try await parkOnVisitor(id, until: .leftLine, deadline: deadline, withdrawing: true)
        } catch {
            if error != .gone { _ = try? run(id) { (e, now) throws(QueueError) in try e.withdraw(id: id, now: now) } }
            // Another request with the same id stopped waiting first and withdrew the fetch.
            if case .notFound = error { throw exhausted() }
            throw PoolError(error, lease: id)
        }
        // One step: the element it was given by now, or out of the line.
        let settled: VisitorView?
        do throws(QueueError) {
            settled = try perform { (e, now) throws(QueueError) in try e.withdraw(id: id, now: now) }
        } catch {
            if case .notFound = error { throw exhausted() }
            throw PoolError(error, lease: id)
        }
        guard settled != nil else { throw exhausted() }
        return FetchOutcome(lease: leaseNow(id), created: created)
    }

    // MARK: - Leases

    /// `POST …/recycle {"lease"}`: the element is free again (or goes to the
    /// first waiting fetcher in the same step). Ended: `not_leased`.
    package func recycle(lease id: String) throws(PoolError) -> Lease {
        let v = try run(id) { (e, now) throws(QueueError) in try e.complete(id: id, now: now) }
        return lease(v)
    }

    /// The answer that leased `id` (its fence `fence`) never reached its
    /// client: the lease is recycled, reason `undelivered`, and the element
    /// goes to the first waiting fetcher or back to the pool. Nil, changing
    /// nothing, when the lease no longer holds that grant.
    @discardableResult
    func recycleUndelivered(lease id: String, fence: Int64) throws(PoolError) -> Lease? {
        try run(id) { (e, now) in e.undoGrant(id: id, fence: fence, as: .completed, now: now) }.map(lease)
    }

    /// `POST …/recycle {"element"}`: recycles the element's lease; a free
    /// element is `not_leased`, an unknown one `notFound`.
    package func recycle(element: String) throws(PoolError) -> Lease {
        try run(nil) { (e, now) in e.advance(to: now) }
        guard let el = table[element] else { throw .notFound("element \"\(element)\"") }
        guard let leaseID = el.lease else { throw .notLeased("element \"\(element)\" is not leased", status: nil) }
        return try recycle(lease: leaseID)
    }

    /// `POST …/leases/{id}/extend`: expires `leaseSeconds` (default: its own
    /// lease, or the pool's) from now. Ended: `not_leased`.
    func extend(lease id: String, leaseSeconds: Double?) throws(PoolError) -> Lease {
        try checkLease(leaseSeconds)
        let v = try run(id) { (e, now) throws(QueueError) in try e.extend(id: id, holdSeconds: leaseSeconds, now: now) }
        return lease(v)
    }

    /// One lease, live or remembered.
    package func lease(id: String) throws(PoolError) -> Lease {
        lease(try run(id) { (e, now) throws(QueueError) in try e.visitor(id: id, now: now) })
    }

    // MARK: - State and config

    /// `GET /v1/pools/{p}`: sizes, the first `limit` elements in stable order,
    /// totals; on the first page also the first `limit` waiting fetches.
    package func state(limit: Int, after cursor: Int64? = nil) throws(PoolError) -> PoolState {
        try run(nil) { (e, now) in e.advance(to: now) }
        let page = table.page(after: cursor, limit: limit)
        var state = PoolState(
            name: name, config: config, size: table.count, available: table.available, leased: table.leased,
            waiting: engine.counts.waiting, nextExpiryAt: engine.nextHoldExpiry,
            elements: page.elements.map(element), counts: PoolCounts(engine.counts, grown: grownTotal))
        if cursor == nil { state.waitingLeases = engine.firstWaiting(limit).map(lease) }
        state.cursors = page.elements.map { "e\($0.order)" }
        state.more = page.more
        return state
    }

    /// Reads an elements cursor (`e<order>`); nil when malformed.
    package static func elementCursor(_ text: String) -> Int64? {
        guard text.first == "e" else { return nil }
        return Int64(text.dropFirst())
    }

    /// `PATCH`: `lease_seconds`, `max_waiting`, `idle_seconds` and `claim_seconds` apply from now on; a larger
    /// `grow.max_size` grows for the fetchers already waiting.
    package func apply(_ patch: PoolPatch) throws(PoolError) -> PoolConfig {
        try run(nil) { (e, now) in
            e.apply(
                QueuePatch(
                    maxWaiting: patch.maxWaiting, holdSeconds: patch.leaseSeconds, idleSeconds: patch.idleSeconds,
                    claimSeconds: patch.claimSeconds), now: now)
        }
        let before = config
        config = patch.applied(to: config)
        try grow(forWaiters: 0)
        events?.emitUpdated(kind: Self.eventKind, name: name, PoolConfig.changes(from: before, to: config))
        return config
    }

    /// The pool was deleted: parked fetchers get `gone`, and so does every later call.
    package func close() { closeHost() }

    /// The server is stopping: parked fetchers get `shuttingDown`, and so do new waits.
    package func shutdown() { shutdownHost() }

    /// Parked long-polls (for tests).
    var waiterCount: Int { parkedCount }

    // MARK: - Helpers

    /// A fetch, extend or PATCH may ask for a shorter lease than the pool's, never a longer one.
    func checkLease(_ seconds: Double?) throws(PoolError) {
        if let problem = Self.leaseProblem(seconds, limit: config.leaseSeconds) { throw problem }
    }

    func exhausted() -> PoolError { .exhausted(nextExpiryAt: engine.nextHoldExpiry) }

    func lease(_ v: VisitorView) -> Lease {
        Lease(v, data: LeaseNote(stored: v.payload).element.flatMap { table[$0]?.data })
    }

    /// A lease as it is after the operation that just ran (with its element).
    func leaseNow(_ id: String) -> Lease {
        guard let v = engine.currentView(id: id) else { preconditionFailure("lease \(id) vanished") }
        return lease(v)
    }

    func element(_ e: ElementTable.Element) -> PoolElement {
        PoolElement(
            id: e.id, data: e.data,
            lease: e.lease.flatMap { engine.currentView(id: $0) }.map { Lease($0, data: e.data) },
            leaseTransitions: e.transitions, lastHolder: e.lastHolder)
    }

    /// One engine operation through the host's frame, its errors in the pool's words.
    @discardableResult
    func run<T>(_ lease: String?, _ body: (inout QueueEngine, Timestamp) throws(QueueError) -> T) throws(PoolError) -> T
    {
        do throws(QueueError) { return try perform(body) } catch { throw PoolError(error, lease: lease) }
    }
}
