extension [String] {
    /// The reply field at `index`; nil past the end, so a short reply reads as unreadable.
    func element(_ index: Int) -> String? { indices.contains(index) ? self[index] : nil }
}
