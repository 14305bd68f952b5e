/// The body of `POST /v1/pools/{p}/fetch`.
package struct FetchRequest: Sendable, Equatable {
    /// The lease's id (a valid name): a retried fetch with the same id
    /// answers the same lease instead of taking a second element.
    package var id: String?
    /// Who holds the lease (1–256 characters), shown with it.
    package var holder: String?
    /// A shorter lease than the pool's; 0 only when the pool's leases never expire.
    package var leaseSeconds: Double?

    package init(id: String? = nil, holder: String? = nil, leaseSeconds: Double? = nil) {
        self.id = id
        self.holder = holder
        self.leaseSeconds = leaseSeconds
    }

    /// Reads `id, holder, lease_seconds`. The caller calls `reader.finish()`.
    package static func parse(_ reader: inout FieldReader) throws(FieldError) -> FetchRequest {
        var r = FetchRequest()
        r.id = try reader.name("id")
        r.holder = try reader.key("holder")
        r.leaseSeconds = try reader.duration("lease_seconds")
        return r
    }

    /// The fetcher as a queue visitor: the lease as its hold, the holder in its payload.
    var visitorRequest: VisitorRequest {
        VisitorRequest(id: id, payload: LeaseNote(holder: holder, element: nil).stored, holdSeconds: leaseSeconds)
    }
}

/// What a lease records beside the engine's visitor, stored in its payload:
/// the holder (from the fetch) and the element (from the grant).
struct LeaseNote: Sendable, Equatable {
    var holder: String?
    var element: String?

    init(holder: String?, element: String?) {
        self.holder = holder
        self.element = element
    }

    /// Unpacks a visitor's payload.
    init(stored: JSONValue?) {
        if case .string(let h)? = stored?["holder"] { holder = h }
        if case .string(let e)? = stored?["element"] { element = e }
    }

    var stored: JSONValue {
        .object([
            ("holder", holder.map(JSONValue.string) ?? .null), ("element", element.map(JSONValue.string) ?? .null),
        ])
    }
}
