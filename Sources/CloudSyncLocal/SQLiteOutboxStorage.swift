import CloudSync
import CloudSyncSQLite
import Foundation

/// Outbox storage in a SQLite file: one row per entry, so queueing costs the same with 10 or 10,000 entries waiting.
///
/// Every call is one transaction in write-ahead-log mode with `synchronous = FULL`: when `replace` (or `commit`, a
/// whole batch of the outbox's changes) returns, the entries are in the log and fsynced. They therefore survive the
/// process being killed at any moment, and a power loss or kernel crash too, as far as the disk honours fsync. A call
/// interrupted before its commit leaves no trace. The file is created with mode 0600 (it holds encoded values).
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
    public func close() {
        database.close()
    }

    /// Runs `sql` once per element of `rows`, with that element's values, on a statement prepared once per
    /// connection.
    private func run(_ sql: String, on db: SQLiteConnection, rows: [[any SQLiteBindable]]) throws {
        let statement = try db.cachedStatement(sql)
        for values in rows { try statement.bind(values).run() }
    }

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
    ///
    /// A file without the outbox table (a process killed while it created it) holds nothing.
    public static func snapshot(path: String) throws -> [OutboxEntry] {
        let database = try SQLiteDatabase(path: path, options: .init(readOnly: true))
        guard try database.read({ try $0.hasTable("outbox") }) else { return [] }
        return try SQLiteOutboxStorage(database: database).loadAll()
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
        try commit(storing: [entry], deleting: [])
    }

    /// Removes the entries `ids`, then stores each of `entries` (each replacing any other entry for its key and
    /// provider), in one fsynced transaction: when it returns all of it survives a crash, and a crash before that
    /// leaves none of it.
    ///
    /// Throws `ERR_CLOSED` after ``close()``, or the `SQLiteError` of a failed write (nothing is changed then).
    public func commit(storing entries: [OutboxEntry], deleting ids: [Int64]) throws {
        try unlessClosed {
            try database.write { db in
                if !ids.isEmpty { try run("DELETE FROM outbox WHERE id = ?", on: db, rows: ids.map { [$0] }) }
                try upsert(entries, on: db)
            }
        }
    }

    /// Rows one upsert statement writes (see `SQLiteConnection.writeRows`); nine parameters a row stay far below
    /// SQLite's limit.
    static let rowsPerStatement = 100
    static let upsertStatement = MultiRowStatement(rowsPerRun: rowsPerStatement, sql: upsertSQL)

    /// Stores each entry, a hundred rows per statement and the rest one at a time; the row of the same key and
    /// provider, if any, takes the entry's id and fields (one upsert each, in order).
    private func upsert(_ entries: [OutboxEntry], on db: SQLiteConnection) throws {
        try db.writeRows(entries.count, with: Self.upsertStatement) { statement, range in
            // Row r's parameters are 9r + 1 … 9r + 9, in the order of the columns; a remove's value stays NULL.
            var texts: [(parameter: Int, text: String)] = []
            texts.reserveCapacity(5 * range.count)
            for (row, entry) in entries[range].enumerated() {
                let first = 9 * row
                texts.append((first + 2, entry.key))
                texts.append((first + 3, entry.provider))
                texts.append((first + 4, entry.operation.rawValue))
                if let value = entry.encodedValue { texts.append((first + 5, value)) }
                texts.append((first + 9, entry.lastErrorCode))
            }
            try statement.withTexts(texts) {
                for (row, entry) in entries[range].enumerated() {
                    let first = 9 * row
                    try statement.bind(entry.id, at: first + 1)
                    try statement.bind(Int64(entry.attempts), at: first + 6)
                    try statement.bind(entry.nextAttemptAtMs, at: first + 7)
                    try statement.bind(entry.enqueuedAtMs, at: first + 8)
                }
                try statement.run()
            }
        }
    }

    /// Inserts `rows` entries, each replacing the row its key and provider already have.
    static func upsertSQL(rows: Int) -> String {
        """
        INSERT INTO outbox (id, key, provider, operation, value, attempts, next_attempt_at_ms, enqueued_at_ms,
                            last_error_code)
        VALUES \(repeatElement("(?, ?, ?, ?, ?, ?, ?, ?, ?)", count: rows).joined(separator: ", "))
        ON CONFLICT (key, provider) DO UPDATE SET
            id = excluded.id, operation = excluded.operation, value = excluded.value,
            attempts = excluded.attempts, next_attempt_at_ms = excluded.next_attempt_at_ms,
            enqueued_at_ms = excluded.enqueued_at_ms, last_error_code = excluded.last_error_code
        """
    }

    /// Stores the attempt counts, next attempt times and last error codes of `entries`, matched by id, in one
    /// transaction; ids no longer stored are skipped.
    ///
    /// Throws `ERR_CLOSED` after ``close()``, or the `SQLiteError` of a failed write (nothing is changed then).
    public func update(_ entries: [OutboxEntry]) throws {
        try unlessClosed {
            try database.write { db in
                try run(
                    "UPDATE outbox SET attempts = ?, next_attempt_at_ms = ?, last_error_code = ? WHERE id = ?", on: db,
                    rows: entries.map { [$0.attempts, $0.nextAttemptAtMs, $0.lastErrorCode, $0.id] })
            }
        }
    }

    /// Removes the entries with these ids in one transaction; unknown ids are ignored.
    ///
    /// Throws `ERR_CLOSED` after ``close()``, or the `SQLiteError` of a failed write (nothing is changed then).
    public func delete(ids: [Int64]) throws {
        try unlessClosed {
            try database.write { db in try run("DELETE FROM outbox WHERE id = ?", on: db, rows: ids.map { [$0] }) }
        }
    }

    /// SQLite's `PRAGMA integrity_check` verdict: "ok" when the file is sound.
    public func integrityCheck() throws -> String {
        try database.read { db in try db.query("PRAGMA integrity_check") { $0.string(0) ?? "" }.joined(separator: "\n")
        }
    }
}
