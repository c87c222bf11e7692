import CloudSync
import CloudSyncSQLite
import Foundation

/// The change feed: every change to `kv` logged by triggers, whoever makes it, read after a cursor.
extension SQLiteProvider {
    /// The change feed's position: the database's id and the sequence number of its last change; nil for a database
    /// opened read-only before it had a change log.
    ///
    /// Every write to `kv` is logged by triggers in the same transaction, whoever makes it (another process or the
    /// `sqlite3` shell included).
    public func changeFeedCursor() async throws -> String? {
        metrics.recordRequest()
        return try await read { db -> String? in
            guard let (database, _, last) = try Self.feedPosition(db) else { return nil }
            return "\(database):\(last)"
        }
    }

    /// Keys set or removed after `cursor`, in the order they changed, each once per page; expired when the cursor
    /// names another database or the log was pruned past it.
    public func changes(since cursor: String, limit: Int) async throws -> ChangeFeedAnswer {
        metrics.recordRequest()
        let limit = max(limit, 1)
        return try await read { db -> ChangeFeedAnswer in
            guard let (database, pruned, last) = try Self.feedPosition(db) else {
                return .expired("the database has no change log (it was opened read-only before one was added)")
            }
            let parts = cursor.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, parts[0] == database, let after = Int64(parts[1]), after <= last else {
                return .expired("the cursor belongs to another database (the file was replaced)")
            }
            guard after >= pruned else {
                return .expired(
                    "the change log was pruned past the cursor (it keeps the last \(Self.changeLogRows) changes)")
            }
            let rows = try db.query(
                "SELECT seq, key, removed FROM cloudsync_changes WHERE seq > ? ORDER BY seq LIMIT ?",
                [after, limit + 1]
            ) { ($0.int64(0), $0.string(1) ?? "", $0.int64(2) != 0) }
            let page = rows.prefix(limit)
            var latest: [StoreKey: Bool] = [:]
            var order: [String] = []
            for (_, key, removed) in page {
                if latest.updateValue(removed, forKey: StoreKey(key)) == nil { order.append(key) }
            }
            return .changes(
                ChangePage(
                    changes: order.map { KeyChange(key: $0, removed: latest[StoreKey($0)] ?? false) },
                    cursor: "\(database):\(page.last?.0 ?? after)", hasMore: rows.count > limit))
        }
    }

    /// The database's id, how far its log was pruned, and its last change's sequence number; nil without a log.
    static func feedPosition(_ db: SQLiteConnection) throws -> (String, Int64, Int64)? {
        let exists = try db.query(
            "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'cloudsync_feed'"
        ) { _ in true }
        guard !exists.isEmpty else { return nil }
        return try db.query(
            "SELECT database_id, pruned_through, "
                + "coalesce((SELECT max(seq) FROM cloudsync_changes), pruned_through) FROM cloudsync_feed"
        ) { ($0.string(0) ?? "", $0.int64(1), $0.int64(2)) }.first
    }
}
