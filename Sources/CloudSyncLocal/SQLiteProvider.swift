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
    static let changeLogTriggers = """
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
    let database: SQLiteDatabase
    let clock: any StoreClock
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
            database =
                readOnly ? try Self.openReadOnly(path) : try Self.openForWriting(path, pageSize: pageSize, provider: id)
        } catch {
            throw Self.openingError(error, path: path, provider: id)
        }
    }

    /// Opens (creating it and its directory when needed) the database at `path` for writing, and migrates it to
    /// CloudSync's schema; a database holding tables of its own is refused (`ERR_CONFIG`) and left untouched.
    private static func openForWriting(_ path: String, pageSize: Int, provider id: String) throws -> SQLiteDatabase {
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
        let database = try SQLiteDatabase(path: path, options: options)
        try Self.migrations.migrate(database)
        return database
    }

    /// The store's error for a failure to open the database at `path`: a file that is not a database (or is
    /// corrupt) and other SQLite failures are `ERR_CONFIG`, a database locked past the busy timeout `ERR_TIMEOUT`.
    private static func openingError(_ error: any Error, path: String, provider id: String) -> CloudSyncError {
        if let error = error as? SQLiteError {
            switch error.code.primary {
            case .notADatabase, .corrupt:
                return CloudSyncError(
                    .config,
                    "\(path) is not a usable SQLite database (\(error.message)); it was left untouched: point the "
                        + "provider's path at another file, or move this one away",
                    provider: id)
            case .busy, .locked:
                // Another process holds the database past the busy timeout: that may pass, so it is retryable.
                return CloudSyncError(
                    .timeout,
                    "\(path) stayed locked by another process while it was being opened (\(error.message)); try "
                        + "again when that process is done",
                    provider: id)
            default:
                return CloudSyncError(.config, "cannot open \(path): \(error.details)", provider: id)
            }
        }
        if let error = error as? CloudSyncError { return error.attributed(provider: id) }
        return CloudSyncError(.config, "cannot open \(path): \(Self.describe(error))", provider: id)
    }

    /// Opens `path` without write access; a file without CloudSync's table (a process killed while it created it)
    /// reads as an empty database, and `path` is left as it is.
    static func openReadOnly(_ path: String) throws -> SQLiteDatabase {
        try migrations.openReadOnly(
            path: path, options: SQLiteDatabase.Options(),
            isCurrent: { database in try database.read { try $0.hasTable("kv") } }, otherwise: .emptyDatabase)
    }

    static func describe(_ error: any Error) -> String {
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

    var closedMessage: String {
        "the SQLite provider \(id) was closed; open a new provider on \(path) to use it again"
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        do {
            return try await database.read(body)
        } catch let error as SQLiteError {
            throw database.isClosed
                ? CloudSyncError(.closed, closedMessage, provider: id) : error.cloudSyncError(provider: id)
        }
    }

    func write<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
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
