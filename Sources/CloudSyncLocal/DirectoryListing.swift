import CloudSync
import Synchronization

/// The sorted keys one walk of a directory provider's tree found, serving the later pages of the listing that took
/// it, so a full listing walks the tree once rather than once per page.
///
/// A walk keeps the smallest ``DirectoryListings/windowKeys`` keys after its starting cursor (memory stays bounded
/// however many files there are); a listing that goes past them walks again from there.
final class DirectoryListingWindow: @unchecked Sendable {
    /// The keys found after the cursor the walk started from, in bytewise order.
    let keys: [String]
    /// Each key's file version as the walk found it (nil where it gave none).
    let versions: [FileVersion?]
    /// Each key's file size as the walk found it (nil where it gave none).
    let sizes: [Int64?]
    /// Each key's file modification time in milliseconds since the epoch as the walk found it (nil where it gave
    /// none).
    let modified: [Int64?]
    /// Whether `keys` holds every key after the starting cursor (the walk kept them all).
    let complete: Bool
    /// The position of the next page in `keys`, and the cursor that asks for it; guarded by ``DirectoryListings``.
    var next = 0
    var expectedCursor: String?
    var lastUsed: ContinuousClock.Instant

    init(
        keys: [String], versions: [FileVersion?], sizes: [Int64?], modified: [Int64?], complete: Bool,
        now: ContinuousClock.Instant
    ) {
        self.keys = keys
        self.versions = versions
        self.sizes = sizes
        self.modified = modified
        self.complete = complete
        self.lastUsed = now
    }
}

/// The listing windows of one directory provider still in use.
///
/// Freshness: a listing's first page (no cursor) always walks the tree; its later pages come from that walk, so
/// every key present from the listing's start to its end is listed exactly once, in order, and a key added or
/// removed meanwhile may or may not appear (as ``Provider`` allows for a listing with writes going on). A page asked
/// for with a cursor no window handed out (a listing resumed elsewhere) walks afresh. When several windows handed out
/// the same cursor, the newest serves it: it was taken later, so it holds every key the older listings must see. A
/// window goes when its listing ends, or after ``idleLimit`` unused.
final class DirectoryListings: Sendable {
    /// Keys one walk keeps at most; about 100 bytes each in memory.
    static let windowKeys = 262_144
    /// How long an unfinished listing's window is kept for its next page.
    static let idleLimit = Duration.seconds(300)
    /// How many listings' windows are kept at once (concurrent listings of one provider are rare).
    static let maxWindows = 4

    /// Oldest walk first.
    private let windows = Mutex<[DirectoryListingWindow]>([])

    /// The page after `cursor` from a window that handed out `cursor`, or nil when none did.
    func page(after cursor: String, limit: Int, now: ContinuousClock.Instant) -> KeyPage? {
        windows.withLock { windows in
            windows.removeAll { now - $0.lastUsed > Self.idleLimit }
            guard
                let index = windows.lastIndex(where: { window in
                    window.expectedCursor.map { StoreKey.bytesEqual($0, cursor) } ?? false
                })
            else { return nil }
            let window = windows[index]
            guard window.next < window.keys.count || window.complete else {
                windows.remove(at: index)
                return nil
            }
            return serve(window, at: index, limit: limit, now: now, in: &windows)
        }
    }

    /// The first page of `window`, freshly walked, which then serves the pages after it.
    func firstPage(of window: DirectoryListingWindow, limit: Int, now: ContinuousClock.Instant) -> KeyPage {
        windows.withLock { windows in
            windows.append(window)
            if windows.count > Self.maxWindows { windows.removeFirst(windows.count - Self.maxWindows) }
            return serve(window, at: windows.count - 1, limit: limit, now: now, in: &windows)
        }
    }

    private func serve(
        _ window: DirectoryListingWindow, at index: Int, limit: Int, now: ContinuousClock.Instant,
        in windows: inout [DirectoryListingWindow]
    ) -> KeyPage {
        let end = min(window.next + limit, window.keys.count)
        let keys = Array(window.keys[window.next..<end])
        // Tags are spelled a page at a time: the window keeps the figures, not a string for every key.
        let versions = window.versions[window.next..<end].map { $0?.tag }
        let sizes = Array(window.sizes[window.next..<end])
        let modified = Array(window.modified[window.next..<end])
        window.next = end
        window.lastUsed = now
        let more = end < window.keys.count || !window.complete
        guard more, let last = keys.last else {
            windows.remove(at: index)
            return KeyPage(keys: keys, nextCursor: nil, versions: versions, sizes: sizes, modified: modified)
        }
        window.expectedCursor = last
        return KeyPage(keys: keys, nextCursor: last, versions: versions, sizes: sizes, modified: modified)
    }
}
