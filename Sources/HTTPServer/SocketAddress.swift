import Foundation

/// An IPv4 or IPv6 socket address parsed from a literal host.
struct SocketAddress {
    private var storage = sockaddr_storage()
    /// True for an IPv6 address.
    private(set) var isIPv6 = false

    init(host: String, port: UInt16) throws(HTTPServer.StartError) {
        let literal = host == "localhost" ? "127.0.0.1" : host
        var v4 = sockaddr_in()
        var v6 = sockaddr_in6()
        if inet_pton(AF_INET, literal, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = port.bigEndian
            withUnsafeMutableBytes(of: &storage) { dst in
                withUnsafeBytes(of: v4) { dst.copyMemory(from: $0) }
            }
        } else if inet_pton(AF_INET6, literal.trimmingCharacters(in: CharacterSet(charactersIn: "[]")), &v6.sin6_addr) == 1 {
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = port.bigEndian
            isIPv6 = true
            withUnsafeMutableBytes(of: &storage) { dst in
                withUnsafeBytes(of: v6) { dst.copyMemory(from: $0) }
            }
        } else {
            throw HTTPServer.StartError(description: "host \(host) is not an IPv4 or IPv6 address")
        }
    }

    /// Calls `body` with a pointer to the address, valid only inside it.
    mutating func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>) -> T) -> T {
        withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1, body)
        }
    }
}
