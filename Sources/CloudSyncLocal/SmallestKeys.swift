#if canImport(Glibc)
    import Glibc
#endif

/// The smallest keys after a cursor, in bytewise (UTF-8) order, gathered from keys offered in any order: what one
/// walk of a directory provider's tree keeps for its listing.
///
/// Keys are kept as bytes in one buffer and sorted by their positions in it, compared with `memcmp`: a walk offers
/// every file's key, and sorting `String`s (reference counting and a closure per comparison) cost more than reading
/// the directory. At most `2 × keeping` keys are held: beyond that the smallest `keeping` are kept and the rest
/// dropped, so memory stays bounded however many keys are offered.
struct SmallestKeys {
    /// Where one key's bytes are in `bytes`, its file's version, its size and its modification time in
    /// milliseconds (each -1, or `Int64.min` for the time, when unknown).
    private struct Span {
        var start: Int
        var count: Int
        var version: FileVersion?
        var size: Int64
        var modified: Int64
    }

    let keeping: Int
    private let cursor: [UInt8]?
    private var bytes: [UInt8] = []
    private var spans: [Span] = []
    /// Whether a key was dropped: the keys kept are then not every key after the cursor.
    private(set) var truncated = false

    init(after cursor: String?, keeping: Int) {
        self.cursor = cursor.map { Array($0.utf8) }
        self.keeping = max(keeping, 1)
    }

    /// Keeps `key` (UTF-8 bytes), with its file's version, size and modification time, if it sorts after the
    /// cursor.
    mutating func offer(
        _ key: UnsafeBufferPointer<UInt8>, version: FileVersion? = nil, size: Int64? = nil, modified: Int64? = nil
    ) {
        if let cursor, cursor.withUnsafeBufferPointer({ Self.compare($0, key) }) >= 0 { return }
        spans.append(
            Span(
                start: bytes.count, count: key.count, version: version, size: size ?? -1,
                modified: modified ?? .min))
        bytes.append(contentsOf: key)
        if spans.count >= 2 * keeping { sortAndTrim() }
    }

    /// The keys kept, sorted, and their versions, sizes and modification times.
    mutating func sortedKeys() -> (keys: [String], versions: [FileVersion?], sizes: [Int64?], modified: [Int64?]) {
        sortAndTrim()
        let keys = bytes.withUnsafeBufferPointer { base in
            spans.map { span in
                // Every key offered is valid UTF-8 (a decoded file name): nothing to repair.
                String(
                    decoding: UnsafeBufferPointer(rebasing: base[span.start..<span.start + span.count]), as: UTF8.self)
            }
        }
        return (
            keys, spans.map(\.version), spans.map { $0.size < 0 ? nil : $0.size },
            spans.map { $0.modified == .min ? nil : $0.modified }
        )
    }

    /// Sorts the spans and keeps the first `keeping`, their bytes copied together when any were dropped.
    private mutating func sortAndTrim() {
        bytes.withUnsafeBufferPointer { base in
            spans.sort { left, right in
                Self.compare(
                    UnsafeBufferPointer(rebasing: base[left.start..<left.start + left.count]),
                    UnsafeBufferPointer(rebasing: base[right.start..<right.start + right.count])) < 0
            }
        }
        guard spans.count > keeping else { return }
        spans.removeLast(spans.count - keeping)
        truncated = true
        var kept: [UInt8] = []
        kept.reserveCapacity(spans.reduce(0) { $0 + $1.count })
        for index in spans.indices {
            let span = spans[index]
            spans[index].start = kept.count
            kept += bytes[span.start..<span.start + span.count]
        }
        bytes = kept
    }

    /// Negative, zero or positive as `left` sorts before, equal to or after `right`, byte by byte (a prefix first).
    private static func compare(_ left: UnsafeBufferPointer<UInt8>, _ right: UnsafeBufferPointer<UInt8>) -> Int {
        let common = min(left.count, right.count)
        if common > 0, let a = left.baseAddress, let b = right.baseAddress {
            let order = memcmp(a, b, common)
            if order != 0 { return Int(order) }
        }
        return left.count - right.count
    }
}
