/// Which master serves each of the 16,384 slots.
struct SlotMap: Sendable {
    /// Per slot, an index into `masters`, or -1 when no master serves it.
    private var owners = [Int16](repeating: -1, count: ClusterSlot.count)
    /// The masters, in the order of their first slot.
    private(set) var masters: [RedisCluster.Address] = []

    init() {}

    /// Reads a `CLUSTER SLOTS` reply: `[start, end, [host, port, id, …], replicas…]`
    /// per range. A master without a host is on `askedHost` (the node that answered).
    init(clusterSlots reply: RedisReply, askedHost: String) throws(RedisError) {
        guard let ranges = reply.array else { throw .reply("CLUSTER SLOTS: not an array") }
        for range in ranges {
            guard let parts = range.array, parts.count >= 3, let start = parts[0].int, let end = parts[1].int,
                let master = parts[2].array, master.count >= 2, let host = master[0].string, let port = master[1].int,
                0 <= start, start <= end, end < ClusterSlot.count
            else { throw .reply("CLUSTER SLOTS: a range it cannot read") }
            let address = RedisCluster.Address(host: host.isEmpty || host == "?" ? askedHost : host, port: Int(port))
            for slot in Int(start)...Int(end) { assign(slot, to: address) }
        }
    }

    /// True before any slot is known.
    var isEmpty: Bool { masters.isEmpty }

    func owner(_ slot: Int) -> RedisCluster.Address? {
        guard owners.indices.contains(slot), owners[slot] >= 0 else { return nil }
        return masters[Int(owners[slot])]
    }

    /// Records that `address` serves `slot` (from `CLUSTER SLOTS` or a `MOVED`).
    mutating func assign(_ slot: Int, to address: RedisCluster.Address) {
        guard owners.indices.contains(slot) else { return }
        if let index = masters.firstIndex(of: address) {
            owners[slot] = Int16(index)
        } else {
            masters.append(address)
            owners[slot] = Int16(masters.count - 1)
        }
    }
}
