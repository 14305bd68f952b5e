/// Where a page of a pipeline's ready items or dead list resumes. Items that
/// stay where they are appear exactly once across pages. Clients see it as
/// an opaque `next_cursor` string.
package enum PipelineCursor: Sendable, Equatable {
    /// After this place in hand-out order.
    case ready(priority: Int32, seq: Int64)
    /// After the dead item that arrived with this serial.
    case dead(serial: Int64)

    /// Reads a cursor's text (`r<priority>_<seq>` or `d<serial>`); nil when malformed.
    package init?(_ text: String) {
        guard let tag = text.first else { return nil }
        let rest = text.dropFirst()
        switch tag {
        case "r":
            let parts = rest.split(separator: "_", omittingEmptySubsequences: false)
            guard parts.count == 2, let priority = Int32(parts[0]), let seq = Int64(parts[1]) else { return nil }
            self = .ready(priority: priority, seq: seq)
        case "d":
            guard let serial = Int64(rest) else { return nil }
            self = .dead(serial: serial)
        default:
            return nil
        }
    }

    /// The cursor's text, as `next_cursor` carries it.
    package var text: String {
        switch self {
        case .ready(let priority, let seq): "r\(priority)_\(seq)"
        case .dead(let serial): "d\(serial)"
        }
    }
}
