import Foundation
import Locking

#if canImport(Glibc)
    import Glibc
#endif

/// One connection in subscribe mode, on a thread of its own, handing what it
/// receives to `handler` (on that thread: the handler must be quick). It
/// subscribes to channels by name (`SUBSCRIBE`) and by pattern (`PSUBSCRIBE`,
/// subscribed after the names). After a lost connection it reconnects with
/// back-off and subscribes again to every channel and pattern; each
/// confirmation arrives as `.subscribed`, which tells a waiter that messages
/// published meanwhile may have been missed. On a cluster it asks for the
/// endpoint at each connect, so it can move to another node (a `PUBLISH`
/// reaches the subscribers of every node). A connection
/// silent for `healthCheckSeconds` is sent a `PING`; no answer within as
/// long again counts as lost (a stopped server, a cut network).
///
/// Call `stop()` when done: the thread keeps the subscriber alive until then.
package final class RedisSubscriber: Sendable {
    package enum Event: Sendable, Hashable {
        /// The server confirmed a subscription to a channel or a pattern (after every connect too).
        case subscribed(channel: String)
        /// A message on `channel` (for a pattern subscription, the channel that matched).
        case message(channel: String, payload: [UInt8])
        /// The connection was lost or could not be made; it retries by itself.
        case disconnected(reason: String)
    }

    private struct State {
        var channels: Set<String> = []
        var patterns: Set<String> = []
        var stopped = false
    }

    /// Where to connect, asked at every attempt.
    private let nextEndpoint: @Sendable () -> RedisEndpoint
    private let connectTimeout: Double
    private let healthCheckMilliseconds: Int32
    private let handler: @Sendable (Event) -> Void
    private let state = Locked(State())
    /// A pipe whose write end wakes the thread out of `poll` (changes, stop).
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let finished = DispatchSemaphore(value: 0)

    /// Starts the thread; it connects at once and subscribes to `channels`
    /// and `patterns` (glob-style, as `PSUBSCRIBE` reads them).
    /// Throws only when the process is out of file descriptors.
    package convenience init(
        endpoint: RedisEndpoint, connectTimeoutSeconds: Double, healthCheckSeconds: Double = 5,
        channels: [String] = [], patterns: [String] = [], handler: @escaping @Sendable (Event) -> Void
    ) throws(RedisError) {
        try self.init(
            endpoints: { endpoint }, connectTimeoutSeconds: connectTimeoutSeconds,
            healthCheckSeconds: healthCheckSeconds, channels: channels, patterns: patterns, handler: handler)
    }

    /// `init`, connecting each time to the endpoint `endpoints` answers then.
    package init(
        endpoints: @escaping @Sendable () -> RedisEndpoint, connectTimeoutSeconds: Double,
        healthCheckSeconds: Double = 5, channels: [String] = [], patterns: [String] = [],
        handler: @escaping @Sendable (Event) -> Void
    ) throws(RedisError) {
        self.nextEndpoint = endpoints
        self.connectTimeout = connectTimeoutSeconds
        self.healthCheckMilliseconds = Int32(clamping: Int((healthCheckSeconds * 1000).rounded(.up)))
        self.handler = handler
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw .unavailable("no pipe for the subscriber: errno \(errno)") }
        _ = fcntl(fds[0], F_SETFL, O_NONBLOCK)
        _ = fcntl(fds[1], F_SETFL, O_NONBLOCK)
        wakeRead = fds[0]
        wakeWrite = fds[1]
        state.withLock {
            $0.channels = Set(channels)
            $0.patterns = Set(patterns)
        }
        let thread = Thread { [self] in run() }
        thread.name = "usher.redis.subscriber"
        thread.start()
    }

    /// Adds channels; sent at once when connected.
    func subscribe(_ channels: [String]) {
        state.withLock { $0.channels.formUnion(channels) }
        wake()
    }

    /// Removes channels.
    func unsubscribe(_ channels: [String]) {
        state.withLock { $0.channels.subtract(channels) }
        wake()
    }

    /// Closes the connection and ends the thread; returns once it has ended.
    package func stop() {
        let first = state.withLock { state in
            defer { state.stopped = true }
            return !state.stopped
        }
        guard first else { return }
        wake()
        finished.wait()
        close(wakeRead)
        close(wakeWrite)
    }

    private func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    private var isStopped: Bool { state.withLock { $0.stopped } }

    private func run() {
        defer { finished.signal() }
        var backoff = RedisBackoff()
        while !isStopped {
            do {
                let endpoint = nextEndpoint()
                let context = try HiredisContext.connect(
                    to: endpoint, connectTimeout: connectTimeout, commandTimeout: connectTimeout,
                    owner: .currentThread)
                try serve(context, at: endpoint, backoff: &backoff)
            } catch {
                if isStopped { return }
                handler(.disconnected(reason: error.description))
                pause(for: backoff.next())
            }
        }
    }

    /// Waits `delay`, or less when woken.
    private func pause(for delay: Duration) {
        var fd = pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)
        _ = poll(&fd, 1, Int32(delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000))
        drainWakePipe()
    }

    private func drainWakePipe() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(wakeRead, &buffer, buffer.count) > 0 {}
    }

    /// Keeps the subscriptions in step with `channels` and delivers what
    /// arrives, until the connection fails (throws) or `stop()`. An error
    /// reply (a refused SUBSCRIBE: ACL, LOADING, MASTERDOWN) fails it too, so
    /// that it subscribes again after a back-off; a confirmation ends the back-off.
    private func serve(
        _ context: HiredisContext, at endpoint: RedisEndpoint, backoff: inout RedisBackoff
    ) throws(RedisError) {
        var active: Set<String> = []
        var activePatterns: Set<String> = []
        var awaitingPong = false
        while true {
            let (wanted, wantedPatterns, stopped) = state.withLock { ($0.channels, $0.patterns, $0.stopped) }
            if stopped { return }
            let names = try Self.follow(context, wanted: wanted, active: active, verbs: ("SUBSCRIBE", "UNSUBSCRIBE"))
            let patterns = try Self.follow(
                context, wanted: wantedPatterns, active: activePatterns, verbs: ("PSUBSCRIBE", "PUNSUBSCRIBE"))
            if names || patterns { try context.flush() }
            active = wanted
            activePatterns = wantedPatterns
            while let reply = try context.bufferedReply() {
                awaitingPong = false
                if let message = reply.errorMessage { throw .unavailable("Redis refused to subscribe: \(message)") }
                let kind = reply.array?.first?.string
                if kind == "subscribe" || kind == "psubscribe" { backoff.reset() }
                deliver(reply)
            }
            var fds = [
                pollfd(fd: context.raw.pointee.fd, events: Int16(POLLIN), revents: 0),
                pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
            ]
            let ready = poll(&fds, 2, healthCheckMilliseconds)
            guard ready >= 0 || errno == EINTR else { throw .unavailable("poll: errno \(errno)") }
            if ready == 0 {
                if awaitingPong { throw .unavailable("no answer to PING from \(endpoint.host):\(endpoint.port)") }
                try context.append([Array("PING".utf8)])
                try context.flush()
                awaitingPong = true
            }
            if fds[1].revents != 0 { drainWakePipe() }
            if fds[0].revents != 0 { try context.read() }
        }
    }

    /// Appends the commands that take the subscriptions from `active` to
    /// `wanted` (`verbs`: subscribe, unsubscribe); true when there were any.
    private static func follow(
        _ context: HiredisContext, wanted: Set<String>, active: Set<String>, verbs: (String, String)
    ) throws(RedisError) -> Bool {
        let added = wanted.subtracting(active).sorted()
        let removed = active.subtracting(wanted).sorted()
        if !added.isEmpty { try context.append(([verbs.0] + added).map { Array($0.utf8) }) }
        if !removed.isEmpty { try context.append(([verbs.1] + removed).map { Array($0.utf8) }) }
        return !added.isEmpty || !removed.isEmpty
    }

    private func deliver(_ reply: RedisReply) {
        guard let parts = reply.array, let kind = parts.first?.string else { return }
        switch kind {
        case "message" where parts.count == 3:
            guard let channel = parts[1].string, case .bulk(let payload) = parts[2] else { return }
            handler(.message(channel: channel, payload: payload))
        case "pmessage" where parts.count == 4:
            guard let channel = parts[2].string, case .bulk(let payload) = parts[3] else { return }
            handler(.message(channel: channel, payload: payload))
        case "subscribe" where parts.count == 3, "psubscribe" where parts.count == 3:
            if let channel = parts[1].string { handler(.subscribed(channel: channel)) }
        default: break
        }
    }
}
