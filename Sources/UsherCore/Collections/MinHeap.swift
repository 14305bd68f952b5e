/// The sift steps of a binary min-heap kept in an array, shared by
/// `DeadlineHeap` (lazy deletion) and `TimerHeap` (removal by handle, which
/// records each node's position when it is placed).
protocol MinHeap {
    associatedtype Node
    /// Nodes in the heap.
    var count: Int { get }
    func node(at index: Int) -> Node
    /// Stores `node` at `index` (and notes where it is, when the heap tracks that).
    mutating func place(_ node: Node, at index: Int)
    static func precedes(_ a: Node, _ b: Node) -> Bool
}

extension MinHeap {
    /// Moves the node at `start` up until its parent precedes it.
    mutating func siftUp(_ start: Int) {
        var i = start
        let moving = node(at: i)
        while i > 0 {
            let parent = (i - 1) / 2
            let above = node(at: parent)
            guard Self.precedes(moving, above) else { break }
            place(above, at: i)
            i = parent
        }
        place(moving, at: i)
    }

    /// Moves the node at `start` down until it precedes both children.
    mutating func siftDown(_ start: Int) {
        var i = start
        let moving = node(at: i)
        let n = count
        while true {
            var child = 2 * i + 1
            guard child < n else { break }
            if child + 1 < n && Self.precedes(node(at: child + 1), node(at: child)) { child += 1 }
            let below = node(at: child)
            guard Self.precedes(below, moving) else { break }
            place(below, at: i)
            i = child
        }
        place(moving, at: i)
    }
}
