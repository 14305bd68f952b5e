/// How deep JSON read from clients may nest and how many segments a JSON
/// Pointer may have: the bounds that every recursion over client-shaped JSON
/// (conversion, comparison, writing, a filter's `set`) relies on.
///
/// Foundation's parser refuses documents nested deeper than 512 levels. Usher
/// reads request bodies, source items and the config file at most
/// `maxDepthRange.upperBound` (500) deep and never builds a value deeper than
/// `maxDepth`, so a response, which wraps stored values in a few levels of its
/// own, stays within the 512 levels a client using the same parser reads.
package struct JSONLimits: Sendable, Equatable {
    /// `max_json_depth`: the deepest nesting of a request body or source item
    /// (`{}` and `[]` are 1 deep, a scalar 0), and so of any value stored.
    package var maxDepth: Int
    /// `max_pointer_segments`: the most reference tokens in a JSON Pointer
    /// (`/a/0/b` has 3).
    package var maxPointerSegments: Int

    /// Limits; the defaults are the config keys' defaults.
    package init(maxDepth: Int = 500, maxPointerSegments: Int = 32) {
        self.maxDepth = maxDepth
        self.maxPointerSegments = maxPointerSegments
    }

    /// Accepted `max_json_depth`: at most 500, leaving responses room to wrap a
    /// stored value and stay within Foundation's 512.
    package static let maxDepthRange = 1...500
    /// Accepted `max_pointer_segments`.
    package static let maxPointerSegmentsRange = 1...128
}

extension JSONValue {
    /// Levels of nesting: 0 for a scalar, 1 for `{}`, `[]` or a container of
    /// scalars. Walks with its own stack, so any value can be measured.
    var depth: Int {
        var deepest = 0
        var pending: [(JSONValue, Int)] = [(self, 0)]
        while let (value, above) = pending.popLast() {
            switch value {
            case .array(let elements):
                deepest = max(deepest, above + 1)
                for element in elements { pending.append((element, above + 1)) }
            case .object(let members):
                deepest = max(deepest, above + 1)
                for (_, member) in members { pending.append((member, above + 1)) }
            default:
                break
            }
        }
        return deepest
    }
}
