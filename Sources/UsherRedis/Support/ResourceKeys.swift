/// The keys of one Redis-backed resource. They share the hash tag
/// `{kind:name}`, so every script touches one Cluster slot; names cannot hold
/// braces (`Names.isValid`), so the tag is always the whole `kind:name`.
package struct ResourceKeys: Sendable, Equatable {
    /// `key_prefix` from the config (default `usher:`).
    package let prefix: String
    /// The kind in the singular: `queue`, `window`, `pool`, `pipeline`, `machine`.
    package let kind: String
    package let name: String

    init(prefix: String, kind: String, name: String) {
        self.prefix = prefix
        self.kind = kind
        self.name = name
    }

    /// `prefix{kind:name}:part`.
    package func key(_ part: String) -> String { "\(prefix){\(kind):\(name)}:\(part)" }

    /// The channel every instance subscribes to for notices (one per process).
    static func noticeChannel(prefix: String) -> String { "\(prefix)notices" }

    /// The channel of one resource's own notices: `<prefix>notices:<kind>:<name>`.
    var noticeChannel: String { "\(Self.noticeChannel(prefix: prefix)):\(kind):\(name)" }
}
