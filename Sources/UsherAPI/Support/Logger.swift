import Foundation
import UsherCore

/// How much to log.
public enum LogLevel: String, Sendable, Comparable {
    case debug, info, warn, error

    private var rank: Int {
        switch self {
        case .debug: 0
        case .info: 1
        case .warn: 2
        case .error: 3
        }
    }

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rank < rhs.rank }
}

/// One JSON object per line on stdout: `{"ts", "level", "msg", fields…}`.
public struct Logger: Sendable {
    /// Lines below this level are dropped.
    public var level: LogLevel

    public init(level: LogLevel) { self.level = level }

    /// Writes one line if `level` is enabled.
    public func log(_ level: LogLevel, _ message: String, _ fields: [(String, JSONValue)] = []) {
        guard level >= self.level else { return }
        let line =
            JSONValue.object(
                [
                    ("ts", .string(SystemClock().now().rfc3339)), ("level", .string(level.rawValue)),
                    ("msg", .string(message)),
                ]
                    + fields
            ).jsonString + "\n"
        FileHandle.standardOutput.write(Data(line.utf8))
    }

    public func debug(_ message: String, _ fields: [(String, JSONValue)] = []) { log(.debug, message, fields) }
    public func info(_ message: String, _ fields: [(String, JSONValue)] = []) { log(.info, message, fields) }
    public func warn(_ message: String, _ fields: [(String, JSONValue)] = []) { log(.warn, message, fields) }
    public func error(_ message: String, _ fields: [(String, JSONValue)] = []) { log(.error, message, fields) }
}
