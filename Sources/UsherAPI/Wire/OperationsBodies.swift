import UsherCore

/// `GET /healthz` and `GET /readyz`: `{"status": "ok" | "ready"}`.
struct StatusBody: Encodable {
    let status: String
}

/// `GET /v1`: every kind with its path and how many resources it has.
struct KindsBody: Encodable {
    struct Kind: Encodable {
        let kind: ResourceKind
        let count: Int

        enum CodingKeys: String, CodingKey { case kind, path, count }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(kind.rawValue, forKey: .kind)
            try container.encode("/v1/\(kind.rawValue)", forKey: .path)
            try container.encode(count, forKey: .count)
        }
    }

    let kinds: [Kind]
}

/// `GET /v1/{kind}`: `{"<kind>": [summaries], "next_cursor": … | null}`.
struct ListBody: Encodable {
    let kind: ResourceKind
    var items: [JSONValue]
    var nextCursor: String?

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: WireKey.self)
        try container.encode(items, forKey: WireKey(kind.rawValue))
        try container.encodeCursor(nextCursor, forKey: WireKey("next_cursor"))
    }
}
