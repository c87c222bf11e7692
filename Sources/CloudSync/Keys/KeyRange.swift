/// The keys after one key up to and including another, in bytewise order.
///
/// One part of a job split between runners (`shards: N`). A nil end is open, so ``all`` holds every key.
public struct KeyRange: Sendable, Hashable, CustomStringConvertible {
    /// Keys must sort after this one; nil for no lower bound.
    public var after: String?
    /// Keys must sort at or before this one; nil for no upper bound.
    public var through: String?

    /// Every key.
    public static let all = KeyRange(after: nil, through: nil)

    /// The keys after `after` through `through`.
    public init(after: String?, through: String?) {
        self.after = after
        self.through = through
    }

    /// Whether `key` falls in the range.
    public func contains(_ key: String) -> Bool {
        (after.map { StoreKey.compareBytes(key, $0) > 0 } ?? true)
            && (through.map { StoreKey.compareBytes(key, $0) <= 0 } ?? true)
    }

    /// The keys in both this range and `other`.
    public func intersection(_ other: KeyRange) -> KeyRange {
        let lower: String? =
            switch (after, other.after) {
            case (let one?, let two?): StoreKey.compareBytes(one, two) >= 0 ? one : two
            case (let one, nil): one
            case (nil, let two): two
            }
        let upper: String? =
            switch (through, other.through) {
            case (let one?, let two?): StoreKey.compareBytes(one, two) <= 0 ? one : two
            case (let one, nil): one
            case (nil, let two): two
            }
        return KeyRange(after: lower, through: upper)
    }

    /// Whether `key` sorts past the range's upper end (so a listing in key order can stop).
    public func endsBefore(_ key: String) -> Bool {
        through.map { StoreKey.compareBytes(key, $0) > 0 } ?? false
    }

    /// The ranges `boundaries` (ascending by bytes) cut the key space into: up to the first, between each two, and
    /// after the last; every key falls in exactly one.
    public static func cut(at boundaries: [String]) -> [KeyRange] {
        var ranges: [KeyRange] = []
        ranges.reserveCapacity(boundaries.count + 1)
        var previous: String?
        for boundary in boundaries {
            ranges.append(KeyRange(after: previous, through: boundary))
            previous = boundary
        }
        ranges.append(KeyRange(after: previous, through: nil))
        return ranges
    }

    /// Where a listing of a provider with `capabilities` starts for this range: just after the range's start when
    /// the provider lists in key order and takes any key as its cursor, else at the beginning.
    public func firstCursor(listing capabilities: ProviderCapabilities) -> String? {
        capabilities.listsInKeyOrder && capabilities.cursorIsKey ? after : nil
    }

    /// The keys of one listing page that fall in the range, and whether the listing may stop there: in a listing in
    /// key order (`ordered`), the first key past the range's end ends it; another listing goes on to its end.
    public func keys(of page: [String], ordered: Bool) -> (keys: [String], pastEnd: Bool) {
        guard self != .all else { return (page, false) }
        let (positions, pastEnd) = positions(in: page, ordered: ordered)
        return (positions.map { page[$0] }, pastEnd)
    }

    /// The positions in `page` of the keys in the range, and whether the page went past the range's end: with
    /// `ordered` (a page in bytewise key order), nothing after the first key past the end is looked at.
    public func positions(in page: [String], ordered: Bool) -> (positions: [Int], pastEnd: Bool) {
        var positions: [Int] = []
        for (index, key) in page.enumerated() {
            if ordered, endsBefore(key) { return (positions, true) }
            if contains(key) { positions.append(index) }
        }
        return (positions, false)
    }

    /// `(after, through]`, keys quoted, open ends as `…`.
    public var description: String {
        "(" + (after.map { "\"\($0)\"" } ?? "…") + ", " + (through.map { "\"\($0)\"" } ?? "…") + "]"
    }
}
