/// What can go wrong talking to Redis.
package enum RedisError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The URL or settings are not usable (the message says why).
    case invalidConfiguration(String)
    /// No connection: connecting failed, or an I/O error or timeout killed it.
    /// The next command reconnects (after a back-off when connecting failed).
    case unavailable(String)
    /// The server refused `AUTH` or `SELECT` after connecting.
    case handshake(String)
    /// The server answered with an error reply.
    case reply(String)

    /// The message without the kind's prefix.
    var message: String {
        switch self {
        case .invalidConfiguration(let m), .unavailable(let m), .handshake(let m), .reply(let m): m
        }
    }

    package var description: String {
        switch self {
        case .invalidConfiguration(let m): "invalid Redis configuration: \(m)"
        case .unavailable(let m): "Redis unavailable: \(m)"
        case .handshake(let m): "Redis refused the connection set-up: \(m)"
        case .reply(let m): "Redis error: \(m)"
        }
    }
}
