import HTTPServer
import UsherCore

/// `max_response_bytes` applied to the lists in answers: a page ends early
/// when the next element would not fit, and `next_cursor` says where to go on.
enum Paging {
    /// `limit` when a request gives none: the same for every state page and list.
    static let defaultLimit = 100

    /// Room kept for `next_cursor` itself (a resource name is up to 128 bytes).
    static let cursorRoom = 192

    /// How many leading elements, whose encoded sizes are `sizes`, fit in
    /// `maxBytes` after `envelope` bytes (each costs its size and a comma).
    /// At least one, so that every page moves on.
    static func fitting(_ sizes: some Sequence<Int>, envelope: Int, maxBytes: Int) -> Int {
        var used = envelope + cursorRoom
        var n = 0
        for size in sizes {
            used += size + 1
            if used > maxBytes && n > 0 { break }
            n += 1
        }
        return n
    }

    /// The `cursor` query parameter, its check passed, read with `parse`,
    /// else 400 naming it.
    static func cursor<C>(_ query: Query, _ parse: (String) -> C?) throws(APIError) -> C? {
        guard let raw = query["cursor"] else { return nil }
        guard let position = PageCursor.open(raw) else { throw foreignCursor }
        // The start (`limit=0` on a first page answers it).
        if position.isEmpty { return nil }
        guard let cursor = parse(position) else { throw foreignCursor }
        return cursor
    }

    private static let foreignCursor = APIError.badRequest(
        "cursor must be a next_cursor this server answered", field: "cursor")

    /// Where a page that lists nothing (`limit=0`) resumes: the request's
    /// own cursor's position, or the start ("").
    static func resume(_ call: Call) -> String {
        call.request.query.first { $0.name == "cursor" }.flatMap { PageCursor.open($0.value) } ?? ""
    }

    /// At least a visitor's encoded size, without walking its payload twice:
    /// its fields in at most 512 bytes, every string byte escaped to at most
    /// 6, and the payload at most 6 bytes per byte `StorageBudget` counts.
    static func bound(_ v: VisitorView) -> Int {
        var strings = v.id.utf8.count + v.queue.utf8.count + (v.key?.utf8.count ?? 0) + (v.action?.utf8.count ?? 0)
        strings += (v.mergedInto?.utf8.count ?? 0) + (v.cancelledWith?.utf8.count ?? 0) + (v.reason?.utf8.count ?? 0)
        return 512 + 6 * (strings + StorageBudget.size(of: v.payload))
    }

    /// At least a queue state's size without its lists: name, config, counts.
    static func envelopeBound(_ s: QueueState) -> Int {
        let opposites = s.config.opposites.reduce(0) { $0 + $1.reduce(16) { $0 + 16 + $1.utf8.count } }
        return 2048 + 6 * (s.name.utf8.count + opposites)
    }

    /// Cuts a list of `items` at `maxBytes` (after `envelope` bytes), `size`
    /// being an element's encoded size; answers `next_cursor`: the cursor
    /// after the last element kept when the page was cut or `more` follow
    /// (`resume` when it kept none).
    static func cut<T>(
        _ items: inout [T], cursors: [String], more: Bool, resume: String, envelope: Int, maxBytes: Int,
        size: (T) -> Int
    ) -> String? {
        let n = fitting(items.lazy.map(size), envelope: envelope, maxBytes: maxBytes)
        if n < items.count {
            items.removeLast(items.count - n)
            return cursors[n - 1]
        }
        return more ? cursors.last ?? resume : nil
    }

