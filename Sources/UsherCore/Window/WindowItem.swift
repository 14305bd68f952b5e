/// Where a window item stands: `delayed` → `queued` → `showing` →
/// `dismissed` | `expired`; `delayed`/`queued` → `dismissed` | `merged`.
package enum WindowItemStatus: String, Sendable, Equatable, CaseIterable {
    /// Asked with `delay_seconds`; queues when the delay ends.
    case delayed
    /// Waiting for the window.
    case queued
    /// Shown now (holds the window's one slot).
    case showing
    /// Finished: dismissed by a client, while shown or while queued.
    case dismissed
    /// Finished: its display time ran out (auto-dismiss).
    case expired
    /// Finished: merged into a queued item with the same key.
    case merged

    /// True for the three final statuses.
    package var isFinished: Bool { liveStatus == nil }

    /// The engine's status of a live item; nil for a finished one (those
    /// stand for several).
    package var liveStatus: VisitorStatus? {
        switch self {
        case .delayed: .delayed
        case .queued: .waiting
        case .showing: .granted
        case .dismissed, .expired, .merged: nil
        }
    }

    /// The window's name for a queue visitor's status.
    package init(_ status: VisitorStatus) {
        switch status {
        case .delayed: self = .delayed
        case .waiting: self = .queued
        case .granted: self = .showing
        case .completed, .released, .cancelled: self = .dismissed
        case .expired: self = .expired
        case .merged: self = .merged
        }
    }
}

/// One window item, as the API shows it.
///
/// Its wire form is `WindowItemBody` (UsherAPI).
package struct WindowItem: Sendable, Hashable {
    package var id: String
    /// The window's name.
    package var window: String
    package var key: String?
    package var title: String?
    package var message: String?
    package var payload: JSONValue?
    package var priority: Int
    package var status: WindowItemStatus
    /// 1-based place in showing order, while queued.
    package var position: Int?
    /// When it was posted.
    package var createdAt: Timestamp
    /// When it was shown.
    package var shownAt: Timestamp?
    /// When it will be dismissed by itself; nil while not shown, or when pinned.
    package var expiresAt: Timestamp?
    /// When it was dismissed, expired or merged.
    package var finishedAt: Timestamp?
    /// The fencing token of its showing.
    package var fence: Int64?
    /// The queued item it was merged into.
    package var mergedInto: String?
    /// Merged: `replaced` when a newer duplicate took its place (`dedup_keep: "latest"`).
    package var reason: String?

    /// The item a queue visitor of a window stands for.
    package init(_ v: VisitorView, window: String) {
        let content = WindowContent(stored: v.payload)
        id = v.id
        self.window = window
        key = v.key
        title = content.title
        message = content.message
        payload = content.payload
        priority = v.priority
        status = WindowItemStatus(v.status)
        position = v.status == .waiting ? v.position : nil
        createdAt = v.enqueuedAt
        shownAt = v.grantedAt
        expiresAt = v.expiresAt
        finishedAt = v.finishedAt
        fence = v.fence
        mergedInto = v.mergedInto
        reason = v.status == .merged || v.reason == FinishReason.deleted.rawValue ? v.reason : nil
    }
}

/// Live counts and lifetime totals of one window.
///
/// Invariant: `received_total == showing + queued + delayed + dismissed_total
/// + expired_total + merged_total`.
package struct WindowCounts: Sendable, Hashable {
    /// 1 while an item is shown, else 0.
    package var showing = 0
    /// Items waiting for the window.
    package var queued = 0
    /// Items whose delay has not ended.
    package var delayed = 0
    /// Items ever posted (not refused ones, not repeats of an existing id).
    package var receivedTotal = 0
    /// Items ever shown.
    package var shownTotal = 0
    /// Items dismissed by a client (shown or queued).
    package var dismissedTotal = 0
    /// Items dismissed by their display time.
    package var expiredTotal = 0
    /// Items merged into a queued item with the same key.
    package var mergedTotal = 0

    /// The window's names for the queue engine's counts.
    package init(_ c: QueueCounts) {
        showing = c.holding
        queued = c.waiting
        delayed = c.delayed
        receivedTotal = c.enqueuedTotal
        shownTotal = c.grantedTotal
        dismissedTotal = c.completedTotal + c.releasedTotal + c.cancelledTotal
        expiredTotal = c.expiredTotal
        mergedTotal = c.mergedTotal
    }
}

/// `GET /v1/windows/{w}`: the item shown, the queue behind it, counts.
package struct WindowState: Sendable, Hashable {
    package var name: String
    /// The config, defaults filled in.
    package var config: WindowConfig
    /// The item shown now, or nil.
    package var showing: WindowItem?
    /// The first `limit` queued items, in showing order.
    package var queued: [WindowItem]
    package var counts: WindowCounts
    /// Where the page resumes after each queued item; not part of the JSON.
    package var cursors: [String] = []
    /// True when more queued items follow the last one listed.
    package var more = false
    /// Where the next page starts (`next_cursor`), or nil on the last page.
    package var nextCursor: String?

    package init(
        name: String, config: WindowConfig, showing: WindowItem?, queued: [WindowItem], counts: WindowCounts
    ) {
        self.name = name
        self.config = config
        self.showing = showing
        self.queued = queued
        self.counts = counts
    }
}

/// The answer to `POST …/dismiss`: the item dismissed, and the one shown now.
package struct Dismissal: Sendable, Equatable {
    /// The item as it is after the dismiss (or as it was, if it had already finished).
    package var dismissed: WindowItem
    /// The item shown now (the next one, shown in the same step), or nil.
    package var showing: WindowItem?

    package init(dismissed: WindowItem, showing: WindowItem?) {
        self.dismissed = dismissed
        self.showing = showing
    }
}
