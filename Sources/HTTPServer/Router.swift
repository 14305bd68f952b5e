import Foundation

/// Routes by method and path template, with `{name}` segments as parameters.
///
/// Lookup walks a tree of path segments over the path's UTF-8 bytes, so its
/// cost grows with the depth of the path, not the number of routes, and it
/// allocates only the parameter values.
package struct Router<Handler: Sendable>: Sendable {
    /// The outcome of a lookup.
    package enum Match: Sendable {
        /// A route matched: its handler, template (e.g. `/v1/queues/{name}`) and parameters.
        case found(Handler, template: String, parameters: PathParameters)
        /// The path exists but not for this method; `allowed` is for the `Allow` header.
        case methodNotAllowed(allowed: [String])
        /// No route has this path.
        case notFound
    }

    /// The tree of path segments; not generic, so walking it needs no
    /// runtime generic metadata.
    @usableFromInline var table = RouteTable()
    /// Handlers by the index the table stores.
    @usableFromInline var handlers: [Handler] = []

    /// Every route added, as (method, template), in the order added.
    package private(set) var routes: [(method: String, template: String)] = []

    package init() {}

    /// Adds a route. Templates look like `/v1/queues/{name}/visitors/{id}`.
    /// Call only while setting up, before the router is shared.
    package mutating func add(_ method: String, _ template: String, _ handler: Handler) {
        table.add(method, template, index: handlers.count)
        handlers.append(handler)
        routes.append((method, template))
    }

    /// Finds the route for a method and path. `HEAD` falls back to `GET`.
    /// Inlinable so that callers get a copy specialised for their handler type.
    @inlinable
    package func match(_ method: String, _ path: String) -> Match {
        switch table.lookup(method, path) {
        case .found(let index, let template, let parameters):
            return .found(handlers[index], template: template, parameters: parameters)
        case .methodNotAllowed(let allowed):
            return .methodNotAllowed(allowed: allowed)
        case .notFound:
            return .notFound
        }
    }
}

/// The route tree behind `Router`, with handlers as indices. A value type
/// with its nodes in one array: reading it needs no reference counting or
/// dynamic exclusivity checks (which class properties would cost per step).
package struct RouteTable: Sendable {
    /// A lookup's outcome, with the handler's index.
    package enum Lookup {
        case found(Int, template: String, parameters: PathParameters)
        case methodNotAllowed(allowed: [String])
        case notFound
    }

    /// One path segment's node; children by index into `nodes`.
    private struct Node: Sendable {
        /// Few per node: a linear scan comparing bytes beats hashing here.
        var literals: [(segment: [UInt8], node: Int)] = []
        var parameter: (name: String, node: Int)?
        /// By method, with the index of the handler; a handful per node.
        var handlers: [(method: String, index: Int, template: String)] = []

        func handler(for method: String) -> (Int, String)? {
            for entry in handlers where entry.method == method { return (entry.index, entry.template) }
            return nil
        }

        func literal(_ segment: UnsafeBufferPointer<UInt8>) -> Int? {
            for (literal, next) in literals where literal.count == segment.count {
                let same = literal.withUnsafeBytes { memcmp($0.baseAddress!, segment.baseAddress!, segment.count) == 0 }
                if same { return next }
            }
            return nil
        }
    }

    /// `nodes[0]` is the root.
    private var nodes = [Node()]

    init() {}

    mutating func add(_ method: String, _ template: String, index: Int) {
        var node = 0
        for segment in template.split(separator: "/", omittingEmptySubsequences: true) {
            if segment.hasPrefix("{") && segment.hasSuffix("}") {
                let name = String(segment.dropFirst().dropLast())
                if let existing = nodes[node].parameter {
                    precondition(existing.name == name, "conflicting parameter names at \(template)")
                    node = existing.node
                } else {
                    nodes.append(Node())
                    nodes[node].parameter = (name, nodes.count - 1)
                    node = nodes.count - 1
                }
            } else if let next = nodes[node].literals.first(where: { $0.segment.elementsEqual(segment.utf8) })?.node {
                node = next
            } else {
                nodes.append(Node())
                nodes[node].literals.append((Array(segment.utf8), nodes.count - 1))
                node = nodes.count - 1
            }
        }
        precondition(nodes[node].handler(for: method) == nil, "duplicate route \(method) \(template)")
        nodes[node].handlers.append((method, index, template))
    }

    /// Walks the tree over the path's UTF-8 bytes.
    package func lookup(_ method: String, _ path: String) -> Lookup {
        var path = path
        return path.withUTF8 { lookup(method, $0) }
    }

    private func lookup(_ method: String, _ path: UnsafeBufferPointer<UInt8>) -> Lookup {
        var node = 0
        var parameters = PathParameters()
        var index = 0
        let count = path.count
        while index < count {
            if path[index] == 0x2F {
                index += 1
                continue
            }
            var end = index
            while end < count && path[end] != 0x2F { end += 1 }
            let segment = UnsafeBufferPointer(rebasing: path[index..<end])
            if let next = nodes[node].literal(segment) {
                node = next
            } else if let (name, next) = nodes[node].parameter {
                parameters.append(name, String(decoding: segment, as: UTF8.self))
                node = next
            } else {
                return .notFound
            }
            index = end
        }
        let found = nodes[node]
        if found.handlers.isEmpty { return .notFound }
        if let (handler, template) = found.handler(for: method) ?? (method == "HEAD" ? found.handler(for: "GET") : nil)
        {
            return .found(handler, template: template, parameters: parameters)
        }
        var allowed = found.handlers.map(\.method)
        if allowed.contains("GET") { allowed.append("HEAD") }
        return .methodNotAllowed(allowed: allowed.sorted())
    }
}

/// The `{name}` segments of a matched path, in path order. A route has one or
/// two, kept inline (no allocation); more go to an array.
package struct PathParameters: Sendable, Equatable, ExpressibleByDictionaryLiteral {
    private var first: (name: String, value: String)?
    private var second: (name: String, value: String)?
    private var rest: [(name: String, value: String)] = []

    package init() {}

    package init(dictionaryLiteral elements: (String, String)...) {
        for (name, value) in elements { append(name, value) }
    }

    mutating func append(_ name: String, _ value: String) {
        if first == nil {
            first = (name, value)
        } else if second == nil {
            second = (name, value)
        } else {
            rest.append((name, value))
        }
    }

    /// The value of the parameter `name`, if the route has it.
    package subscript(name: String) -> String? {
        if let first, first.name == name { return first.value }
        if let second, second.name == name { return second.value }
        for pair in rest where pair.name == name { return pair.value }
        return nil
    }

    package var count: Int { (first == nil ? 0 : 1) + (second == nil ? 0 : 1) + rest.count }

    package var isEmpty: Bool { first == nil }

    private var pairs: [(name: String, value: String)] {
        [first, second].compactMap { $0 } + rest
    }

    /// Same names with the same values, in any order.
    package static func == (lhs: PathParameters, rhs: PathParameters) -> Bool {
        lhs.count == rhs.count && lhs.pairs.allSatisfy { rhs[$0.name] == $0.value }
    }
}
