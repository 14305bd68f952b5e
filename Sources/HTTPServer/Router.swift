/// Routes by method and path template, with `{name}` segments as parameters.
///
/// Lookup walks a tree of path segments, so its cost grows with the depth
/// of the path, not the number of routes.
public struct Router<Handler: Sendable>: Sendable {
    /// The outcome of a lookup.
    public enum Match: Sendable {
        /// A route matched: its handler, template (e.g. `/v1/queues/{name}`) and parameters.
        case found(Handler, template: String, parameters: [String: String])
        /// The path exists but not for this method; `allowed` is for the `Allow` header.
        case methodNotAllowed(allowed: [String])
        /// No route has this path.
        case notFound
    }

    private final class Node: @unchecked Sendable {
        /// Few per node: a linear scan comparing bytes beats hashing here.
        var literals: [(segment: String, node: Node)] = []
        var parameter: (name: String, node: Node)?
        var handlers: [String: (Handler, String)] = [:]
    }

    private let root = Node()

    /// Every route added, as (method, template), in the order added.
    public private(set) var routes: [(method: String, template: String)] = []

    public init() {}

    /// Adds a route. Templates look like `/v1/queues/{name}/visitors/{id}`.
    /// Call only while setting up, before the router is shared.
    public mutating func add(_ method: String, _ template: String, _ handler: Handler) {
        var node = root
        for segment in Self.segments(template) {
            if segment.hasPrefix("{") && segment.hasSuffix("}") {
                let name = String(segment.dropFirst().dropLast())
                if let existing = node.parameter {
                    precondition(existing.name == name, "conflicting parameter names at \(template)")
                    node = existing.node
                } else {
                    let next = Node()
                    node.parameter = (name, next)
                    node = next
                }
            } else if let next = node.literals.first(where: { $0.segment == segment })?.node {
                node = next
            } else {
                let next = Node()
                node.literals.append((segment, next))
                node = next
            }
        }
        precondition(node.handlers[method] == nil, "duplicate route \(method) \(template)")
        node.handlers[method] = (handler, template)
        routes.append((method, template))
    }

    /// Finds the route for a method and path. `HEAD` falls back to `GET`.
    public func match(_ method: String, _ path: String) -> Match {
        var node = root
        var parameters: [String: String] = [:]
        // Walk the segments in place: no array of segments per request.
        let utf8 = path.utf8
        var index = utf8.startIndex
        while index < utf8.endIndex {
            if utf8[index] == 0x2F {
                index = utf8.index(after: index)
                continue
            }
            let end = utf8[index...].firstIndex(of: 0x2F) ?? utf8.endIndex
            let segment = path.utf8[index..<end]
            if let next = node.literals.first(where: { $0.segment.utf8.elementsEqual(segment) })?.node {
                node = next
            } else if let (name, next) = node.parameter {
                parameters[name] = String(Substring(segment))
                node = next
            } else {
                return .notFound
            }
            index = end
        }
        if node.handlers.isEmpty { return .notFound }
        if let (handler, template) = node.handlers[method] ?? (method == "HEAD" ? node.handlers["GET"] : nil) {
            return .found(handler, template: template, parameters: parameters)
        }
        var allowed = Array(node.handlers.keys)
        if allowed.contains("GET") { allowed.append("HEAD") }
        return .methodNotAllowed(allowed: allowed.sorted())
    }

    private static func segments(_ path: String) -> [String] {
        path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
    }
}
