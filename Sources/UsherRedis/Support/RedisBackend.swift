import Foundation
import Locking
import RedisClient
import Synchronization
import UsherCore

/// What hears the notices about one resource (its manager in this process).
package protocol NoticeListener: AnyObject, Sendable {
    /// A notice about this resource as it came, from any instance (this one
    /// included), on the subscriber's thread: be quick.
    func receive(_ payload: [UInt8])
    /// Notices may have been missed (the subscriber reconnected): check again.
    func resynchronize()
    /// Whether a notice on the resource's own channel is worth reading now
    /// (someone here waits on it or records its events); when false it is
    /// dropped unread. Deletions, on the shared channel, are always delivered.
    var wantsNotices: Bool { get }
}

extension NoticeListener {
    var wantsNotices: Bool { true }
}

/// What the backend reads of a notice on the shared channel: whose it is,
/// and whether it is a creation or a deletion.
struct NoticeHeader: Decodable, Sendable {
    package let kind: String
    package let name: String
    /// A creation (`created: true`) or deletion (`deleted: true`) notice.
    package var created: Bool?
    var deleted: Bool?
    /// A deletion because the resource's keys were lost.
    var lost: Bool?

    /// The header of a notice's JSON text, or nil for another text.
    static func decode(_ payload: [UInt8]) -> NoticeHeader? {
        try? JSONDecoder().decode(NoticeHeader.self, from: Data(payload))
    }
}

