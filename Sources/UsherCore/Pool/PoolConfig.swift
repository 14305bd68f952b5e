/// One element as the config declares it: an id, and optional JSON `data`.
package struct PoolElementSpec: Sendable, Hashable {
    /// The element's id (a valid name).
    package var id: String
    /// Anything the holder needs (a licence key, a device path…).
    package var data: JSONValue?

    package init(id: String, data: JSONValue? = nil) {
        self.id = id
        self.data = data
    }
}

/// `grow`: when nothing is free, create `prefix1`, `prefix2`, … until the
/// pool has `max_size` elements.
package struct PoolGrow: Sendable, Hashable {
    /// `max_size`: growth stops at this many elements (0–100000).
    package var maxSize: Int
    /// `prefix` (`"el-"`): grown ids are the prefix and a counter.
    package var prefix: String
    /// The prefix without `grow` given, also of the elements `size` makes.
    static let defaultPrefix = "el-"

    package init(maxSize: Int, prefix: String = defaultPrefix) {
        self.maxSize = maxSize
        self.prefix = prefix
    }

    /// Reads `{"max_size", "prefix"?}`.
    static func parse(_ reader: inout FieldReader) throws(FieldError) -> PoolGrow {
        guard let maxSize = try reader.int("max_size", in: PoolConfig.Limits.elements) else {
            throw FieldError(field: reader.fieldPath("max_size"), message: "required")
        }
        let prefix = try reader.string("prefix") ?? defaultPrefix
        guard prefix.utf8.count <= 100, Names.isValid(prefix + "1") else {
            throw FieldError(
                field: reader.fieldPath("prefix"),
                message: "must be at most 100 characters that, followed by a number, make a valid name")
        }
        try reader.finish()
        return PoolGrow(maxSize: maxSize, prefix: prefix)
    }
}

/// A pool's configuration (docs/api.md, Pools). Every field has a default, so `{}` is a
/// valid (empty) pool.
package struct PoolConfig: Sendable, Hashable {
    /// `elements` (`[]`): the elements at creation, in their stable order.
    /// Elements added or removed later through their own routes do not
    /// change this (nor what a repeated `PUT` is compared with).
    package var elements: [PoolElementSpec]
    /// `lease_seconds` (60): a lease not recycled by then expires and its
    /// element is free again; 0 = leases never expire.
    package var leaseSeconds: Double
    /// `max_waiting` (1000): fetchers waiting with `wait`; more is 429 `queue_full`.
    package var maxWaiting: Int
    /// `grow` (none): create elements on demand.
    package var grow: PoolGrow?
    /// `idle_seconds` (30): a waiting fetch whose client was not heard of (a
    /// wait parked on it, a call naming it) for this long ends `revoked`,
    /// reason `abandoned`; 0 = never. Only a fetch parked on an instance
    /// that died outlives its wait.
    package var idleSeconds: Double
    /// `claim_seconds` (10): a lease granted while no client waited on it
    /// that no call names within this long is recycled, reason `unclaimed`; 0 = never.
    package var claimSeconds: Double

    /// A config; every argument defaults to the documented default.
    package init(
        elements: [PoolElementSpec] = [], leaseSeconds: Double = 60, maxWaiting: Int = 1000, grow: PoolGrow? = nil,
        idleSeconds: Double = QueueConfig.defaultIdleSeconds, claimSeconds: Double = QueueConfig.defaultClaimSeconds
    ) {
        self.elements = elements
        self.leaseSeconds = leaseSeconds
        self.maxWaiting = maxWaiting
        self.grow = grow
        self.idleSeconds = idleSeconds
        self.claimSeconds = claimSeconds
    }

    /// Allowed ranges.
    package enum Limits {
        /// Elements in one pool (declared, added and grown together), and `grow.max_size`.
        package static let elements = 0...100_000
        /// `lease_seconds`, also a fetch's or extend's (one year).
        package static let seconds = QueueConfig.Limits.seconds
        /// `max_waiting`.
        package static let maxWaiting = QueueConfig.Limits.maxWaiting
    }

    /// Reads a config object; missing fields take their defaults. The caller
    /// calls `reader.finish()` to reject unknown fields.
    package static func parse(_ reader: inout FieldReader) throws(FieldError) -> PoolConfig {
        var config = PoolConfig()
        if let list = try reader.array("elements") {
            config.elements = try parseElements(list, field: reader.fieldPath("elements"))
        }
        let size = try reader.int("size", in: Limits.elements)
        let patch = try PoolPatch.parse(&reader, allowingElements: true)
        config = patch.applied(to: config)
        if let size {
            guard config.elements.isEmpty else {
                throw FieldError(field: reader.fieldPath("size"), message: "give elements or size, not both")
            }
            // Named as grown ones are, so that growing goes on from them.
            let prefix = config.grow?.prefix ?? PoolGrow.defaultPrefix
            config.elements = (0..<size).map { PoolElementSpec(id: "\(prefix)\($0 + 1)") }
        }
        return config
    }

    /// The most elements a pool of `size` can have: `size`, or what `grow` lets it reach.
    package func maxSize(size: Int) -> Int {
        grow.map { max(size, $0.maxSize) } ?? size
    }

    /// The queue engine's config for a pool of `size` elements: one slot per
    /// element, the lease as the hold, no dedup (fetchers have no key).
    func queueConfig(size: Int) -> QueueConfig {
        QueueConfig(
            capacity: size, maxWaiting: maxWaiting, holdSeconds: leaseSeconds, dedup: .off,
            opposites: [], history: LeasePool.history, idleSeconds: idleSeconds, claimSeconds: claimSeconds)
    }

    /// What a `PATCH` changed, for the `updated` event.
    package static func changes(from before: PoolConfig, to after: PoolConfig) -> ConfigChanges {
        var changes = ConfigChanges()
        changes.compare("lease_seconds", before.leaseSeconds, after.leaseSeconds, ConfigChanges.seconds)
        changes.compare("max_waiting", before.maxWaiting, after.maxWaiting, JSONValue.int)
        changes.compare("grow", before.grow, after.grow) { grow in
            grow.map { .object([("max_size", .int($0.maxSize)), ("prefix", .string($0.prefix))]) } ?? .null
        }
        changes.compare("idle_seconds", before.idleSeconds, after.idleSeconds, ConfigChanges.seconds)
        changes.compare("claim_seconds", before.claimSeconds, after.claimSeconds, ConfigChanges.seconds)
        return changes
    }

    /// Each entry is an id or `{"id", "data"?}`; ids are unique.
    static func parseElements(_ list: [JSONValue], field: String) throws(FieldError) -> [PoolElementSpec] {
        guard list.count <= Limits.elements.upperBound else {
            throw FieldError(field: field, message: "at most \(Limits.elements.upperBound) elements")
        }
        var specs: [PoolElementSpec] = []
        var seen = Set<String>()
        for (i, entry) in list.enumerated() {
            let path = "\(field)[\(i)]"
            let spec: PoolElementSpec
            switch entry {
            case .string(let id):
                spec = PoolElementSpec(id: id)
            case .object:
                var r = try FieldReader(entry, path: path)
                guard let id = try r.string("id") else {
                    throw FieldError(field: r.fieldPath("id"), message: "required")
                }
                spec = PoolElementSpec(id: id, data: r.value("data"))
                try r.finish()
            default:
                throw FieldError(field: path, message: "must be an id or an object {\"id\", \"data\"}")
            }
            guard Names.isValid(spec.id) else {
                throw FieldError(
                    field: path, message: "'\(spec.id)' is not a valid name (^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$)")
            }
            guard seen.insert(spec.id).inserted else {
                throw FieldError(field: path, message: "duplicate id '\(spec.id)'")
            }
            specs.append(spec)
        }
        return specs
    }
}

