import CloudSync
import CloudSyncSQLite
import Foundation

/// Outbox storage in a SQLite file: one row per entry, so queueing costs the same with 10 or 10,000 entries waiting.
///
/// Every change is its own transaction in write-ahead-log mode with `synchronous = FULL`: when `replace` returns,
/// the entry is in the log and fsynced. It therefore survives the process being killed at any moment, and a power
/// loss or kernel crash too, as far as the disk honours fsync. A change interrupted before its commit leaves no
/// trace. The file is created with mode 0600 (it holds encoded values).
public final class SQLiteOutboxStorage: OutboxStorage {
    static let migrations = SQLiteMigrator([
        SQLiteMigration(
            "create outbox",
            sql: """
                CREATE TABLE outbox (
                    id INTEGER PRIMARY KEY,
                    key TEXT NOT NULL,
                    provider TEXT NOT NULL,
                    operation TEXT NOT NULL CHECK (operation IN ('set', 'remove')),
                    value TEXT,
                    attempts INTEGER NOT NULL,
                    next_attempt_at_ms INTEGER NOT NULL,
                    enqueued_at_ms INTEGER NOT NULL,
                    last_error_code TEXT NOT NULL,
                    UNIQUE (key, provider)
                )
                """)
    ])

    private let database: SQLiteDatabase

    /// Opens (creating when needed) the outbox database at `path`; its directory must exist.
    public init(path: String) throws {
        database = try SQLiteDatabase(path: path, options: .init(durability: .powerLossSafe))
        try Self.migrations.migrate(database)
    }

    /// Closes the database.
    ///
    /// Later calls fail with `ERR_CLOSED`; closing twice is harmless.
    /// When no other connection has the file open, the write-ahead log is checkpointed into it and its `-wal` and
    /// `-shm` files are removed.
    public func close() { database.close() }

    /// Runs `work`, turning the error of a call after ``close()`` into `ERR_CLOSED`.
    private func unlessClosed<T>(_ work: () throws -> T) throws -> T {
        do {
            return try work()
        } catch let error as SQLiteError where database.isClosed {
            throw CloudSyncError(
                .closed, "the outbox storage \(database.path) was closed; open it again to use it (\(error.message))")
        }
    }

    /// The entries of an existing outbox file, those still in its write-ahead log included, read without write
    /// access (for dry runs): the database and its log are never written; see `SQLiteDatabase.Options.readOnly` for
    /// the index files SQLite may create.
    public static func snapshot(path: String) throws -> [OutboxEntry] {
        try SQLiteOutboxStorage(database: SQLiteDatabase(path: path, options: .init(readOnly: true))).loadAll()
    }

    private init(database: SQLiteDatabase) { self.database = database }

    /// Every entry in the file, in the order they were queued (by id).
    ///
    /// Throws `ERR_CLOSED` after ``close()``, or the `SQLiteError` of a failed read.
    public func loadAll() throws -> [OutboxEntry] {
        try unlessClosed {
            try database.read { db in
                try db.query(
                    """
                    SELECT id, key, provider, operation, value, attempts, next_attempt_at_ms, enqueued_at_ms,
                           last_error_code
                    FROM outbox ORDER BY id
                    """
                ) { row in
                    OutboxEntry(
                        id: row.int64(0), key: row.string(1) ?? "",
                        operation: FailedWrite.Operation(rawValue: row.string(3) ?? "") ?? .set,
                        encodedValue: row.string(4), provider: row.string(2) ?? "", attempts: Int(row.int64(5)),
                        nextAttemptAtMs: row.int64(6), enqueuedAtMs: row.int64(7), lastErrorCode: row.string(8) ?? "")
                }
            }
        }
    }

    /// Stores `entry` and removes any other entry for its key and provider, in one fsynced transaction: when it
    /// returns, the entry survives a crash.
    ///
    /// Throws `ERR_CLOSED` after ``close()``, or the `SQLiteError` of a failed write (nothing is changed then).
    public func replace(_ entry: OutboxEntry) throws {
        try unlessClosed {
            try database.write { db in
                try db.execute("DELETE FROM outbox WHERE key = ? AND provider = ?", entry.key, entry.provider)
                try db.execute(
                    """
                    INSERT INTO outbox (id, key, provider, operation, value, attempts, next_attempt_at_ms,
                                        enqueued_at_ms, last_error_code)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """, entry.id, entry.key, entry.provider, entry.operation.rawValue, entry.encodedValue,
                    entry.attempts, entry.nextAttemptAtMs, entry.enqueuedAtMs, entry.lastErrorCode)
            }
        }
    }

    /// Stores the attempt counts, next attempt times and last error codes of `entries`, matched by id, in one
    /// transaction; ids no longer stored are skipped.
    ///
    /// Throws `ERR_CLOSED` after ``close()``, or the `SQLiteError` of a failed write (nothing is changed then).
    public func update(_ entries: [OutboxEntry]) throws {
        try unlessClosed {
            try database.write { db in
                let statement = try db.prepare(
                    "UPDATE outbox SET attempts = ?, next_attempt_at_ms = ?, last_error_code = ? WHERE id = ?")
                for entry in entries {
                    try statement.bind(entry.attempts, entry.nextAttemptAtMs, entry.lastErrorCode, entry.id).run()
                }
            }
        }
    }

    /// Removes the entries with these ids in one transaction; unknown ids are ignored.
    ///
    /// Throws `ERR_CLOSED` after ``close()``, or the `SQLiteError` of a failed write (nothing is changed then).
    public func delete(ids: [Int64]) throws {
        try unlessClosed {
            try database.write { db in
                let statement = try db.prepare("DELETE FROM outbox WHERE id = ?")
                for id in ids { try statement.bind(id).run() }
            }
        }
    }

    /// SQLite's `PRAGMA integrity_check` verdict: "ok" when the file is sound.
    public func integrityCheck() throws -> String {
        try database.read { db in try db.query("PRAGMA integrity_check") { $0.string(0) ?? "" }.joined(separator: "\n")
        }
    }
}
