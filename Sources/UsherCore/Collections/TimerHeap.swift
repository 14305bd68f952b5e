/// Scheduled calls in deadline order, behind both clocks: a min-heap whose
/// entries can be removed by handle in O(log n), so a cancelled call's closure
/// (and whatever it captured) is released at once instead of lingering until
/// its deadline.
///
/// Deadlines are plain integers in the owner's unit (`ManualClock`: the
/// `Timestamp`'s microseconds; `SystemClock`: Dispatch's monotonic
/// nanoseconds). Equal deadlines run in the order they were scheduled.
/// Not thread-safe: the owner keeps it behind a lock, and should release the
/// closures it gets back (`remove`, `popDue`) after unlocking.
struct TimerHeap: MinHeap, Sendable {
    typealias Action = @Sendable () -> Void

    /// Names one scheduled call; it goes stale once the call is removed or
    /// popped (its slot then holds another call, or none), so a late cancel
    /// is harmless.
    struct Handle: Hashable, Sendable {
        fileprivate let slot: Int32
        /// The call's schedule order: unique, never reused.
        fileprivate let order: UInt64
    }

    struct Node {
        var deadline: Int64
        var order: UInt64
        var slot: Int32
    }

    /// Where a call lives while scheduled; reused through `freeSlots`.
    private struct Slot {
        var action: Action?
        /// The schedule order of the call in the slot.
        var order: UInt64
        /// The slot's node in `heap`.
        var position: Int32 = 0
    }

    private var heap: [Node] = []
    private var slots: [Slot] = []
    private var freeSlots: [Int32] = []
    private var nextOrder: UInt64 = 0

    /// Calls still scheduled.
    var count: Int { heap.count }

    var isEmpty: Bool { heap.isEmpty }

    /// The earliest deadline, if any call is scheduled.
    var nextDeadline: Int64? { heap.first?.deadline }

    /// Schedules `action` at `deadline`.
    mutating func insert(at deadline: Int64, _ action: @escaping Action) -> Handle {
        nextOrder &+= 1
        let slot: Int32
        if let reused = freeSlots.popLast() {
            slot = reused
            slots[Int(slot)].action = action
            slots[Int(slot)].order = nextOrder
        } else {
            slot = Int32(slots.count)
            slots.append(Slot(action: action, order: nextOrder))
        }
        heap.append(Node(deadline: deadline, order: nextOrder, slot: slot))
        slots[Int(slot)].position = Int32(heap.count - 1)
        siftUp(heap.count - 1)
        return Handle(slot: slot, order: nextOrder)
    }

    /// Unschedules a call and returns its closure (nil when it already ran or
    /// was removed), so the caller can release it outside its lock.
    mutating func remove(_ handle: Handle) -> Action? {
        let i = Int(handle.slot)
        guard i < slots.count, slots[i].order == handle.order, slots[i].action != nil else { return nil }
        let position = Int(slots[i].position)
        let last = heap.removeLast()
        if position < heap.count {
            heap[position] = last
            slots[Int(last.slot)].position = Int32(position)
            if position > 0 && Self.precedes(last, heap[(position - 1) / 2]) {
                siftUp(position)
            } else {
                siftDown(position)
            }
        }
        return release(i)
    }

    /// Removes and returns the earliest call if it is due at `limit`.
    mutating func popDue(notAfter limit: Int64) -> (deadline: Int64, action: Action)? {
        guard let top = heap.first, top.deadline <= limit else { return nil }
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            slots[Int(last.slot)].position = 0
            siftDown(0)
        }
        return release(Int(top.slot)).map { (top.deadline, $0) }
    }

    /// Frees a slot whose node has left the heap.
    private mutating func release(_ i: Int) -> Action? {
        let action = slots[i].action
        slots[i].action = nil
        freeSlots.append(Int32(i))
        if heap.isEmpty && slots.count > 1024 {
            // After a burst, give the memory back (no handle can name a live slot now).
            slots = []
            freeSlots = []
            heap = []
        }
        return action
    }

    static func precedes(_ a: Node, _ b: Node) -> Bool {
        a.deadline != b.deadline ? a.deadline < b.deadline : a.order < b.order
    }

    func node(at index: Int) -> Node { heap[index] }

    mutating func place(_ node: Node, at index: Int) {
        heap[index] = node
        slots[Int(node.slot)].position = Int32(index)
    }
}
