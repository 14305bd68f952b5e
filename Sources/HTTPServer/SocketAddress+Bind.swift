import Foundation
import Sockets

extension SocketAddress {
    /// The address the server binds: an IPv4 or IPv6 literal, or `localhost`
    /// (127.0.0.1).
    init(host: String, port: UInt16) throws(HTTPServer.StartError) {
        let literal = host == "localhost" ? "127.0.0.1" : host
        guard let address = Self.ipv4(literal, port: port) ?? Self.ipv6(literal, port: port) else {
            throw HTTPServer.StartError(description: "host \(host) is not an IPv4 or IPv6 address")
        }
        self = address
    }
}

extension HTTPServer {
    /// Throws what `start()` throws for a `host` that is not an address it can
    /// bind (an IPv4 or IPv6 literal, or `localhost`), without binding.
    package static func checkHost(_ host: String) throws(StartError) {
        _ = try SocketAddress(host: host, port: 0)
    }
}
