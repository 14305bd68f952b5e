import Foundation
import UsherCore

/// How much to log.
package enum LogLevel: String, Sendable, Comparable {
    case debug, info, warn, error

    private var rank: Int {
        switch self {
        case .debug: 0
        case .info: 1
        case .warn: 2
        case .error: 3
        }
    }

    package static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rank < rhs.rank }
}

/// One JSON object per line on stdout: `{"ts", "level", "msg", fields…}`.
package struct Logger: Sendable {
    /// Lines below this level are dropped.
    var level: LogLevel

    package init(level: LogLevel) { self.level = level }

    /// Writes one line if `level` is enabled.
    func log(_ level: LogLevel, _ message: String, _ fields: [(String, JSONValue)] = []) {
        guard level >= self.level else { return }
        let line = JSONValue.object(
            [
                ("ts", .string(SystemClock().now().rfc3339)), ("level", .string(level.rawValue)),
                ("msg", .string(message)),
            ]
                + fields)
        FileHandle.standardOutput.write(Data(Wire.bytes(line) + [0x0A]))
    }

    func debug(_ message: String, _ fields: [(String, JSONValue)] = []) { log(.debug, message, fields) }
    func info(_ message: String, _ fields: [(String, JSONValue)] = []) { log(.info, message, fields) }
    func warn(_ message: String, _ fields: [(String, JSONValue)] = []) { log(.warn, message, fields) }
    func error(_ message: String, _ fields: [(String, JSONValue)] = []) { log(.error, message, fields) }
}
