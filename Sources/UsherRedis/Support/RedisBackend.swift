import Foundation
import Locking
import RedisClient
import Synchronization
import UsherCore

/// What hears the notices about one resource (its manager in this process).
package protocol NoticeListener: AnyObject, Sendable {
    /// A notice about this resource, from any instance (this one included),
    /// parsed once for every listener, and as it came (on the subscriber's thread: be quick).
    func receive(_ notice: [String: Any], payload: [UInt8])
    /// Notices may have been missed (the subscriber reconnected): check again.
    func resynchronize()
    /// Whether a notice on the resource's own channel is worth parsing now
    /// (someone here waits on it or records its events); when false it is
    /// dropped unread. Notices on the shared channel are always delivered.
    var wantsNotices: Bool { get }
}

extension NoticeListener {
    package var wantsNotices: Bool { true }
}

/// The Redis side of one Usher process: the command connections, the one
/// subscriber connection that hears every instance's notices, the index of
/// Redis-backed resources, and what `/readyz` says about Redis.
///
/// Notices come on the shared channel `<prefix>notices` (creations,
/// deletions, and the kinds that publish everything there) and on each
/// resource's own channel `<prefix>notices:<kind>:<name>` (one pattern
/// subscription): those are dropped unparsed when their listener has no use
/// for them, so an idle process pays little for another's traffic.
package final class RedisBackend: Sendable {
    /// A resource appeared or vanished in Redis (created or deleted through any instance).
    package enum Membership: Sendable {
        case created(kind: String, name: String)
        case deleted(kind: String, name: String)
        /// The subscriber (re)connected: the whole index should be read again.
        case resynchronize
    }

    package let settings: RedisSettings
    package let channel: String
    /// The pattern of every resource's own channel.
    let resourcePattern: String
    package let time: ScriptTime
    package let clock: any UsherClock
    /// The command connections, used in turn.
    package let connections: RedisConnectionPool
    private let listeners = Locked<[String: any NoticeListener]>([:])
    private let membership: Locked<(@Sendable (Membership) -> Void)?> = Locked(nil)
    /// Why the subscriber is down, or nil while it is connected.
    private let subscriberDown = Locked<String?>("not connected yet")
    private let subscriber: Locked<RedisSubscriber?> = Locked(nil)

    /// `connections` command connections, used in turn. Each batches what
    /// arrives while it waits, so a few carry a process's load: two keep one
    /// free while the other waits on a long call, and cost less CPU per
    /// operation than four (smaller batches, more wake-ups).
    package init(
        settings: RedisSettings, connections: Int = 2, time: ScriptTime = .server, clock: any UsherClock
    ) throws(RedisError) {
        self.settings = settings
        self.channel = ResourceKeys.noticeChannel(prefix: settings.keyPrefix)
        self.resourcePattern = Self.globEscaped(channel + ":") + "*"
        self.time = time
        self.clock = clock
        var made: [RedisConnection] = []
        for _ in 0..<max(1, connections) { made.append(try RedisConnection(settings: settings)) }
        self.connections = RedisConnectionPool(made)
    }

    /// Starts hearing notices; `onMembership` learns of resources created or
    /// deleted by any instance. Connects in the background: Redis may be down.
    package func start(onMembership: @escaping @Sendable (Membership) -> Void) throws(RedisError) {
        membership.withLock { $0 = onMembership }
        let made = try RedisSubscriber(
            endpoint: try settings.endpoint(), connectTimeoutSeconds: settings.connectTimeoutSeconds,
            healthCheckSeconds: 1, channels: [channel], patterns: [resourcePattern]
        ) { [weak self] event in self?.heard(event) }
        subscriber.withLock { $0 = made }
    }

    /// Stops the subscriber (joins its thread).
    package func stopSubscriber() {
        subscriber.withLock { s in
            defer { s = nil }
            return s
        }?.stop()
    }

    /// Stops the subscriber and closes the connections.
    package func stop() async {
        stopSubscriber()
        await connections.close()
    }

    /// The next command connection, in turn.
    package func connection() -> RedisConnection { connections.next() }

    /// The keys of a resource.
    package func keys(kind: String, name: String) -> ResourceKeys {
        ResourceKeys(prefix: settings.keyPrefix, kind: kind, name: name)
    }

    package func register(_ listener: any NoticeListener, kind: String, name: String) {
        listeners.withLock { $0["\(kind):\(name)"] = listener }
    }

    package func unregister(kind: String, name: String) {
        _ = listeners.withLock { $0.removeValue(forKey: "\(kind):\(name)") }
    }

    // MARK: The index of resources

    /// The hash of every Redis-backed resource: `kind:name` → the time it was created.
    private var indexKey: String { "\(settings.keyPrefix)resources" }

    /// Every Redis-backed resource, as (kind, name).
    package func indexedResources() async throws(ScriptFailure) -> [(kind: String, name: String)] {
        let reply = try await command(["HKEYS", indexKey])
        return (reply.array ?? []).compactMap { item in
            guard let text = item.string, let colon = text.firstIndex(of: ":") else { return nil }
            return (String(text[..<colon]), String(text[text.index(after: colon)...]))
        }
    }

    /// How many resources the index holds.
    package func indexedCount() async throws(ScriptFailure) -> Int {
        Int(try await command(["HLEN", indexKey]).int ?? 0)
    }

    /// Records a resource created through this instance and tells every instance.
    package func announceCreated(kind: String, name: String) async throws(ScriptFailure) {
        _ = try await command(["HSET", indexKey, "\(kind):\(name)", "1"])
        _ = try await command(["PUBLISH", channel, Self.membershipNotice(kind: kind, name: name, created: true)])
    }

    /// Forgets a deleted resource (its script published `deleted` already).
    package func announceDeleted(kind: String, name: String) async throws(ScriptFailure) {
        _ = try await command(["HDEL", indexKey, "\(kind):\(name)"])
    }

    /// A plain command; an error reply or no answer is a `ScriptFailure`.
    package func command(_ arguments: [String]) async throws(ScriptFailure) -> RedisReply {
        let reply: RedisReply
        do { reply = try await connection().command(arguments) } catch { throw .unavailable(error.description) }
        if let message = reply.errorMessage { throw .redis(message) }
        return reply
    }

    // MARK: Health

    /// Why Redis-backed resources cannot be served now, or nil: the
    /// subscriber is down, or a `PING` got no answer.
    package func unavailableReason() async -> String? {
        if let down = subscriberDown.withLock({ $0 }) { return "Redis subscriber: \(down)" }
        do {
            let reply = try await connection().command(["PING"])
            if let message = reply.errorMessage { return "Redis answered PING with \(message)" }
            return nil
        } catch {
            return error.description
        }
    }

    // MARK: Notices

    private func heard(_ event: RedisSubscriber.Event) {
        switch event {
        case .subscribed(let what):
            // The pattern is confirmed after the shared channel: both are live now.
            guard what == resourcePattern else { return }
            subscriberDown.withLock { $0 = nil }
            let all = listeners.withLock { Array($0.values) }
            for listener in all { listener.resynchronize() }
            membership.withLock { $0 }?(.resynchronize)
        case .disconnected(let reason):
            subscriberDown.withLock { $0 = reason }
        case .message(let channel, let payload):
            if channel == self.channel {
                deliver(payload)
            } else {
                deliverOwn(payload, key: channel.dropFirst(self.channel.count + 1))
            }
        }
    }

    /// A notice on a resource's own channel: parsed only when its listener wants it.
    private func deliverOwn(_ payload: [UInt8], key: Substring) {
        guard let listener = listeners.withLock({ $0[String(key)] }), listener.wantsNotices,
            let object = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any]
        else { return }
        listener.receive(object, payload: payload)
    }

    /// `text` with the glob characters of `PSUBSCRIBE` escaped.
    static func globEscaped(_ text: String) -> String {
        var out = ""
        for character in text {
            if "*?[]\\^".contains(character) { out.append("\\") }
            out.append(character)
        }
        return out
    }

    private func deliver(_ payload: [UInt8]) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any],
            let kind = object["kind"] as? String, let name = object["name"] as? String
        else { return }
        if object["created"] as? Bool == true {
            membership.withLock { $0 }?(.created(kind: kind, name: name))
            return
        }
        listeners.withLock { $0["\(kind):\(name)"] }?.receive(object, payload: payload)
        if object["deleted"] as? Bool == true {
            membership.withLock { $0 }?(.deleted(kind: kind, name: name))
        }
    }

    /// `{"kind": …, "name": …, "created": true}`.
    static func membershipNotice(kind: String, name: String, created: Bool) -> String {
        let object: [String: Any] = ["kind": kind, "name": name, "created": created]
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}