/// The Redis side of one Usher process: the command connections, the one
/// subscriber connection that hears every instance's notices, the index of
/// Redis-backed resources, and what `/readyz` says about Redis.
///
/// Notices come on the shared channel `<prefix>notices` (creations and
/// deletions) and on each resource's own channel
/// `<prefix>notices:<kind>:<name>` (one pattern subscription): those are
/// dropped unparsed when their listener has no use for them, so an idle
/// process pays little for another's traffic.
package final class RedisBackend: Sendable {
    /// A resource appeared or vanished in Redis (created or deleted through any instance).
    package enum Membership: Sendable {
        case created(kind: String, name: String)
        /// `lost`: its keys were lost (not deleted by a client), and its entry removed.
        case deleted(kind: String, name: String, lost: Bool)
        /// A script found the resource without its keys (deleted, or lost): worth a look.
        case missing(kind: String, name: String)
        /// The subscriber (re)connected: the whole index should be read again.
        case resynchronize
    }

    let settings: RedisSettings
    let channel: String
    /// The pattern of every resource's own channel.
    let resourcePattern: String
    let time: ScriptTime
    let clock: any UsherClock
    /// The command connections: used in turn, or on a cluster by the keys' slot.
    package let connections: RedisConnectionPool
    private let listeners = Locked<[String: any NoticeListener]>([:])
    private let membership: Locked<(@Sendable (Membership) -> Void)?> = Locked(nil)
    /// Why the subscriber is down, or nil while it is connected.
    private let subscriberDown = Locked<String?>("not connected yet")
    private let subscriber: Locked<RedisSubscriber?> = Locked(nil)
    private let notices = Atomic<Int>(0)

    /// `connections` command connections, used in turn (on a cluster, to
    /// each master). Each batches what arrives while it waits, so a few carry
    /// a process's load: two keep one free while the other waits on a long
    /// call, and cost less CPU per operation than four (smaller batches, more
    /// wake-ups).
    package init(
        settings: RedisSettings, connections: Int = 2, time: ScriptTime = .server, clock: any UsherClock
    ) throws(RedisError) {
        self.settings = settings
        self.channel = ResourceKeys.noticeChannel(prefix: settings.keyPrefix)
        self.resourcePattern = Self.globEscaped(channel + ":") + "*"
        self.time = time
        self.clock = clock
        if settings.cluster {
            if let problem = RedisSettings.clusterProblem(url: settings.url) { throw .invalidConfiguration(problem) }
            self.connections = RedisConnectionPool(
                cluster: RedisCluster(
                    seed: try settings.endpoint(), connectTimeoutSeconds: settings.connectTimeoutSeconds,
                    commandTimeoutSeconds: settings.commandTimeoutSeconds, connectionsPerNode: connections))
        } else {
            var made: [RedisConnection] = []
            for _ in 0..<max(1, connections) { made.append(try RedisConnection(settings: settings)) }
            self.connections = RedisConnectionPool(made)
        }
    }

    /// Starts hearing notices; `onMembership` learns of resources created or
    /// deleted by any instance. Connects in the background: Redis may be down.
    /// On a cluster it subscribes on one node, and on another when that one goes.
    package func start(onMembership: @escaping @Sendable (Membership) -> Void) throws(RedisError) {
        membership.withLock { $0 = onMembership }
        let endpoint = try settings.endpoint()
        let endpoints: @Sendable () -> RedisEndpoint =
            if let cluster = connections.cluster { { cluster.nextSubscriberEndpoint() } } else { { endpoint } }
        let made = try RedisSubscriber(
            endpoints: endpoints, connectTimeoutSeconds: settings.connectTimeoutSeconds, healthCheckSeconds: 1,
            channels: [channel], patterns: [resourcePattern]
        ) { [weak self] event in self?.heard(event) }
        subscriber.withLock { $0 = made }
        // A master back after a failure may have lost what it held, as after a restart of a single Redis.
        connections.cluster?.onRecovery { [weak self] _ in self?.resynchronizeAll() }
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

    /// Where a command on no key goes: the next connection, or any master of a cluster.
    package func connection() -> RedisRoute { connections.next() }

    /// The keys of a resource.
    package func keys(kind: String, name: String) -> ResourceKeys {
        ResourceKeys(prefix: settings.keyPrefix, kind: kind, name: name)
    }

    func register(_ listener: any NoticeListener, kind: String, name: String) {
        listeners.withLock { $0["\(kind):\(name)"] = listener }
    }

    func unregister(kind: String, name: String) {
        _ = listeners.withLock { $0.removeValue(forKey: "\(kind):\(name)") }
    }

    /// A script answered that the resource's keys are missing.
    func noticeMissing(kind: String, name: String) {
        membership.withLock { $0 }?(.missing(kind: kind, name: name))
    }

    /// A plain command (on `key` when it has one, so that a cluster routes it);
    /// an error reply or no answer is a `ScriptFailure`.
    package func command(_ arguments: [String], key: String? = nil) async throws(ScriptFailure) -> RedisReply {
        let route = key.map { connections.route(keys: [$0]) } ?? connections.next()
        let reply: RedisReply
        do { reply = try await route.command(arguments) } catch { throw .unavailable(error.description) }
        if let message = reply.errorMessage { throw .redis(message) }
        return reply
    }

    /// The server's `run_id` (`INFO server`): it changes when Redis restarts
    /// or fails over. On a cluster, every master's, joined: it changes when any does.
    func serverRunID() async throws(ScriptFailure) -> String? {
        func runID(_ info: RedisReply) -> String? {
            let line = (info.string ?? "").split(whereSeparator: \.isNewline).first { $0.hasPrefix("run_id:") }
            return line.map { String($0.dropFirst("run_id:".count)) }
        }
        guard let cluster = connections.cluster else { return runID(try await command(["INFO", "server"])) }
        var ids: [String] = []
        do throws(RedisError) {
            if cluster.masters.isEmpty { try await cluster.readSlotMap() }
            for master in cluster.masters {
                guard let id = runID(try await cluster.command(["INFO", "server"], at: master)) else { return nil }
                ids.append(id)
            }
        } catch {
            throw .unavailable(error.description)
        }
        return ids.sorted().joined(separator: ",")
    }

    // MARK: Health

    /// True while the subscriber is connected and subscribed: notices from
    /// other instances reach this one.
    package var isSubscribed: Bool { subscriberDown.withLock { $0 == nil } }

    /// Notices heard since start, from every instance (this one included).
    package var noticesHeard: Int { notices.load(ordering: .relaxed) }

    /// Why Redis-backed resources cannot be served now, or nil: the
    /// subscriber is down, or a `PING` got no answer (on a cluster: from
    /// no master; resources on a master that is down answer 503 themselves).
    package func unavailableReason() async -> String? {
        if let down = subscriberDown.withLock({ $0 }) { return "Redis subscriber: \(down)" }
        if let cluster = connections.cluster { return await Self.clusterUnavailableReason(cluster) }
        do {
            let reply = try await connection().command(["PING"])
            if let message = reply.errorMessage { return "Redis answered PING with \(message)" }
            return nil
        } catch {
            return error.description
        }
    }

    /// Nil when a master answers `PING`; else why none did.
    private static func clusterUnavailableReason(_ cluster: RedisCluster) async -> String? {
        if cluster.masters.isEmpty {
            do throws(RedisError) { try await cluster.readSlotMap() } catch { return error.description }
        }
        var failures: [String] = []
        for master in cluster.masters {
            do throws(RedisError) {
                let reply = try await cluster.command(["PING"], at: master)
                guard let message = reply.errorMessage else { return nil }
                failures.append("\(master) answered PING with \(message)")
            } catch {
                failures.append("\(master): \(error.description)")
            }
        }
        return "no Redis Cluster master answers: \(failures.joined(separator: "; "))"
    }

    // MARK: Notices

    private func heard(_ event: RedisSubscriber.Event) {
        switch event {
        case .subscribed(let what):
            // The pattern is confirmed after the shared channel: both are live now.
            guard what == resourcePattern else { return }
            subscriberDown.withLock { $0 = nil }
            resynchronizeAll()
        case .disconnected(let reason):
            subscriberDown.withLock { $0 = reason }
        case .message(let channel, let payload):
            notices.add(1, ordering: .relaxed)
            if channel == self.channel {
                deliver(payload)
            } else {
                deliverOwn(payload, key: channel.dropFirst(self.channel.count + 1))
            }
        }
    }

    /// Notices may have been missed, or Redis lost data: every listener
    /// checks again and the index is read again.
    private func resynchronizeAll() {
        let all = listeners.withLock { Array($0.values) }
        for listener in all { listener.resynchronize() }
        membership.withLock { $0 }?(.resynchronize)
    }

    /// A notice on a resource's own channel: handed over only when its listener wants it.
    private func deliverOwn(_ payload: [UInt8], key: Substring) {
        guard let listener = listeners.withLock({ $0[String(key)] }), listener.wantsNotices else { return }
        listener.receive(payload)
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
        guard let header = NoticeHeader.decode(payload) else { return }
        let (kind, name) = (header.kind, header.name)
        if header.created == true {
            membership.withLock { $0 }?(.created(kind: kind, name: name))
            return
        }
        listeners.withLock { $0["\(kind):\(name)"] }?.receive(payload)
        if header.deleted == true {
            membership.withLock { $0 }?(.deleted(kind: kind, name: name, lost: header.lost == true))
        }
    }

    /// `{"kind": …, "name": …, "created": true}`.
    static func membershipNotice(kind: String, name: String, created: Bool) -> String {
        struct Membership: Encodable {
            let kind: String
            let name: String
            let created: Bool
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(Membership(kind: kind, name: name, created: created))) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}
