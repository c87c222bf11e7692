import CloudSync
import CloudSyncHTTP
import Foundation
import Synchronization

/// Listing: pages of one sorted listing of the folder, each key with its file's checksum.
extension DriveProvider {
    // MARK: List

    /// One page of keys in bytewise order, each name once.
    ///
    /// Drive's own order cannot be trusted for paging: `orderBy=name` is documented only as "alphabetical" (its web
    /// interface sorts case-insensitively, and very large folders ignore it), and a page token is a position in a
    /// listing that removals shift. So the first page reads every name of the app data folder (all of Drive's pages,
    /// one request per ``pageSize`` files, which also refreshes the file id cache), sorts them by their bytes, and
    /// serves pages from that; the cursor names the listing and the last key yielded, so a removal never moves it,
    /// and a listing this provider no longer holds (another process, or more than ``keptListings`` at once) is read
    /// again and continues after that key.
    public func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage {
        try ensureOpen()
        let (listingID, last) = Self.decodeCursor(cursor)
        var names = listingID.flatMap { id in listings.withLock { $0.first { $0.id == id }?.names } }
        let id = names == nil ? UUID().uuidString : listingID!
        if names == nil {
            let read = try await allNames()
            names = read
            listings.withLock { listings in
                listings.append((id, read))
                if listings.count > Self.keptListings { listings.removeFirst(listings.count - Self.keptListings) }
            }
        }
        let sorted = names ?? []
        var start = 0
        if let last {
            // The first name after `last`, by binary search.
            var high = sorted.count
            while start < high {
                let middle = (start + high) / 2
                if StoreKey.compareBytes(sorted[middle].name, last) <= 0 { start = middle + 1 } else { high = middle }
            }
        }
        let end = min(start + max(limit, 1), sorted.count)
        let page = sorted[start..<end]
        let keys = page.map(\.name)
        let versions = page.map(\.version)
        // Drive's own clock: what a backup repository ages its locks by.
        let modified = page.map(\.modified)
        guard end < sorted.count, let lastKey = keys.last else {
            listings.withLock { $0.removeAll { $0.id == id } }
            return KeyPage(keys: keys, nextCursor: nil, versions: versions, modified: modified)
        }
        return KeyPage(
            keys: keys, nextCursor: Self.encodeCursor(listing: id, last: lastKey), versions: versions,
            modified: modified)
    }

    /// How many listings under way this provider keeps the names of; an older one is read again when its cursor
    /// comes back.
    public static let keptListings = 4

    /// Every key in the app data folder, each once, in bytewise order, with its file's checksum and modification
    /// time.
    func allNames() async throws(CloudSyncError) -> [(name: String, version: String?, modified: Int64?)] {
        try await listFolder().sorted { $0.key < $1.key }.map { ($0.key.string, $0.value.version, $0.value.modified) }
    }

    static func encodeCursor(listing: String, last: String) -> String {
        let data = try? JSONSerialization.data(withJSONObject: [listing, last])
        return String(decoding: data ?? Data(), as: UTF8.self)
    }

    /// The listing and last key a cursor names; a cursor of another form names neither, so the listing starts over.
    static func decodeCursor(_ cursor: String?) -> (listing: String?, last: String?) {
        guard let cursor, let array = (try? JSONSerialization.jsonObject(with: Data(cursor.utf8))) as? [String],
            array.count == 2
        else { return (nil, nil) }
        return (array[0], array[1].isEmpty ? nil : array[1])
    }
}
