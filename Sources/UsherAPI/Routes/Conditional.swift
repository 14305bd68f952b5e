import HTTPServer
import Locking
import UsherCore

/// The entity tags an `If-None-Match` names, quotes and `W/` taken off (weak
/// tags compare as strong ones for it, RFC 9110 §13.1.2); `*` names any.
/// Read on the header's bytes when asked, so that a 304 allocates nothing.
struct HeldTags: Sendable {
    private let header: String

    /// Nil when the request has no `If-None-Match`.
    init?(_ request: HTTPRequest) {
        guard let header = request.header("if-none-match") else { return nil }
        self.header = header
    }

    /// Whether the client holds the representation tagged `tag` (unquoted).
    func holds(_ tag: String) -> Bool {
        var header = header
        var tag = tag
        return header.withUTF8 { header in tag.withUTF8 { Self.names($0, in: header) } }
    }

    private static func names(_ tag: UnsafeBufferPointer<UInt8>, in header: UnsafeBufferPointer<UInt8>) -> Bool {
        func isSpace(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        var start = 0
        while start <= header.count {
            var end = start
            while end < header.count, header[end] != UInt8(ascii: ",") { end += 1 }
            var first = start
            var last = end
            while first < last, isSpace(header[first]) { first += 1 }
            while last > first, isSpace(header[last - 1]) { last -= 1 }
            if last - first == 1, header[first] == UInt8(ascii: "*") { return true }
            if last - first >= 2, header[first] == UInt8(ascii: "W"), header[first + 1] == UInt8(ascii: "/") {
                first += 2
            }
            if last - first == tag.count + 2, header[first] == UInt8(ascii: "\""),
                header[last - 1] == UInt8(ascii: "\""),
                header[(first + 1)..<(last - 1)].elementsEqual(tag)
            {
                return true
            }
            start = end + 1
        }
        return false
    }
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

/// The entity tag of a state or an object: the hash of what its body shows
/// (Swift's `Hasher`, seeded per process, so a tag is only ever compared on
/// the instance that made it). Weak when the body also carries what the
/// clock moves (a waiting visitor's estimate), which the hash leaves out: a
/// 304 then says nothing but the estimate has changed.
struct EntityTag: Sendable, Equatable {
    /// The tag without quotes or `W/`.
    let opaque: String
    let weak: Bool

    init(of value: some Hashable, weak: Bool = false) {
        opaque = String(UInt(bitPattern: value.hashValue), radix: 16)
        self.weak = weak
    }

    init(opaque: String, weak: Bool) {
        self.opaque = opaque
        self.weak = weak
    }

    /// The `ETag` header.
    var header: (name: String, value: String) { ("ETag", weak ? "W/\"\(opaque)\"" : "\"\(opaque)\"") }

    /// Whether the request's `If-None-Match` names it.
    func isHeld(by tags: HeldTags?) -> Bool { tags?.holds(opaque) == true }

    /// 304: the client's copy is current.
    var notModified: HTTPResponse { HTTPResponse(status: 304, headers: Reply.validated + [header]) }

    /// The answer to a read of `value`: 304 when the request's
    /// `If-None-Match` names its tag, else `reply` given the `ETag` header.
    static func answer(
        _ value: some Hashable, weak: Bool = false, to request: HTTPRequest,
        _ reply: ([(name: String, value: String)]) -> HTTPResponse
    ) -> HTTPResponse {
        let tag = EntityTag(of: value, weak: weak)
        return tag.isHeld(by: HeldTags(request)) ? tag.notModified : reply([tag.header])
    }
}

/// A resource's last full answer to `GET /v1/{kind}/{name}` while its state
/// is unchanged, so that a state is encoded at most once whatever its
/// readers' number (not one whose body follows the clock). Its bytes are
/// charged to `max_stored_bytes`, and only while that budget is at most half
/// used: what clients store always comes first.
final class AnswerCache: Sendable {
    private struct Kept {
        let tag: EntityTag
        let response: HTTPResponse
    }

    private let kept = Locked<Kept?>(nil)
    private let budget: StorageBudget

    init(budget: StorageBudget) {
        self.budget = budget
    }

    deinit {
        if let bytes = kept.withLock({ $0?.response.body.count }) { budget.release(bytes) }
    }

    /// The kept answer, if it is the one tagged `tag`.
    func answer(tagged tag: EntityTag) -> HTTPResponse? {
        kept.withLock { $0?.tag == tag ? $0?.response : nil }
    }

    /// Keeps `response` in place of the answer kept before.
    func keep(_ response: HTTPResponse, tagged tag: EntityTag) {
        let bytes = response.body.count
        let fits = budget.usedBytes <= budget.limit / 2 - bytes
        if fits {
            do throws(StorageFull) { try budget.reserve(bytes) } catch { return }
        }
        // The answer kept before is stale either way.
        let replaced = kept.withLock { kept -> Int in
            defer { kept = fits ? Kept(tag: tag, response: response) : nil }
            return kept?.response.body.count ?? 0
        }
        budget.release(replaced)
    }
}
