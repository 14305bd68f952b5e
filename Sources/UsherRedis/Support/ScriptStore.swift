import RedisClient
import UsherCore

/// A kind's store: every call goes through its runner, over the keys that
/// `parts` names in the script's `KEYS` order.
protocol ScriptStore: Sendable {
    associatedtype Kind: ScriptKind
    /// The parts of the resource's keys, in the order the script reads `KEYS`.
    static var parts: [String] { get }
    var runner: ScriptRunner<Kind> { get }
    init(runner: ScriptRunner<Kind>)
}

extension ScriptStore {
    /// A store whose calls publish on `channel` (deletions on
    /// `deletionChannel`, else `channel`) and report what they learn of the
    /// next deadline and of missing keys.
    init(
        keys: ResourceKeys, connections: RedisConnectionPool, time: ScriptTime, channel: String,
        deletionChannel: String? = nil, onDeadline: @escaping @Sendable (Timestamp?) -> Void,
        onMissing: @escaping @Sendable () -> Void = {}
    ) {
        self.init(
            runner: ScriptRunner(
                keys: keys, keyList: Self.parts.map(keys.key), connections: connections, time: time, channel: channel,
                deletionChannel: deletionChannel ?? channel, onDeadline: onDeadline, onMissing: onMissing))
    }

    /// The store of the resource `host` serves here: notices on the
    /// resource's own channel, deletions on the backend's, which every
    /// instance hears.
    init(host: LocalHost) {
        let keys = host.backend.keys(kind: host.kind, name: host.name)
        self.init(
            keys: keys, connections: host.backend.connections, time: host.backend.time, channel: keys.noticeChannel,
            deletionChannel: host.backend.channel, onDeadline: host.onDeadline, onMissing: host.onMissing)
    }
}

extension ScriptRunner {
    /// Runs the script's `delete`, published where every instance hears it;
    /// true when the resource existed.
    func delete(_ operation: Kind.Operation, context: Kind.Context) async throws(Kind.Failure) -> Bool {
        try await run(
            ScriptCall(operation, context: context) { r throws(ReplyShapeError) in try r.flag("existed") },
            channel: deletionChannel)
    }
}
