/// A dictionary keyed by strings, split into 64 dictionaries by a cheap hash
/// of the key's bytes, so that growing it never rehashes everything at once.
///
/// One `Dictionary` rehashes all of its entries when it outgrows its
/// capacity, under the owner's lock: a pause for every request to a large
/// queue (docs/performance.md, "Growth pauses"). Split 64 ways, each shard
/// rehashes only its own share, at its own moment. The shard is picked with
/// FNV-1a over the UTF-8 bytes; each shard is an ordinary (seeded)
/// `Dictionary`, so keys chosen to collide can at worst fill one shard, no
/// worse than a single dictionary.
struct ShardedDictionary<Value> {
    private static var shardCount: Int { 64 }
    private var shards = [[String: Value]](repeating: [:], count: ShardedDictionary.shardCount)

    /// The number of entries (summed over the shards: not kept on the hot path).
    var count: Int { shards.reduce(0) { $0 + $1.count } }

    init() {}

    /// The shard of `key`.
    private static func shard(_ key: String) -> Int {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        let hashed: Bool? = key.utf8.withContiguousStorageIfAvailable { bytes in
            for b in bytes { hash = (hash ^ UInt64(b)) &* 0x100_0000_01b3 }
            return true
        }
        if hashed == nil {
            for b in key.utf8 { hash = (hash ^ UInt64(b)) &* 0x100_0000_01b3 }
        }
        return Int(truncatingIfNeeded: hash ^ (hash &>> 32)) & (shardCount - 1)
    }

    /// The value for `key`; assigning nil removes it.
    subscript(key: String) -> Value? {
        get { shards[Self.shard(key)][key] }
        set {
            if let newValue {
                updateValue(newValue, forKey: key)
            } else {
                removeValue(forKey: key)
            }
        }
    }

    /// Sets the value for `key`; answers the value it replaced, if any.
    @discardableResult
    mutating func updateValue(_ value: Value, forKey key: String) -> Value? {
        shards[Self.shard(key)].updateValue(value, forKey: key)
    }

    /// Removes `key`; answers its value, if it had one.
    @discardableResult
    mutating func removeValue(forKey key: String) -> Value? {
        shards[Self.shard(key)].removeValue(forKey: key)
    }
}

extension ShardedDictionary: Sendable where Value: Sendable {}
