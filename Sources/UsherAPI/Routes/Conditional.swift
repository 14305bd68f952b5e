import HTTPServer

/// The entity tags an `If-None-Match` names, quotes and `W/` taken off (weak
/// tags compare as strong ones for it, RFC 9110 §13.1.2); `*` names any.
struct HeldTags: Sendable {
    var tags: Set<Substring> = []
    var any = false

    /// Nil when the request has no `If-None-Match`.
    init?(_ request: HTTPRequest) {
        guard let header = request.header("if-none-match") else { return nil }
        for part in header.split(separator: ",") {
            var tag = part.drop { $0 == " " || $0 == "\t" }
            while let last = tag.last, last == " " || last == "\t" { tag = tag.dropLast() }
            if tag == "*" { any = true }
            if tag.hasPrefix("W/") { tag = tag.dropFirst(2) }
            if tag.count >= 2, tag.first == "\"", tag.last == "\"" { tags.insert(tag.dropFirst().dropLast()) }
        }
    }

    /// Whether the client holds the representation tagged `tag` (unquoted).
    func holds(_ tag: String) -> Bool { any || tags.contains(Substring(tag)) }
}

/// An answer that does not change while the process runs (the dashboard's
/// files, the OpenAPI document): its `ETag` is a hash of its body, and an
/// `If-None-Match` naming it is answered 304 without the body.
struct FixedAnswer: Sendable {
    private let tag: String
    private let full: HTTPResponse
    private let notModified: HTTPResponse

    init(contentType: String, headers: [(name: String, value: String)] = [], body: [UInt8]) {
        // FNV-1a, 64 bits: the tag only has to change with the bytes.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in body { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        tag = String(hash, radix: 16)
        let validated = Reply.validated + [("ETag", "\"\(tag)\"")] + headers
        full = HTTPResponse(status: 200, headers: [("Content-Type", contentType)] + validated, body: body)
        notModified = HTTPResponse(status: 304, headers: validated)
    }

    func answer(_ request: HTTPRequest) -> HTTPResponse {
        HeldTags(request)?.holds(tag) == true ? notModified : full
    }
}
