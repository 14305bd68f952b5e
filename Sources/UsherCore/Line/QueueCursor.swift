/// Where a page of a queue's (or window's) listed visitors resumes: after a
/// holder (by fence, grant order) or after a place in the waiting line (by
/// priority and arrival). Visitors that stay where they are appear exactly
/// once across pages. Clients see it as an opaque `next_cursor` string.
package enum QueueCursor: Sendable, Hashable {
    /// After the holder granted with this fence.
    case holding(fence: Int64)
    /// After this place in the waiting line.
    case waiting(priority: Int32, seq: Int64)

    /// Reads a cursor's text (`h<fence>` or `w<priority>_<seq>`); nil when malformed.
    package init?(_ text: String) {
        guard let tag = text.first else { return nil }
        let rest = text.dropFirst()
        switch tag {
        case "h":
            guard let fence = Int64(rest) else { return nil }
            self = .holding(fence: fence)
        case "w":
            let parts = rest.split(separator: "_", omittingEmptySubsequences: false)
            guard parts.count == 2, let priority = Int32(parts[0]), let seq = Int64(parts[1]) else { return nil }
            self = .waiting(priority: priority, seq: seq)
        default:
            return nil
        }
    }

    /// The cursor's text, as `next_cursor` carries it.
    package var text: String {
        switch self {
        case .holding(let fence): "h\(fence)"
        case .waiting(let priority, let seq): "w\(priority)_\(seq)"
        }
    }
}
