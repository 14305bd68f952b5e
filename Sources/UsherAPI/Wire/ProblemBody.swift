/// An RFC 9457 problem document: `type`, `title`, `status`, `detail`,
/// `code`, then the error's extra members.
struct ProblemBody: Encodable {
    let error: APIError
    init(_ error: APIError) { self.error = error }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: WireKey.self)
        try container.encode("urn:usher:error:\(error.code)", forKey: WireKey("type"))
        try container.encode(error.title, forKey: WireKey("title"))
        try container.encode(error.status, forKey: WireKey("status"))
        try container.encode(error.detail, forKey: WireKey("detail"))
        try container.encode(error.code, forKey: WireKey("code"))
        for (name, value) in error.extra { try container.encode(value, forKey: WireKey(name)) }
    }
}
