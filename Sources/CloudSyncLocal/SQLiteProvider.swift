import CloudSync
import CloudSyncSQLite
import Foundation

/// The embedded default: every key in one SQLite file, in a table of key, value and update time.
///
/// Batches run inside single transactions; listing pages through the key index in key order (bytewise UTF-8);
/// write-ahead logging lets other processes read while one writes. The file and its directory are created owner-only
/// (0600 and 0700). A file that is not a SQLite database is refused, naming the path, and never overwritten.
public final class SQLiteProvider: Provider {
    /// The page size of a database this provider creates unless told otherwise: 16 KiB.
    ///
    /// A row of the `WITHOUT ROWID` table that does not fit in about a quarter of a page keeps only its start there
    /// and the rest in overflow pages, the last of them mostly empty. With SQLite's default 4 KiB pages every value
    /// between about 1,000 and 2,500 bytes took three to five times its size (100,000 values of 1 KB filled 471 MB,
    /// and an import wrote and synced all of it); 16 KiB pages store values up to about 4 KB whole (120 MB). The
    /// band moves rather than goes: values of about 5 to 12 KB now take two to three times their size, where 4 KiB
    /// pages took 1.3 to 1.5 times (docs/sqlite-page-size.md has the table). A database keeps the size it was made
    /// with.
    public static let defaultPageSize = 16_384

    /// The page sizes a new database may be given.
    public static let pageSizes = [4_096, 8_192, 16_384, 32_768, 65_536]

    static let migrations = SQLiteMigrator([
        SQLiteMigration(
            "create kv",
            sql: """
                CREATE TABLE kv (
                    key TEXT PRIMARY KEY NOT NULL,
                    value TEXT NOT NULL,
                    updated_at_ms INTEGER NOT NULL
                ) WITHOUT ROWID
                """),
        SQLiteMigration(
            "change feed",
            sql: """
                CREATE TABLE cloudsync_changes (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    key TEXT NOT NULL,
                    removed INTEGER NOT NULL
                );
                CREATE TABLE cloudsync_feed (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    database_id TEXT NOT NULL,
                    pruned_through INTEGER NOT NULL
                );
                INSERT INTO cloudsync_feed (id, database_id, pruned_through) VALUES (1, lower(hex(randomblob(16))), 0);
                """ + changeLogTriggers),
        // AUTOINCREMENT made every logged change also rewrite the table's row in sqlite_sequence, about a fifth of
        // a set's time in SQLite. Sequence numbers stay increasing without it: a new row takes the largest one plus
        // one, and pruning never removes the newest row. The triggers go first: SQLite checks them at a rename.
        SQLiteMigration(
            "change feed without AUTOINCREMENT",
            sql: """
                DROP TRIGGER IF EXISTS cloudsync_kv_inserted;
                DROP TRIGGER IF EXISTS cloudsync_kv_updated;
                DROP TRIGGER IF EXISTS cloudsync_kv_deleted;
                ALTER TABLE cloudsync_changes RENAME TO cloudsync_changes_autoincrement;
                CREATE TABLE cloudsync_changes (
                    seq INTEGER PRIMARY KEY,
                    key TEXT NOT NULL,
                    removed INTEGER NOT NULL
                );
                INSERT INTO cloudsync_changes (seq, key, removed)
                    SELECT seq, key, removed FROM cloudsync_changes_autoincrement ORDER BY seq;
                DROP TABLE cloudsync_changes_autoincrement;

                """ + changeLogTriggers),
    ])

    /// What logs each change of `kv` to `cloudsync_changes`, whoever writes the table (plain SQL included).
    private static let changeLogTriggers = """
        CREATE TRIGGER cloudsync_kv_inserted AFTER INSERT ON kv BEGIN
            INSERT INTO cloudsync_changes (key, removed) VALUES (new.key, 0);
        END;
        CREATE TRIGGER cloudsync_kv_updated AFTER UPDATE OF key, value ON kv BEGIN
            INSERT INTO cloudsync_changes (key, removed) SELECT old.key, 1 WHERE old.key IS NOT new.key;
            INSERT INTO cloudsync_changes (key, removed) VALUES (new.key, 0);
        END;
        CREATE TRIGGER cloudsync_kv_deleted AFTER DELETE ON kv BEGIN
            INSERT INTO cloudsync_changes (key, removed) VALUES (old.key, 1);
        END;
        """

    /// How many changes the change feed keeps: older ones are pruned (a few at a time, in the transaction of a
    /// write), and a cursor from before them is expired, so a sync from it compares everything.
    public static let changeLogRows: Int64 = 1_000_000

