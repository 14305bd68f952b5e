/// A pipeline's filters by name, kept in the order they run: descending
/// `priority`, ties by name (byte order).
package struct PipelineFilters: Sendable, Hashable {
    /// One named filter.
    package struct Entry: Sendable, Hashable {
        /// The filter's name (its route segment).
        package var name: String
        /// The filter itself.
        package var filter: PipelineFilter
    }

    /// The filters in the order they run.
    package private(set) var ordered: [Entry] = []

    /// No filters.
    package init() {}

    /// The given filters, ordered.
    init(_ filters: [String: PipelineFilter]) {
        ordered = filters.map { Entry(name: $0.key, filter: $0.value) }
        ordered.sort(by: Self.runsBefore)
    }

    /// How many filters there are.
    package var count: Int { ordered.count }
    /// True when there are none.
    var isEmpty: Bool { ordered.isEmpty }

    /// The filter named `name`.
    package subscript(name: String) -> PipelineFilter? {
        ordered.first(where: { $0.name == name })?.filter
    }

    /// The filters as `{name: filter}`.
    var byName: [String: PipelineFilter] {
        Dictionary(ordered.map { ($0.name, $0.filter) }, uniquingKeysWith: { a, _ in a })
    }

    /// Adds or replaces a filter; true when it is new.
    @discardableResult
    package mutating func put(name: String, _ filter: PipelineFilter) -> Bool {
        let isNew: Bool
        if let i = ordered.firstIndex(where: { $0.name == name }) {
            ordered.remove(at: i)
            isNew = false
        } else {
            isNew = true
        }
        let entry = Entry(name: name, filter: filter)
        let at = ordered.firstIndex(where: { Self.runsBefore(entry, $0) }) ?? ordered.count
        ordered.insert(entry, at: at)
        return isNew
    }

    /// Removes a filter; false when there is none of that name.
    @discardableResult
    package mutating func remove(name: String) -> Bool {
        guard let i = ordered.firstIndex(where: { $0.name == name }) else { return false }
        ordered.remove(at: i)
        return true
    }

    /// Runs every filter in order on a payload being handed out; nil means a
    /// filter dropped it (the filters after it do not run).
    package func apply(to payload: JSONValue) -> JSONValue? {
        var current = payload
        for entry in ordered {
            guard let next = entry.filter.apply(to: current) else { return nil }
            current = next
        }
        return current
    }

    private static func runsBefore(_ a: Entry, _ b: Entry) -> Bool {
        a.filter.priority != b.filter.priority ? a.filter.priority > b.filter.priority : a.name < b.name
    }
}
