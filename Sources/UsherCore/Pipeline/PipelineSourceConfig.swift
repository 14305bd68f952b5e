import Foundation

/// Where a pipeline pulls items from by itself when it runs low (the seed's
/// passive producer, 被动生产者):
///
/// - `{"kind": "file", "path": "gifts.ndjson", "low_water"?: 1}`: one JSON
///   value per line, read lazily; `path` is relative to `data_dir` and may not
///   leave it (absolute paths and `..` are refused here, symlinks that lead
///   out when the file is opened).
/// - `{"kind": "http", "url": "http://127.0.0.1:9000/next", "low_water"?: 1}`:
///   `GET` per item; loopback hosts only unless remote sources are allowed.
package struct PipelineSourceConfig: Sendable, Hashable {
    /// What kind of source, with its location.
    package enum Kind: Sendable, Hashable {
        /// `path` relative to the data directory.
        case file(path: String)
        /// An `http://` URL.
        case http(url: String)
    }

    /// What to read.
    package var kind: Kind
    /// `low_water` (1): pull while fewer items than this are ready.
    package var lowWater: Int

    /// A source config.
    package init(kind: Kind, lowWater: Int = 1) {
        self.kind = kind
        self.lowWater = lowWater
    }

    /// Allowed ranges.
    package enum Limits {
        /// `low_water`.
        package static let lowWater = 1...1_000_000
        /// Longest `path` or `url`, in bytes.
        package static let locationBytes = 4096
    }

    /// `"file"` or `"http"`.
    var kindName: String {
        switch kind {
        case .file: "file"
        case .http: "http"
        }
    }

    /// Reads `kind, path | url, low_water`. The caller calls `reader.finish()`.
    ///
    /// - Parameter allowRemote: `allow_remote_sources`; when false an HTTP
    ///   source must name a loopback host (127.0.0.0/8, `::1`, `localhost`).
    package static func parse(_ reader: inout FieldReader, allowRemote: Bool = false) throws(FieldError)
        -> PipelineSourceConfig
    {
        guard let kind = try reader.string("kind") else {
            throw FieldError(field: reader.fieldPath("kind"), message: "is required: \"file\" or \"http\"")
        }
        let lowWater = try reader.int("low_water", in: Limits.lowWater) ?? 1
        switch kind {
        case "file":
            guard let path = try reader.string("path") else {
                throw FieldError(field: reader.fieldPath("path"), message: "is required for a file source")
            }
            if let problem = Self.pathProblem(path) {
                throw FieldError(field: reader.fieldPath("path"), message: problem)
            }
            if reader.has("url") {
                throw FieldError(field: reader.fieldPath("url"), message: "is not allowed for a file source")
            }
            return PipelineSourceConfig(kind: .file(path: path), lowWater: lowWater)
        case "http":
            guard let url = try reader.string("url") else {
                throw FieldError(field: reader.fieldPath("url"), message: "is required for an http source")
            }
            if let problem = Self.urlProblem(url, allowRemote: allowRemote) {
                throw FieldError(field: reader.fieldPath("url"), message: problem)
            }
            if reader.has("path") {
                throw FieldError(field: reader.fieldPath("path"), message: "is not allowed for an http source")
            }
            return PipelineSourceConfig(kind: .http(url: url), lowWater: lowWater)
        default:
            throw FieldError(field: reader.fieldPath("kind"), message: "must be \"file\" or \"http\"")
        }
    }

    /// Why a file source path is refused before touching the file system, or nil.
    /// Symlinks are checked when the file is opened (`FileSource.resolve`).
    static func pathProblem(_ path: String) -> String? {
        if path.isEmpty { return "must not be empty" }
        if path.utf8.count > Limits.locationBytes { return "must be at most \(Limits.locationBytes) bytes" }
        if path.utf8.contains(0) { return "must not contain NUL" }
        if path.hasPrefix("/") { return "must be relative to data_dir, not absolute" }
        if path.split(separator: "/", omittingEmptySubsequences: false).contains("..") {
            return "must stay inside data_dir (no \"..\")"
        }
        if path.hasSuffix("/") { return "must name a file, not a directory" }
        return nil
    }

    /// Why an HTTP source URL is refused, or nil.
    static func urlProblem(_ url: String, allowRemote: Bool) -> String? {
        if url.utf8.count > Limits.locationBytes { return "must be at most \(Limits.locationBytes) bytes" }
        guard let parts = URLComponents(string: url), parts.scheme?.lowercased() == "http" else {
            return "must be an http:// URL"
        }
        guard var host = parts.host, !host.isEmpty else { return "must name a host" }
        if parts.user != nil || parts.password != nil { return "must not carry user information" }
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if !allowRemote && !isLoopback(host) {
            return "must name a loopback host (127.0.0.0/8, ::1, localhost) unless allow_remote_sources is true"
        }
        return nil
    }

    /// 127.0.0.0/8 in dotted-quad form, `::1` or `localhost`.
    static func isLoopback(_ host: String) -> Bool {
        let h = host.lowercased()
        if h == "localhost" || h == "localhost." || h == "::1" || h == "0:0:0:0:0:0:0:1" { return true }
        let octets = h.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4 else { return false }
        var values: [Int] = []
        for o in octets {
            guard !o.isEmpty, o.count <= 3, o.allSatisfy({ $0 >= "0" && $0 <= "9" }), let v = Int(o),
                (0...255).contains(v)
            else { return false }
            values.append(v)
        }
        return values[0] == 127
    }
}
