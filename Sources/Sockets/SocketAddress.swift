import Foundation

/// An IPv4 or IPv6 socket address: what the server binds and the client
/// connects to.
package struct SocketAddress {
    private var storage = sockaddr_storage()
    /// The length of the `sockaddr` in `storage`.
    private(set) var length: socklen_t
    /// `AF_INET` or `AF_INET6`.
    package private(set) var family: Int32

    /// True for an IPv6 address.
    package var isIPv6: Bool { family == AF_INET6 }

    /// Copies `length` bytes of a `sockaddr` (from `getaddrinfo`).
    package init?(copying address: UnsafePointer<sockaddr>, length: socklen_t, family: Int32) {
        guard family == AF_INET || family == AF_INET6, Int(length) <= MemoryLayout<sockaddr_storage>.size else {
            return nil
        }
        self.length = length
        self.family = family
        withUnsafeMutableBytes(of: &storage) { dst in
            dst.copyMemory(from: UnsafeRawBufferPointer(start: address, count: Int(length)))
        }
    }

    private init<Address>(_ address: Address, family: Int32) {
        self.length = socklen_t(MemoryLayout<Address>.size)
        self.family = family
        withUnsafeMutableBytes(of: &storage) { dst in withUnsafeBytes(of: address) { dst.copyMemory(from: $0) } }
    }

    /// An IPv4 literal (`127.0.0.1`), or nil.
    package static func ipv4(_ literal: String, port: UInt16) -> SocketAddress? {
        var v4 = sockaddr_in()
        guard inet_pton(AF_INET, literal, &v4.sin_addr) == 1 else { return nil }
        v4.sin_family = sa_family_t(AF_INET)
        v4.sin_port = port.bigEndian
        return SocketAddress(v4, family: AF_INET)
    }

    /// An IPv6 literal (`::1`, brackets allowed), or nil.
    package static func ipv6(_ literal: String, port: UInt16) -> SocketAddress? {
        var v6 = sockaddr_in6()
        let bare = literal.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        guard inet_pton(AF_INET6, bare, &v6.sin6_addr) == 1 else { return nil }
        v6.sin6_family = sa_family_t(AF_INET6)
        v6.sin6_port = port.bigEndian
        return SocketAddress(v6, family: AF_INET6)
    }

    /// Calls `body` with a pointer to the address and its length, valid only inside it.
    package func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        withUnsafePointer(to: storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
        }
    }
}
