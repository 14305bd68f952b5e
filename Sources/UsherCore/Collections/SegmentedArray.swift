/// A growable array kept in segments of at most 4,096 elements. Appending
/// never moves what is already stored: a contiguous `Array` grows by copying
/// every element, under the owner's lock, a pause for every request to a
/// large queue (docs/performance.md, "Growth pauses"). Here the largest copy
/// is one segment's own growth; reads and writes take one more index step.
struct SegmentedArray<Element> {
    private static var shift: Int { 12 }
    private static var mask: Int { (1 << shift) - 1 }

    private var segments: [[Element]] = []
    /// The number of elements.
    private(set) var count = 0

    init() {}

    /// The element at `index` (`0 ..< count`). Borrowed, not copied: reading
    /// one field of a record does not retain its strings.
    subscript(index: Int) -> Element {
        _read { yield segments[index &>> Self.shift][index & Self.mask] }
        _modify { yield &segments[index &>> Self.shift][index & Self.mask] }
    }

    /// Adds `element` at the end.
    mutating func append(_ element: Element) {
        if count & Self.mask == 0 { segments.append([]) }
        segments[segments.count - 1].append(element)
        count += 1
    }
}

extension SegmentedArray: RandomAccessCollection {
    var startIndex: Int { 0 }
    var endIndex: Int { count }
}

extension SegmentedArray: Sendable where Element: Sendable {}