/// A change to a pool's config (`PATCH`). Elements change through their own
/// routes (`PUT`/`DELETE …/elements/{id}`), not here.
package struct PoolPatch: Sendable, Equatable {
    /// `lease_seconds`: applies to leases granted or extended from now on.
    package var leaseSeconds: Double?
    /// `max_waiting`: lowering it refuses new waiting fetchers, it never removes any.
    package var maxWaiting: Int?
    /// `grow`: replaces the whole object; a larger `max_size` serves waiting fetchers at once.
    package var grow: PoolGrow?
    /// `idle_seconds`: applies to the checks due from now on.
    package var idleSeconds: Double?
    /// `claim_seconds`: applies to grants from now on.
    package var claimSeconds: Double?

    /// A patch naming only the given fields.
    package init(
        leaseSeconds: Double? = nil, maxWaiting: Int? = nil, grow: PoolGrow? = nil, idleSeconds: Double? = nil,
        claimSeconds: Double? = nil
    ) {
        self.leaseSeconds = leaseSeconds
        self.maxWaiting = maxWaiting
        self.grow = grow
        self.idleSeconds = idleSeconds
        self.claimSeconds = claimSeconds
    }

    /// Every mutable field of `config` (a declared pool brought in line with its config file).
    package init(_ config: PoolConfig) {
        self.init(
            leaseSeconds: config.leaseSeconds, maxWaiting: config.maxWaiting, grow: config.grow,
            idleSeconds: config.idleSeconds, claimSeconds: config.claimSeconds)
    }

    /// Reads `lease_seconds`, `max_waiting`, `grow`, `idle_seconds`, `claim_seconds`, none required. The caller
    /// calls `reader.finish()`.
    package static func parse(_ reader: inout FieldReader) throws(FieldError) -> PoolPatch {
        try parse(&reader, allowingElements: false)
    }

    static func parse(_ reader: inout FieldReader, allowingElements: Bool) throws(FieldError) -> PoolPatch {
        if !allowingElements && reader.has("elements") {
            throw FieldError(
                field: reader.fieldPath("elements"),
                message: "elements change with PUT or DELETE /v1/pools/{name}/elements/{id}, not PATCH")
        }
        var p = PoolPatch()
        p.leaseSeconds = try reader.duration("lease_seconds")
        p.maxWaiting = try reader.int("max_waiting", in: PoolConfig.Limits.maxWaiting)
        if var grow = try reader.object("grow") { p.grow = try PoolGrow.parse(&grow) }
        p.idleSeconds = try reader.duration("idle_seconds")
        p.claimSeconds = try reader.duration("claim_seconds")
        return p
    }

    /// `config` with the fields present in the patch replaced.
    func applied(to config: PoolConfig) -> PoolConfig {
        var c = config
        if let leaseSeconds { c.leaseSeconds = leaseSeconds }
        if let maxWaiting { c.maxWaiting = maxWaiting }
        if let grow { c.grow = grow }
        if let idleSeconds { c.idleSeconds = idleSeconds }
        if let claimSeconds { c.claimSeconds = claimSeconds }
        return c
    }
}