    /// The provider's name in the store, errors and reports (`sqlite` unless given).
    public let id: String
    /// A file-tier provider taking batches of up to 1,000 keys, listing and reporting quota; see
    /// ``capabilities(maxValueBytes:)``.
    public let capabilities: ProviderCapabilities
    /// The database file.
    public let path: String
    /// The most the database may use, in bytes of its used pages; nil for no limit.
    public let maxBytes: Int64?
    private let database: SQLiteDatabase
    private let clock: any StoreClock
    /// Counts each call (one transaction) as one request.
    public let metrics: ProviderMetrics

    /// Opens (creating when needed, with pages of `pageSize` bytes, one of ``pageSizes``) the database at `path`.
    ///
    /// With `readOnly` (dry runs, sources that must never be written) it opens an existing file without write
    /// access: reads see every committed change, those still in the write-ahead log included, writes fail, and the
    /// database and its log are never written; see `SQLiteDatabase.Options.readOnly`. A database holding tables other
    /// than CloudSync's own is refused for writing (`ERR_CONFIG`, naming them): map a ``SQLiteTableProvider`` onto
    /// one instead.
    public init(
        id: String = "sqlite", path: String, maxBytes: Int64? = nil, maxValueBytes: Int? = nil,
        clock: any StoreClock = SystemClock(), readOnly: Bool = false, pageSize: Int = SQLiteProvider.defaultPageSize,
        metrics: ProviderMetrics = ProviderMetrics()
    ) throws(CloudSyncError) {
        self.id = id
        self.metrics = metrics
        self.path = path
        self.maxBytes = maxBytes
        self.clock = clock
        self.capabilities = Self.capabilities(maxValueBytes: maxValueBytes)
        do {
            if readOnly {
                database = try Self.migrations.openReadOnly(path: path, options: SQLiteDatabase.Options())
            } else {
                try LocalFiles.createDirectory(containing: path)
                // Someone else's database is never changed: look before opening it for writing (which would switch
                // its journal and add CloudSync's tables).
                if FileManager.default.fileExists(atPath: path) {
                    let peek = try SQLiteDatabase(path: path, options: SQLiteDatabase.Options(readOnly: true))
                    let foreign = try peek.read { db in try Self.foreignTables(db) }
                    peek.close()
                    guard foreign.isEmpty else {
                        throw CloudSyncError(
                            .config,
                            "\(path) holds tables of its own (\(foreign.joined(separator: ", "))), so it is not "
                                + "CloudSync's to change: to read or write one of them, map the provider onto it with "
                                + "`table`, `keyColumn` and `valueColumn` (and `readOnly: true` for a source), or point "
                                + "`path` at a database of its own",
                            provider: id)
                    }
                }
                // Its own schema: no statement sorts more than a page, so temporary files stay in memory (each
                // page's upsert would otherwise spill a statement journal to /var/tmp).
                var options = SQLiteDatabase.Options()
                options.temporaryFilesInMemory = true
                options.pageSizeOfNewFile = pageSize
                database = try SQLiteDatabase(path: path, options: options)
                try Self.migrations.migrate(database)
            }
        } catch let error as SQLiteError where error.code.primary == .notADatabase || error.code.primary == .corrupt {
            throw CloudSyncError(
                .config,
                "\(path) is not a usable SQLite database (\(error.message)); it was left untouched: point the "
                    + "provider's path at another file, or move this one away",
                provider: id)
        } catch let error as SQLiteError where error.code.primary == .busy || error.code.primary == .locked {
            // Another process holds the database past the busy timeout: that may pass, so it is retryable.
            throw CloudSyncError(
                .timeout,
                "\(path) stayed locked by another process while it was being opened (\(error.message)); try again "
                    + "when that process is done",
                provider: id)
        } catch let error as SQLiteError {
            throw CloudSyncError(.config, "cannot open \(path): \(error.message)", provider: id)
        } catch let error as CloudSyncError {
            throw error.attributed(provider: id)
        } catch {
            throw CloudSyncError(.config, "cannot open \(path): \(Self.describe(error))", provider: id)
        }
    }

    private static func describe(_ error: any Error) -> String {
        let nsError = error as NSError
        return nsError.domain == NSPOSIXErrorDomain
            ? String(cString: strerror(Int32(nsError.code))) : nsError.localizedDescription
    }

    /// What a new, empty CloudSync database of `pageSize`-byte pages uses (seven pages: the schema, the migrations
    /// table and its index, the `kv` table, the change log, the feed's row and SQLite's sequence table), so the
    /// smallest `maxBytes` that lets anything be written is above it.
    public static func emptyDatabaseBytes(pageSize: Int = defaultPageSize) -> Int64 { 7 * Int64(pageSize) }

