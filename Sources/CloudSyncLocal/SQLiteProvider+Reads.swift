import CloudSync
import CloudSyncSQLite
import Foundation

/// Reading values: each batch in one read transaction, by ranges of the key index where the keys allow.
extension SQLiteProvider {
    /// Each key's value, positionally (nil for a key not stored), read in one transaction.
    ///
    /// Throws `ERR_CLOSED` after ``close()``, `ERR_TIMEOUT` when another connection holds the database locked past the
    /// busy timeout, and `ERR_PROVIDER` for any other SQLite failure.
    public func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] {
        let results: [Result<String?, CloudSyncError>] = try await read { db in
            // An explicit read transaction: without it each lookup is a transaction of its own, with its own locks. A
            // read-only open already holds one for its whole life (one consistent state for a dry run), so it is
            // begun only when none is open.
            let ownTransaction = !db.isInTransaction
            if ownTransaction { try db.executeScript("BEGIN") }
            do {
                let values = try Self.rangeRead(keys, db) ?? Self.keyByKeyRead(keys, db)
                if ownTransaction { try db.executeScript("COMMIT") }
                return values
            } catch {
                if ownTransaction { try? db.executeScript("ROLLBACK") }
                throw error
            }
        }
        metrics.recordRequest(bytesRead: results.reduce(0) { $0 + ((try? $1.get())??.utf8.count ?? 0) })
        return results
    }

    /// Each key looked up on its own: one descent of the table's B-tree a key.
    static func keyByKeyRead(_ keys: some Collection<String>, _ db: SQLiteConnection) throws
        -> [Result<String?, CloudSyncError>]
    {
        let select = try db.cachedStatement("SELECT value FROM kv WHERE key = ?")
        return try keys.map { key in
            try select.withText(key, at: 1) { .success(try select.step() ? select.string(0) : nil) }
        }
    }

    /// Keys given in bytewise order (a page of a listing, as a sync or an export reads), read in one walk over the
    /// rows from the first to the last of them instead of a lookup each; nil when the keys are too few or not in that
    /// order (the caller looks each up then).
    ///
    /// The table's keys are TEXT with SQLite's BINARY collation, the same bytewise order, so the rows and the keys
    /// are merged as two sorted lists. A walk that meets more than twice as many rows as there are keys (keys
    /// scattered over a large table) stops, and the rest are looked up one by one.
    static func rangeRead(_ keys: [String], _ db: SQLiteConnection) throws -> [Result<String?, CloudSyncError>]? {
        guard keys.count >= 16, let first = keys.first, let last = keys.last else { return nil }
        for index in keys.indices.dropFirst() where StoreKey.compareBytes(keys[index - 1], keys[index]) > 0 {
            return nil
        }
        let rowLimit = 2 * keys.count
        let select = try db.cachedStatement(
            "SELECT key, value FROM kv WHERE key >= ? AND key <= ? ORDER BY key LIMIT ?")
        try select.bind(Int64(rowLimit), at: 3)
        var values: [Result<String?, CloudSyncError>] = []
        values.reserveCapacity(keys.count)
        try select.withTexts([(1, first), (2, last)]) {
            // Rows the walk has been given so far: fewer than the limit when it ends means no row is left unread.
            var returned = 0
            var hasRow = try select.step()
            if hasRow { returned = 1 }
            for key in keys {
                var key = key
                // Moves past the rows before `key`; the current row's order against it, or nil when none is left.
                let order: Int? = try key.withUTF8 { wanted in
                    while hasRow {
                        let order = select.withTextBytes(0) {
                            StoreKey.compareBytes($0, UnsafeRawBufferPointer(wanted))
                        }
                        if order >= 0 { return order }
                        hasRow = try select.step()
                        if hasRow { returned += 1 }
                    }
                    return nil
                }
                switch order {
                case 0: values.append(.success(select.string(1)))
                // The next row sorts after the key, or every row up to the last key was read: it is not stored.
                case .some: values.append(.success(nil))
                case nil where returned < rowLimit: values.append(.success(nil))
                case nil: return
                }
            }
        }
        guard values.count < keys.count else { return values }
        // The walk stopped at its row limit: the keys it did not reach, one by one.
        return values + (try keyByKeyRead(keys[values.count...], db))
    }
}
