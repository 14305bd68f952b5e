/// The body of `POST /v1/windows/{w}/show`.
package struct ShowRequest: Sendable, Equatable {
    /// Client-supplied id (a valid name); an id that already exists returns that item.
    package var id: String?
    /// Dedup key (1–256 characters): a new item merges into a queued one with the same key.
    package var key: String?
    /// What to show; Usher only stores and returns these.
    package var title: String?
    package var message: String?
    /// Any JSON, returned as given.
    package var payload: JSONValue?
    /// Higher is shown first; FIFO within a priority.
    package var priority: Int
    /// Overrides the window's `display_seconds`; 0 pins the item until dismissed.
    package var displaySeconds: Double?
    /// Queue the item only after this many seconds (the queue engine's delay).
    package var delaySeconds: Double?

    /// A request; only what is given differs from `{}`.
    package init(
        id: String? = nil, key: String? = nil, title: String? = nil, message: String? = nil,
        payload: JSONValue? = nil, priority: Int = 0, displaySeconds: Double? = nil, delaySeconds: Double? = nil
    ) {
        self.id = id
        self.key = key
        self.title = title
        self.message = message
        self.payload = payload
        self.priority = priority
        self.displaySeconds = displaySeconds
        self.delaySeconds = delaySeconds
    }

    /// Reads `id, key, title, message, payload, priority, display_seconds,
    /// delay_seconds`. The caller calls `reader.finish()`.
    package static func parse(_ reader: inout FieldReader) throws(FieldError) -> ShowRequest {
        var r = ShowRequest()
        r.id = try reader.name("id")
        r.key = try reader.key("key")
        r.title = try reader.string("title")
        r.message = try reader.string("message")
        r.payload = reader.value("payload")
        r.priority = try reader.int("priority", in: QueueConfig.Limits.priority) ?? 0
        r.displaySeconds = try reader.duration("display_seconds")
        r.delaySeconds = try reader.duration("delay_seconds")
        return r
    }

    /// The same request as a queue visitor: no action, the display time as
    /// its hold, and what to show packed into the visitor's payload.
    package var visitorRequest: VisitorRequest {
        VisitorRequest(
            id: id, key: key, action: nil,
            payload: WindowContent(title: title, message: message, payload: payload).stored,
            priority: priority, holdSeconds: displaySeconds, delaySeconds: delaySeconds)
    }
}

/// What an item shows, as the engine stores it in the visitor's payload.
struct WindowContent: Sendable, Equatable {
    var title: String?
    var message: String?
    var payload: JSONValue?

    init(title: String?, message: String?, payload: JSONValue?) {
        self.title = title
        self.message = message
        self.payload = payload
    }

    /// Unpacks `stored`.
    init(stored: JSONValue?) {
        if case .string(let t)? = stored?["title"] { title = t }
        if case .string(let m)? = stored?["message"] { message = m }
        if let p = stored?["payload"], !p.isNull { payload = p }
    }

    var stored: JSONValue {
        .object([
            ("title", title.map(JSONValue.string) ?? .null),
            ("message", message.map(JSONValue.string) ?? .null),
            ("payload", payload ?? .null),
        ])
    }
}