    /// Tables that are neither SQLite's nor CloudSync's (`kv`, `cloudsync_migrations` and the change feed's).
    static func foreignTables(_ db: SQLiteConnection) throws -> [String] {
        try db.query(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
                + "AND name NOT IN ('kv', 'cloudsync_migrations', 'cloudsync_changes', 'cloudsync_feed') ORDER BY name"
        ) { $0.string(0) ?? "" }
    }

    /// What a SQLite provider can do; the pipeline planner reads it before any database is opened.
    public static func capabilities(maxValueBytes: Int?) -> ProviderCapabilities {
        ProviderCapabilities(
            maxValueBytes: maxValueBytes, tier: .file, batchLimit: 1000, canList: true, reportsQuota: true,
            listsInKeyOrder: true, cursorIsKey: true, tagsAreValueDigests: true, conditionalWrites: true)
    }

    /// Available until ``close()``, then `closed`; an open database is always available.
    public func availability() async -> Availability {
        database.isClosed ? .unavailable(.closed, closedMessage) : .available
    }

    /// Closes the database after the calls already waiting for it; later calls fail with `ERR_CLOSED`.
    ///
    /// Closing twice is harmless. When no other connection has the file open, SQLite checkpoints the write-ahead log
    /// into the database and removes its `-wal` and `-shm` files, so the file alone holds everything.
    public func close() async { await database.close() }

    private var closedMessage: String {
        "the SQLite provider \(id) was closed; open a new provider on \(path) to use it again"
    }

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
    private static func keyByKeyRead(_ keys: some Collection<String>, _ db: SQLiteConnection) throws
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

    private func writeValues(
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
    private static func holds(_ condition: WriteCondition, for key: String, _ db: SQLiteConnection) throws -> Bool {
        condition.holds(for: try storedValue(of: key, db), version: SyncFingerprint.digest(of:))
    }

    private static func storedValue(of key: String, _ db: SQLiteConnection) throws -> String? {
        let select = try db.cachedStatement("SELECT value FROM kv WHERE key = ?")
        return try select.withText(key, at: 1) { try select.step() ? select.string(0) : nil }
    }

    /// Writes every item: a hundred rows per statement, in order (a key given twice is inserted, then updated, as
    /// with one statement a row), the rest one at a time.
    private static func upsert(_ items: [KeyValue], now: Int64, _ db: SQLiteConnection) throws {
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
    private static func upsertWithinQuota(
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
    private static func upsertRow(_ item: KeyValue, now: Int64, _ upsert: SQLiteStatement) throws {
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
    private static func feedPosition(_ db: SQLiteConnection) throws -> (String, Int64, Int64)? {
        let exists = try db.query(
            "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'cloudsync_feed'"
        ) { _ in true }
        guard !exists.isEmpty else { return nil }
        return try db.query(
            "SELECT database_id, pruned_through, "
                + "coalesce((SELECT max(seq) FROM cloudsync_changes), pruned_through) FROM cloudsync_feed"
        ) { ($0.string(0) ?? "", $0.int64(1), $0.int64(2)) }.first
    }

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

    private static func usedBytes(_ db: SQLiteConnection) throws -> Int64 {
        let pages = try db.query(
            "SELECT page_count - freelist_count, page_size FROM pragma_page_count, pragma_freelist_count, pragma_page_size"
        ) {
            $0.int64(0) * $0.int64(1)
        }
        return pages.first ?? 0
    }

    private func read<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        do {
            return try await database.read(body)
        } catch let error as SQLiteError {
            throw database.isClosed
                ? CloudSyncError(.closed, closedMessage, provider: id) : error.cloudSyncError(provider: id)
        }
    }

    private func write<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        do {
            return try await database.write(body)
        } catch let error as SQLiteError {
            throw database.isClosed
                ? CloudSyncError(.closed, closedMessage, provider: id) : error.cloudSyncError(provider: id)
        }
    }
}

extension SQLiteError {
    /// The store's error for a SQLite failure: a database locked past the busy timeout may pass, a full disk
    /// needs space, anything else is the provider's failure.
    func cloudSyncError(provider: String) -> CloudSyncError {
        switch code.primary {
        case .busy, .locked:
            return CloudSyncError(
                .timeout, "the database stayed locked by another connection: \(message)", provider: provider)
        case .full:
            return CloudSyncError(.quotaExceeded, "the disk is full: \(message)", provider: provider)
        case .readOnly:
            return CloudSyncError(
                .provider, "the database \(path ?? "") was opened read-only and cannot be written: \(message)",
                provider: provider)
        default:
            return CloudSyncError(.provider, description, provider: provider)
        }
    }
}
