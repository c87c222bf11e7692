internal import CSQLite
import Foundation

/// One open SQLite connection.
///
/// Reached only through ``SQLiteDatabase/read(_:)`` and ``SQLiteDatabase/write(_:)``,
/// which serialize access to it; it is not `Sendable` and must not escape their bodies.
package final class SQLiteConnection {
    let handle: OpaquePointer
    /// The database file this connection opened.
    package let path: String

    /// Opens `path`.
    ///
    /// With `readOnly`, without write access, and with `readOnlySharedMemory` also without write access to the `-shm`
    /// index (SQLite's `readonly_shm`), which must then exist. With `immutable` (read-only too), SQLite
    /// takes no locks and creates nothing: only sound while nothing else writes the file and no log or journal
    /// holds committed data. Without `create`, a missing file fails rather than being created.
    init(
        path: String, readOnly: Bool, readOnlySharedMemory: Bool = false, immutable: Bool = false, create: Bool = true
    ) throws(SQLiteError) {
        var connection: OpaquePointer?
        // NOMUTEX: SQLiteDatabase already serializes every use of this connection.
        var flags =
            (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0))
            | SQLITE_OPEN_NOMUTEX
        var name = path
        if readOnly && (readOnlySharedMemory || immutable) {
            flags |= SQLITE_OPEN_URI
            let escaped = path.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "?", with: "%3F")
                .replacingOccurrences(of: "#", with: "%23")
            name = "file:\(escaped)?mode=ro&" + (immutable ? "immutable=1" : "readonly_shm=1")
        }
        let code = sqlite3_open_v2(name, &connection, flags, nil)
        guard code == SQLITE_OK, let connection else {
            let message = connection.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            let extended = connection.map { sqlite3_extended_errcode($0) } ?? code
            let systemErrno = connection.flatMap { Self.systemErrno($0, code: extended) }
            sqlite3_close_v2(connection)
            throw SQLiteError(
                code: SQLiteResultCode(rawValue: extended), message: message, path: path, systemErrno: systemErrno)
        }
        sqlite3_extended_result_codes(connection, 1)
        self.handle = connection
        self.path = path
    }

    private var isOpen = true

    /// Makes ``close()`` leave the write-ahead log and its index as they are, even as the last connection: nothing is
    /// checkpointed into the database file.
    func keepLogOnClose() {
        _ = cloudsync_sqlite3_no_checkpoint_on_close(handle)
    }

    deinit { close() }

    /// Closes the connection; the last connection to a WAL database checkpoints the log and removes `-wal` and `-shm`.
    func close() {
        guard isOpen else { return }
        isOpen = false
        for handle in statementCache.values { sqlite3_finalize(handle) }
        statementCache = [:]
        // v2: a statement still alive somewhere defers the close to its finalization instead of failing.
        sqlite3_close_v2(handle)
    }

    func lastError(code: Int32, sql: String?) -> SQLiteError {
        let extended = sqlite3_extended_errcode(handle)
        // The connection's last error may belong to an earlier call when `code` came from elsewhere.
        let resultCode = (extended & 0xff) == (code & 0xff) ? extended : code
        return SQLiteError(
            code: SQLiteResultCode(rawValue: resultCode), message: String(cString: sqlite3_errmsg(handle)),
            path: path, sql: sql, systemErrno: Self.systemErrno(handle, code: resultCode))
    }

    /// The system's error number behind `code` when it is an I/O, open or lock-protocol failure, the only kinds
    /// SQLite records one for; nil otherwise or when it recorded none.
    private static func systemErrno(_ handle: OpaquePointer, code: Int32) -> Int32? {
        let primary = code & 0xff
        guard primary == SQLITE_IOERR || primary == SQLITE_CANTOPEN || primary == SQLITE_PROTOCOL else { return nil }
        let number = sqlite3_system_errno(handle)
        return number == 0 ? nil : number
    }

    /// Prepares one statement.
    package func prepare(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        try SQLiteStatement(connection: self, sql: sql)
    }

    /// Prepared statements kept for ``cachedStatement(_:)``, by SQL text; one each, while no one uses it.
    private var statementCache: [String: OpaquePointer] = [:]

    /// A prepared statement for `sql` that goes back to the connection when released, ready to be used again
    /// (reset, its bindings cleared), so a statement run on every call is compiled once per connection.
    ///
    /// A statement already in use (the same SQL taken twice at once) is prepared anew; SQLite recompiles a cached
    /// statement by itself when the schema changes.
    package func cachedStatement(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        if let handle = statementCache.removeValue(forKey: sql) {
            return SQLiteStatement(connection: self, cachedHandle: handle, sql: sql)
        }
        return try SQLiteStatement(connection: self, sql: sql, cached: true)
    }

    /// Takes back a statement of ``cachedStatement(_:)``: kept while the connection is open and none is kept for
    /// its SQL, finalized otherwise.
    func returnToCache(_ handle: OpaquePointer, sql: String) {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        guard isOpen, statementCache[sql] == nil else {
            sqlite3_finalize(handle)
            return
        }
        statementCache[sql] = handle
    }

    /// Writes `count` rows with a statement that takes many rows at once: `statement.rowsPerRun` rows a run while that
    /// many are left, then one a run, each statement from ``cachedStatement(_:)``.
    ///
    /// `write` binds the rows `range` (positions among the `count`) to the statement it is given and runs it. One run
    /// for many rows saves what SQLite sets up for each run (cursors, a statement journal, trigger frames).
    package func writeRows(
        _ count: Int, with statement: MultiRowStatement, _ write: (SQLiteStatement, _ range: Range<Int>) throws -> Void
    ) throws {
        var start = 0
        while start < count {
            let rows = count - start >= statement.rowsPerRun ? statement.rowsPerRun : 1
            try write(try cachedStatement(rows == 1 ? statement.one : statement.many), start..<start + rows)
            start += rows
        }
    }

    /// Runs one statement with the given parameters, discarding any rows.
    package func execute(_ sql: String, _ values: any SQLiteBindable...) throws(SQLiteError) {
        try prepare(sql).bind(values).run()
    }

    /// Runs a script of statements separated by semicolons, taking no parameters.
    package func executeScript(_ sql: String) throws(SQLiteError) {
        var message: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(handle, sql, nil, nil, &message)
        guard code == SQLITE_OK else {
            var error = lastError(code: code, sql: sql)
            if let message {
                error = SQLiteError(
                    code: error.code, message: String(cString: message), path: path, sql: sql,
                    systemErrno: error.systemErrno)
                sqlite3_free(message)
            }
            throw error
        }
    }

    /// Runs a query and maps every row; the statement is finalized before this returns.
    package func query<Row>(
        _ sql: String, _ values: [any SQLiteBindable] = [], row: (SQLiteStatement) throws -> Row
    ) throws -> [Row] {
        let statement = try prepare(sql).bind(values)
        var rows: [Row] = []
        while try statement.step() { rows.append(try row(statement)) }
        return rows
    }

    /// Whether the database holds a table named `name`.
    package func hasTable(_ name: String) throws -> Bool {
        try !query("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?", [name]) { _ in true }.isEmpty
    }

    /// The rowid of the most recent successful INSERT.
    package var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// Rows changed by the most recent INSERT, UPDATE or DELETE.
    package var changes: Int { Int(sqlite3_changes(handle)) }

    /// Whether a transaction is open (autocommit is off).
    package var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    /// Runs `body` in a transaction: it commits when `body` returns and rolls back when it throws.
    ///
    /// Nested calls become savepoints, so an inner failure undoes only the inner work.
    package func transaction<T>(_ body: () throws -> T) throws -> T {
        let nested = isInTransaction
        let savepoint = "cloudsync_nested"
        try executeScript(nested ? "SAVEPOINT \(savepoint)" : "BEGIN IMMEDIATE")
        do {
            let result = try body()
            try executeScript(nested ? "RELEASE \(savepoint)" : "COMMIT")
            return result
        } catch {
            // A failed COMMIT or a statement error may already have ended the transaction.
            if nested {
                try? executeScript("ROLLBACK TO \(savepoint); RELEASE \(savepoint)")
            } else if isInTransaction {
                try? executeScript("ROLLBACK")
            }
            throw error
        }
    }
}

/// The two texts of a statement that ``SQLiteConnection/writeRows(_:with:_:)`` runs: one for `rowsPerRun` rows and
/// one for a single row, built once (a caller keeps them in a `static let`) rather than for every batch it writes.
package struct MultiRowStatement: Sendable {
    package let rowsPerRun: Int
    package let many: String
    package let one: String

    /// `sql(rows)` is the statement for `rows` rows.
    package init(rowsPerRun: Int, sql: (_ rows: Int) -> String) {
        self.rowsPerRun = max(1, rowsPerRun)
        many = sql(self.rowsPerRun)
        one = sql(1)
    }
}
