import CloudSync
import CloudSyncSQLite
import Foundation

/// Listing keys in bytewise order with their values' digests as version tags; counting them; the quota.
extension SQLiteProvider {
    /// Up to `limit` keys (at least 1) after `cursor`, in bytewise UTF-8 order; the page's `KeyPage.nextCursor` is
    /// its last key when more follow, nil at the end.
    ///
    /// Each key's version tag is the digest of its stored value (`SyncFingerprint.digest(of:)`), so it changes
    /// whenever the value does, whoever wrote it (the `sqlite3` shell included).
    ///
    /// Throws `ERR_CLOSED` after ``close()``, `ERR_TIMEOUT` or `ERR_PROVIDER` as ``get(_:)`` does.
    public func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage {
        metrics.recordRequest()
        let limit = max(limit, 1)
        var (keys, tags) = try await read { db in
            // One more than asked for tells whether another page follows. The values are in the rows the scan reads
            // anyway (the table is ordered by key), so tagging each key costs a digest, not another lookup.
            let select = try db.cachedStatement("SELECT key, value FROM kv WHERE key > ? ORDER BY key LIMIT ?")
            try select.bind(cursor ?? "", limit + 1)
            var keys: [String] = []
            var tags: [String?] = []
            keys.reserveCapacity(limit + 1)
            tags.reserveCapacity(limit + 1)
            while try select.step() {
                keys.append(select.string(0) ?? "")
                tags.append(select.withTextBytes(1) { SyncFingerprint.digest(ofUTF8: $0) })
            }
            return (keys, tags)
        }
        // The index returns keys in order after the cursor; anything else means the file is damaged or changed under
        // a read that took no locks, and a cursor going backwards would make the listing loop.
        var previous = cursor ?? ""
        for key in keys {
            guard StoreKey.compareBytes(previous, key) < 0 else {
                throw CloudSyncError(
                    .provider,
                    "\(path) listed its keys out of order (\"\(key)\" after \"\(previous)\"), so its index is "
                        + "damaged: check it with `sqlite3 \(path) 'PRAGMA integrity_check'` and restore it from a copy",
                    provider: id)
            }
            previous = key
        }
        // The row past the page only said that another follows.
        let more = keys.count > limit
        if more {
            keys.removeLast()
            tags.removeLast()
        }
        return KeyPage(keys: keys, nextCursor: more ? keys.last : nil, versions: tags)
    }

    /// The number of rows of `kv`, counted by SQLite.
    public func keyCount() async throws -> Int? {
        metrics.recordRequest()
        return try await read { db in try db.query("SELECT count(*) FROM kv") { Int($0.int64(0)) }.first ?? 0 }
    }

    /// The database's used pages in bytes (free pages not counted), with the limit when one is configured.
    public func quota() async throws -> ProviderQuota? {
        metrics.recordRequest()
        let used = try await read { db in try Self.usedBytes(db) }
        return ProviderQuota(usedBytes: used, totalBytes: maxBytes)
    }

    static func usedBytes(_ db: SQLiteConnection) throws -> Int64 {
        let pages = try db.query(
            "SELECT page_count - freelist_count, page_size FROM pragma_page_count, pragma_freelist_count, pragma_page_size"
        ) {
            $0.int64(0) * $0.int64(1)
        }
        return pages.first ?? 0
    }
}
