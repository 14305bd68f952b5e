/// Builds a Prometheus text exposition (format 0.0.4).
///
/// Each family is written once with its `# HELP` and `# TYPE` lines, then its
/// samples. Label values are escaped (`\` → `\\`, `"` → `\"`, newline → `\n`);
/// HELP text escapes `\` and newline.
struct PrometheusText {
    private(set) var text = ""

    /// The content type of the exposition.
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    init() { text.reserveCapacity(16_384) }

    /// Starts a metric family.
    mutating func family(_ name: String, _ type: String, _ help: String) {
        text += "# HELP \(name) "
        for c in help.unicodeScalars {
            switch c {
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            default: text.unicodeScalars.append(c)
            }
        }
        text += "\n# TYPE \(name) \(type)\n"
    }

    /// One sample: `name{labels} value`.
    mutating func sample(_ name: String, _ labels: KeyValuePairs<String, String> = [:], _ value: Double) {
        sample(name, Array(labels), value)
    }

    /// One sample with labels given as an array.
    mutating func sample(_ name: String, _ labels: [(key: String, value: String)], _ value: Double) {
        text += name
        if !labels.isEmpty {
            text += "{"
            for (i, label) in labels.enumerated() {
                if i > 0 { text += "," }
                text += label.key
                text += "=\""
                Self.escape(label.value, into: &text)
                text += "\""
            }
            text += "}"
        }
        text += " "
        text += Self.format(value)
        text += "\n"
    }

    /// A histogram's samples: cumulative `_bucket{le}` including `+Inf`, `_sum`, `_count`.
    /// `counts[i]` is the number of observations in bucket `i` alone (not
    /// cumulative); `counts.count == bounds.count + 1` (the last is above every bound).
    mutating func histogram(
        _ name: String, _ labels: [(key: String, value: String)], bounds: [Double], counts: [Int], sum: Double
    ) {
        var cumulative = 0
        for (i, bound) in bounds.enumerated() {
            cumulative += counts[i]
            sample(name + "_bucket", labels + [("le", Self.format(bound))], Double(cumulative))
        }
        cumulative += counts[bounds.count]
        sample(name + "_bucket", labels + [("le", "+Inf")], Double(cumulative))
        sample(name + "_sum", labels, sum)
        sample(name + "_count", labels, Double(cumulative))
    }

    /// Escapes a label value.
    static func escape(_ value: String, into out: inout String) {
        for c in value.unicodeScalars {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(c)
            }
        }
    }

    /// 2^53: every integer below it is exact in a `Double`, so it prints whole.
    private static let exactIntegerLimit = 0x1p53

    /// A sample value: integers below 2^53 without a fraction (a Redis
    /// machine's µs-based version too), `+Inf`, `-Inf`, `NaN`.
    static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < exactIntegerLimit { return String(Int64(value)) }
        return String(value)
    }
}
