/// The Redis Cluster slot of a key: CRC16 (XMODEM) of the key, or of its hash
/// tag, modulo 16384. The tag is what lies between the first `{` and the
/// first `}` after it, when that is not empty; so `prefix{queue:a}:meta` and
/// `prefix{queue:a}:wait` share a slot.
package enum ClusterSlot {
    static let count = 16384

    /// The slot Redis puts `key` in.
    package static func of(_ key: some Collection<UInt8>) -> Int {
        Int(crc16(hashed(key)) % UInt16(count))
    }

    /// `of` for a text key (its UTF-8 bytes).
    package static func of(_ key: String) -> Int { of(Array(key.utf8)) }

    /// The part of `key` that is hashed: its hash tag, or all of it.
    static func hashed<Key: Collection<UInt8>>(_ key: Key) -> Key.SubSequence {
        guard let open = key.firstIndex(of: UInt8(ascii: "{")) else { return key[...] }
        let afterOpen = key.index(after: open)
        guard let close = key[afterOpen...].firstIndex(of: UInt8(ascii: "}")), close != afterOpen else {
            return key[...]
        }
        return key[afterOpen..<close]
    }

    /// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, as Redis's `crc16.c`.
    static func crc16(_ bytes: some Sequence<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes { crc = crc << 8 ^ table[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ byte)] }
        return crc
    }

    private static let table: [UInt16] = (0..<256).map { index in
        var crc = UInt16(index) << 8
        for _ in 0..<8 { crc = crc & 0x8000 != 0 ? crc << 1 ^ 0x1021 : crc << 1 }
        return crc
    }
}
