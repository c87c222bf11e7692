import CloudSync
import CloudSyncSQLite
import Foundation

/// Writing and removing values: each batch in one transaction, within the quota, logged for the change feed.
extension SQLiteProvider {
    /// Stores each value under its key in one transaction, positionally, stamping them with the clock's time.
    ///
    /// With ``maxBytes`` set, a value that would grow the data past it fails with `ERR_QUOTA_EXCEEDED` in its slot and
    /// the others are still written. Throws `ERR_CLOSED` after ``close()``, `ERR_QUOTA_EXCEEDED` when the disk is full,
    /// `ERR_TIMEOUT` when the database stays locked, and `ERR_PROVIDER` otherwise (read-only opens included); a throw
    /// writes nothing.
    public func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] {
        let now = clock.nowMilliseconds()
        let maxBytes = maxBytes
        let results: [Result<Void, CloudSyncError>]
        do {
            results = try await writeValues(items, now: now, maxBytes: maxBytes)
        } catch {
            metrics.recordFailedWrite()
            throw error
        }
        metrics.recordWrite(items, results)
        return results
    }

    /// Stores each value whose condition holds, checked in the transaction that writes it, positionally.
    ///
    /// No other connection, in this process or another, writes in between. Each success carries the value's digest,
    /// its version tag. Throws like ``set(_:)``.
    public func set(_ items: [KeyValue], conditions: [WriteCondition?]) async throws
        -> [Result<String?, CloudSyncError>]
    {
        let now = clock.nowMilliseconds()
        let results: [Result<Void, CloudSyncError>]
        do {
            results = try await writeValues(items, conditions: conditions, now: now, maxBytes: maxBytes)
        } catch {
            metrics.recordFailedWrite()
            throw error
        }
        metrics.recordWrite(items, results)
        return zip(items, results).map { item, result in result.map { SyncFingerprint.digest(of: item.value) } }
    }

    func writeValues(
        _ items: [KeyValue], conditions: [WriteCondition?]? = nil, now: Int64, maxBytes: Int64?
    ) async throws -> [Result<Void, CloudSyncError>] {
        try await write { [id] db in
            var unmet: [Int: CloudSyncError] = [:]
            if let conditions {
                for (index, condition) in conditions.enumerated() {
                    guard let condition, !(try Self.holds(condition, for: items[index].key, db)) else { continue }
                    unmet[index] = condition.unmet(key: items[index].key, provider: id)
                }
            }
            let passing = unmet.isEmpty ? items : items.indices.filter { unmet[$0] == nil }.map { items[$0] }
            var written: [Result<Void, CloudSyncError>]
            if let maxBytes {
                written = try Self.upsertWithinQuota(passing, now: now, maxBytes: maxBytes, db, provider: id)
            } else {
                try Self.upsert(passing, now: now, db)
                written = Array(repeating: .success(()), count: passing.count)
            }
            try Self.pruneChangeLog(db)
            guard !unmet.isEmpty else { return written }
            var outcomes = written.makeIterator()
            return items.indices.map { unmet[$0].map { .failure($0) } ?? outcomes.next()! }
        }
    }

    /// Whether `key`'s row meets `condition` now (a version is its value's digest).
    static func holds(_ condition: WriteCondition, for key: String, _ db: SQLiteConnection) throws -> Bool {
        condition.holds(for: try storedValue(of: key, db), version: SyncFingerprint.digest(of:))
    }

    static func storedValue(of key: String, _ db: SQLiteConnection) throws -> String? {
        let select = try db.cachedStatement("SELECT value FROM kv WHERE key = ?")
        return try select.withText(key, at: 1) { try select.step() ? select.string(0) : nil }
    }

    /// Writes every item: a hundred rows per statement, in order (a key given twice is inserted, then updated, as
    /// with one statement a row), the rest one at a time.
    static func upsert(_ items: [KeyValue], now: Int64, _ db: SQLiteConnection) throws {
        try db.writeRows(items.count, with: upsertStatement) { upsert, range in
            // Row r's parameters are 3r + 1 (key), 3r + 2 (value) and 3r + 3 (time).
            var texts: [(parameter: Int, text: String)] = []
            texts.reserveCapacity(2 * range.count)
            for (row, item) in items[range].enumerated() {
                texts.append((3 * row + 1, item.key))
                texts.append((3 * row + 2, item.value))
            }
            try upsert.withTexts(texts) {
                for row in 0..<range.count { try upsert.bind(now, at: 3 * row + 3) }
                try upsert.run()
            }
        }
    }

    /// Writes each item that keeps the data within `maxBytes`, measuring the value it replaces first; the others
    /// fail with `ERR_QUOTA_EXCEEDED` in their slot.
    static func upsertWithinQuota(
        _ items: [KeyValue], now: Int64, maxBytes: Int64, _ db: SQLiteConnection, provider id: String
    ) throws -> [Result<Void, CloudSyncError>] {
        var used = try usedBytes(db)
        let size = try db.prepare("SELECT length(CAST(value AS BLOB)) FROM kv WHERE key = ?")
        let upsert = try db.cachedStatement(upsertSQL(rows: 1))
        return try items.map { item -> Result<Void, CloudSyncError> in
            try size.bind(item.key)
            let previous = try size.step() ? size.int64(0) : -Int64(item.key.utf8.count)
            let growth = Int64(item.value.utf8.count) - previous
            guard used + growth <= maxBytes else {
                return .failure(
                    CloudSyncError(
                        .quotaExceeded,
                        "the database would grow past its limit of \(maxBytes) bytes (maxBytes); remove keys "
                            + "or raise the limit",
                        provider: id, key: item.key))
            }
            used += growth
            try upsertRow(item, now: now, upsert)
            return .success(())
        }
    }

    /// Writes one row with `upsert` (``upsertSQL(rows:)`` of one row), binding its texts by reference: SQLite copies
    /// the bytes into the row anyway.
    static func upsertRow(_ item: KeyValue, now: Int64, _ upsert: SQLiteStatement) throws {
        try upsert.bind(now, at: 3)
        try upsert.withText(item.key, at: 1) { try upsert.withText(item.value, at: 2) { try upsert.run() } }
    }

    /// Rows a multi-row upsert writes (see `SQLiteConnection.writeRows`); three parameters a row stay far below
    /// SQLite's limit.
    static let rowsPerStatement = 100
    static let upsertStatement = MultiRowStatement(rowsPerRun: rowsPerStatement, sql: upsertSQL)

    /// Inserts `rows` rows (key, value, update time), each updating the row its key already has instead.
    static func upsertSQL(rows: Int) -> String {
        "INSERT INTO kv (key, value, updated_at_ms) VALUES "
            + repeatElement("(?, ?, ?)", count: rows).joined(separator: ", ")
            + " ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at_ms = excluded.updated_at_ms"
    }

    /// Drops the oldest changes once the log holds a tenth more than ``changeLogRows``, remembering how far it
    /// pruned so a cursor from before is answered as expired.
    static func pruneChangeLog(_ db: SQLiteConnection, keeping rows: Int64 = changeLogRows) throws {
        // Run on every write: compiled once per connection.
        let bounds = try db.cachedStatement(
            "SELECT coalesce((SELECT max(seq) FROM cloudsync_changes), pruned_through), pruned_through "
                + "FROM cloudsync_feed")
        guard try bounds.step() else { return }
        let (last, pruned) = (bounds.int64(0), bounds.int64(1))
        bounds.reset()
        guard last - pruned > rows + rows / 10 else { return }
        try db.execute("DELETE FROM cloudsync_changes WHERE seq <= ?", last - rows)
        try db.execute("UPDATE cloudsync_feed SET pruned_through = ?", last - rows)
    }

    /// Removes each key in one transaction, positionally; a key not stored succeeds.
    ///
    /// Throws like ``set(_:)``; a throw removes nothing.
    public func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] {
        try await remove(keys, conditions: keys.map { _ in nil })
    }

    /// Removes each key whose condition holds, checked in the transaction that removes it, positionally.
    ///
    /// A key not stored succeeds whatever its condition. Throws like ``set(_:)``.
    public func remove(_ keys: [String], conditions: [WriteCondition?]) async throws
        -> [Result<Void, CloudSyncError>]
    {
        metrics.recordRequest()
        return try await write { [id] db in
            let delete = try db.cachedStatement("DELETE FROM kv WHERE key = ?")
            let results = try zip(keys, conditions).map { key, condition -> Result<Void, CloudSyncError> in
                if let condition, let stored = try Self.storedValue(of: key, db),
                    !condition.holds(for: stored, version: SyncFingerprint.digest(of:))
                {
                    return .failure(condition.unmet(key: key, provider: id))
                }
                try delete.withText(key, at: 1) { try delete.run() }
                return .success(())
            }
            try Self.pruneChangeLog(db)
            return results
        }
    }
}
