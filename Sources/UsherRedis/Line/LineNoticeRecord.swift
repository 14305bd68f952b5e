import Foundation

/// A notice as `line.lua` publishes it for queues and windows, and
/// `pool.lua` for pools: times and counts as text, views and leases as JSON text.
struct LineNoticeRecord: Decodable {
    let kind: String
    let name: String
    /// The operation's time in µs.
    let time: String
    var deleted: Bool?
    /// The next deadline in µs.
    var next: String?
    /// The views (leases) that changed, in order.
    var changed: [String]?
    /// How long, in µs, each visitor the operation granted waited.
    var waits: [String]?
    /// A pool's waiting fetches that gave up, as they last were.
    var withdrawn: [String]?
    /// A `PATCH`'s config before and after, as the kind's config fields.
    var configBefore: [String]?
    var config: [String]?

    enum CodingKeys: String, CodingKey {
        case kind, name, time, deleted, next, changed, waits, withdrawn, config
        case configBefore = "config_before"
    }

    /// The record of `payload` when it is a notice of `kind`.
    static func decode(_ payload: [UInt8], kind: String) -> LineNoticeRecord? {
        guard let record = try? JSONDecoder().decode(Self.self, from: Data(payload)), record.kind == kind else {
            return nil
        }
        return record
    }
}
