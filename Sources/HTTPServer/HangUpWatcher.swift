import CMicroHTTPD
import Foundation
import Glibc
import Locking
import Synchronization

/// Watches the sockets of parked requests for the client hanging up.
///
/// libmicrohttpd does not poll a suspended connection, so it cannot see its
/// client leave. One thread waits on an epoll set of our own holding only the
/// parked sockets (`EPOLLRDHUP`, `EPOLLHUP`, `EPOLLERR`; not readability, so a
/// pipelined request does not count), and tells the request's owner at once.
final class HangUpWatcher: @unchecked Sendable {
    private let epoll: Int32
    /// Parked sockets and who to tell. A socket leaves the set before its
    /// connection is resumed, so its number cannot be reused while listed.
    private let watched = Locked<[Int32: @Sendable () -> Void]>([:])
    private let stopping = Atomic<Bool>(false)
    private var thread: Thread?

    init() {
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        let thread = Thread { [self] in run() }
        thread.name = "usher.http.hangups"
        thread.stackSize = 64 * 1024
        self.thread = thread
        thread.start()
    }

    /// Calls `hungUp` (on the watcher's thread) once the client of `socket` leaves.
    func watch(_ socket: Int32, hungUp: @escaping @Sendable () -> Void) {
        guard socket >= 0, epoll >= 0 else { return }
        watched.withLock { $0[socket] = hungUp }
        var event = epoll_event()
        event.events = EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue | EPOLLONESHOT.rawValue
        event.data.fd = socket
        if epoll_ctl(epoll, EPOLL_CTL_ADD, socket, &event) != 0 {
            watched.withLock { _ = $0.removeValue(forKey: socket) }
        }
    }

    /// Stops watching `socket`; call before its connection is resumed.
    func forget(_ socket: Int32) {
        guard socket >= 0 else { return }
        let listed = watched.withLock { $0.removeValue(forKey: socket) != nil }
        if listed { _ = epoll_ctl(epoll, EPOLL_CTL_DEL, socket, nil) }
    }

    /// Parked sockets being watched.
    var count: Int { watched.withLock { $0.count } }

    /// Ends the thread (within its 100 ms wait).
    func stop() {
        stopping.store(true, ordering: .releasing)
    }

    deinit {
        if epoll >= 0 { close(epoll) }
    }

    private func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 64)
        while !stopping.load(ordering: .acquiring) {
            let n = epoll_wait(epoll, &events, Int32(events.count), 100)
            guard n > 0 else { continue }
            for event in events[0..<Int(n)] {
                let socket = event.data.fd
                let hungUp = watched.withLock { $0.removeValue(forKey: socket) }
                guard let hungUp else { continue }
                _ = epoll_ctl(epoll, EPOLL_CTL_DEL, socket, nil)
                hungUp()
            }
        }
    }

    /// True when the peer of `socket` has closed its side: a last look just
    /// before an answer is handed over.
    static func peerHasClosed(_ socket: Int32) -> Bool {
        guard socket >= 0 else { return false }
        var byte: UInt8 = 0
        let n = recv(socket, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    }
}