    /// A page as an answer: encoded whole when it fits in `maxBytes` (the
    /// usual case, measured once); otherwise its `list` is cut where the
    /// bytes run out and `nextCursor` set there, each element measured.
    static func reply<Page, Item, Body: Encodable>(
        _ page: Page, list: WritableKeyPath<Page, [Item]>, nextCursor: WritableKeyPath<Page, String?>,
        cursors: [String], more: Bool, resume: String, maxBytes: Int, status: Int = 200,
        headers: [(name: String, value: String)] = [], body: (Page) -> Body, itemSize: (Item) -> Int
    ) -> HTTPResponse {
        var page = page
        page[keyPath: nextCursor] = more ? cursors.last ?? resume : nil
        let whole = Wire.bytes(body(page))
        if whole.count + cursorRoom <= maxBytes {
            return HTTPResponse(status: status, headers: Reply.jsonHeaders(headers), body: whole)
        }
        var envelope = page
        envelope[keyPath: list] = []
        page[keyPath: nextCursor] = cut(
            &page[keyPath: list], cursors: cursors, more: more, resume: resume,
            envelope: Wire.bytes(body(envelope)).count,
            maxBytes: maxBytes, size: itemSize)
        return Reply.encoded(body(page), status: status, headers: headers)
    }

    /// The leading `items` that fit in `room` bytes, each costing its `size`
    /// and a comma: for a list shown beside the paged one (the first delayed
    /// visitors, the first waiting fetches), which gets the room that list leaves.
    static func preview<T>(_ items: [T], room: Int, size: (T) -> Int) -> [T] {
        var used = 0
        var n = 0
        for item in items {
            used += size(item) + 1
            if used > room { break }
            n += 1
        }
        return Array(items.prefix(n))
    }

    /// Cuts a queue's page at `maxBytes` and sets its `next_cursor`; the
    /// delayed visitors get the room the page leaves. A page whose upper
    /// bound fits (the usual case) is not measured.
    static func cut(_ state: inout QueueState, resume: String, maxBytes: Int) {
        let holdersBound = state.holding.reduce(envelopeBound(state)) { $0 + Self.bound($1) + 1 }
        let listedBound = state.waiting.reduce(holdersBound) { $0 + Self.bound($1) + 1 }
        if state.delayed.reduce(listedBound, { $0 + Self.bound($1) + 1 }) + cursorRoom <= maxBytes {
            if state.more { state.nextCursor = state.cursors.last?.text ?? resume }
            return
        }
        let delayed = state.delayed
        state.delayed = []
        cutListed(&state, resume: resume, maxBytes: maxBytes)
        if !delayed.isEmpty {
            let room = maxBytes - cursorRoom - Wire.bytes(QueueStateBody(state)).count
            state.delayed = preview(delayed, room: room) { Wire.bytes(VisitorBody($0)).count }
        }
    }

    /// Cuts a queue's holders and waiting visitors at `maxBytes`, measured.
    private static func cutListed(_ state: inout QueueState, resume: String, maxBytes: Int) {
        var envelope = state
        envelope.holding = []
        envelope.waiting = []
        let listed = state.holding + state.waiting
        let n = fitting(
            listed.lazy.map { Wire.bytes(VisitorBody($0)).count }, envelope: Wire.bytes(QueueStateBody(envelope)).count,
            maxBytes: maxBytes)
        if n < listed.count {
            if n <= state.holding.count {
                state.holding.removeLast(state.holding.count - n)
                state.waiting = []
            } else {
                state.waiting.removeLast(listed.count - n)
            }
            state.nextCursor = state.cursors[n - 1].text
        } else if state.more {
            state.nextCursor = state.cursors.last?.text ?? resume
        }
    }
}

/// What `next_cursor` carries: a position in a list and a check of it, so
/// that a cursor this server did not make (typed by hand, cut short, a
/// name or an id) is refused rather than read as a place in the list.
enum PageCursor {
    /// `position` with its check appended.
    static func seal(_ position: String) -> String {
        "\(position).\(check(position))"
    }

    /// The position of a sealed cursor; nil when its check fails.
    static func open(_ cursor: String) -> String? {
        guard let dot = cursor.lastIndex(of: ".") else { return nil }
        let position = String(cursor[..<dot])
        return cursor[cursor.index(after: dot)...] == check(position) ? position : nil
    }

    /// Eight hex digits of FNV-1a over the position: a typo or a guess
    /// passes one time in four billion.
    private static func check(_ position: String) -> String {
        var hash: UInt32 = 2_166_136_261
        for byte in ("usher-cursor:" + position).utf8 {
            hash = (hash ^ UInt32(byte)) &* 16_777_619
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex
    }
}
