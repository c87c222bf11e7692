internal import CSQLite
import Foundation

/// A prepared statement.
///
/// It belongs to the connection that prepared it and is finalized when released.
///
/// Not `Sendable`: use it only inside the `read`/`write` body that produced it.
package final class SQLiteStatement {
    let handle: OpaquePointer
    private let connection: SQLiteConnection
    /// The SQL text, for error messages.
    package let sql: String
    /// Whether the statement goes back to its connection's cache when released instead of being finalized.
    private let cached: Bool

    init(connection: SQLiteConnection, sql: String, cached: Bool = false) throws(SQLiteError) {
        var statement: OpaquePointer?
        var tail: UnsafePointer<CChar>?
        let code = sql.withCString { text in
            sqlite3_prepare_v3(connection.handle, text, -1, 0, &statement, &tail)
        }
        guard code == SQLITE_OK else { throw connection.lastError(code: code, sql: sql) }
        guard let statement else {
            throw SQLiteError(
                code: .misuse, message: "the SQL holds no statement", path: connection.path, sql: sql)
        }
        self.handle = statement
        self.connection = connection
        self.sql = sql
        self.cached = cached
    }

    /// A statement the connection's cache held.
    init(connection: SQLiteConnection, cachedHandle: OpaquePointer, sql: String) {
        self.handle = cachedHandle
        self.connection = connection
        self.sql = sql
        self.cached = true
    }

    deinit {
        if cached {
            connection.returnToCache(handle, sql: sql)
        } else {
            sqlite3_finalize(handle)
        }
    }

    /// Number of `?` parameters the statement takes.
    package var parameterCount: Int { Int(sqlite3_bind_parameter_count(handle)) }

    /// Resets the statement and binds `values` to its parameters, in order.
    @discardableResult
    package func bind(_ values: [any SQLiteBindable]) throws(SQLiteError) -> SQLiteStatement {
        reset()
        guard values.count == parameterCount else {
            throw SQLiteError(
                code: .range,
                message: "statement takes \(parameterCount) parameter(s) but \(values.count) were given",
                path: connection.path, sql: sql)
        }
        for (offset, value) in values.enumerated() {
            try bind(value.sqliteValue, at: Int32(offset + 1))
        }
        return self
    }

    /// Resets the statement and binds `values` to its parameters, in order.
    @discardableResult
    package func bind(_ values: any SQLiteBindable...) throws(SQLiteError) -> SQLiteStatement {
        try bind(values)
    }

    private func bind(_ value: SQLiteValue, at index: Int32) throws(SQLiteError) {
        let code: Int32
        switch value {
        case .null:
            code = sqlite3_bind_null(handle, index)
        case .integer(let number):
            code = sqlite3_bind_int64(handle, index, number)
        case .real(let number):
            code = sqlite3_bind_double(handle, index, number)
        case .text(let text):
            // Bound with an explicit byte count so text holding NUL characters survives intact.
            var text = text
            code = text.withUTF8 { bytes in
                cloudsync_sqlite3_bind_text_copy(
                    handle, index, UnsafeRawPointer(bytes.baseAddress)?.assumingMemoryBound(to: CChar.self),
                    Int32(bytes.count))
            }
        case .blob(let data):
            if data.isEmpty {
                // A nil pointer would bind NULL; an empty blob must stay a blob.
                code = sqlite3_bind_zeroblob(handle, index, 0)
            } else {
                code = data.withUnsafeBytes { bytes in
                    cloudsync_sqlite3_bind_blob_copy(handle, index, bytes.baseAddress, Int32(bytes.count))
                }
            }
        }
        guard code == SQLITE_OK else { throw connection.lastError(code: code, sql: sql) }
    }

    /// Binds an integer to the parameter at `index` (from 1); the statement must be reset (see ``reset()``).
    package func bind(_ number: Int64, at index: Int) throws(SQLiteError) {
        try bind(.integer(number), at: Int32(index))
    }

    /// Binds `text` to the parameter at `index` (from 1) without copying it, runs `body` (which steps the statement),
    /// then binds NULL there, so the statement never holds on to the string's bytes.
    ///
    /// The statement must be reset (see ``reset()``). For rows written in bulk: SQLite copies the bytes into the row,
    /// so binding them by reference saves a copy of each value on the way in.
    package func withText<T>(_ text: String, at index: Int, _ body: () throws -> T) throws -> T {
        var text = text
        return try text.withUTF8 { bytes in
            let code = cloudsync_sqlite3_bind_text_static(
                handle, Int32(index), UnsafeRawPointer(bytes.baseAddress)?.assumingMemoryBound(to: CChar.self),
                Int32(bytes.count))
            guard code == SQLITE_OK else { throw connection.lastError(code: code, sql: sql) }
            defer {
                // Unbinding needs a statement that is not running.
                sqlite3_reset(handle)
                sqlite3_bind_null(handle, Int32(index))
            }
            return try body()
        }
    }

    /// Binds each text by reference to its parameter (from 1), runs `body` (which steps the statement), then clears
    /// every binding of the statement, integers included.
    ///
    /// The texts' bytes are gathered in one buffer first, one copy for all of them rather than one allocation each:
    /// for statements that write many rows at once. The statement must be reset (see ``reset()``).
    package func withTexts<T>(_ texts: [(parameter: Int, text: String)], _ body: () throws -> T) throws -> T {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(texts.reduce(0) { $0 + $1.text.utf8.count })
        for (_, text) in texts { bytes.append(contentsOf: text.utf8) }
        return try bytes.withUnsafeBufferPointer { buffer in
            defer {
                sqlite3_reset(handle)
                sqlite3_clear_bindings(handle)
            }
            var start = 0
            for (parameter, text) in texts {
                let count = text.utf8.count
                // An empty text binds as empty text even where the buffer has no storage.
                let code = cloudsync_sqlite3_bind_text_static(
                    handle, Int32(parameter),
                    count == 0
                        ? nil : UnsafeRawPointer(buffer.baseAddress! + start).assumingMemoryBound(to: CChar.self),
                    Int32(count))
                guard code == SQLITE_OK else { throw connection.lastError(code: code, sql: sql) }
                start += count
            }
            return try body()
        }
    }

    /// Rewinds the statement so it can run again; bindings are kept.
    package func reset() {
        // sqlite3_reset repeats the previous step's error, which `step` has already thrown.
        sqlite3_reset(handle)
    }

    /// Advances to the next row.
    ///
    /// Returns `true` when a row is ready to read, `false` when the statement is done.
    package func step() throws(SQLiteError) -> Bool {
        let code = sqlite3_step(handle)
        switch code {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let error = connection.lastError(code: code, sql: sql)
            sqlite3_reset(handle)
            throw error
        }
    }

    /// Runs the statement to completion, ignoring any rows.
    package func run() throws(SQLiteError) {
        while try step() {}
    }

    // MARK: Reading the current row

    /// Number of columns in a result row.
    package var columnCount: Int { Int(sqlite3_column_count(handle)) }

    /// The name of a result column.
    package func columnName(_ column: Int) -> String {
        String(cString: sqlite3_column_name(handle, Int32(column)))
    }

    /// Whether the column of the current row holds NULL.
    package func isNull(_ column: Int) -> Bool {
        sqlite3_column_type(handle, Int32(column)) == SQLITE_NULL
    }

    /// The column as a 64-bit integer, converted by SQLite's rules (NULL reads as 0, text is parsed).
    package func int64(_ column: Int) -> Int64 { sqlite3_column_int64(handle, Int32(column)) }

    /// The column as a double, converted by SQLite's rules (NULL reads as 0.0, text is parsed).
    package func double(_ column: Int) -> Double { sqlite3_column_double(handle, Int32(column)) }

    /// The column as UTF-8 text, or nil when it is NULL.
    ///
    /// Embedded NUL characters are kept.
    package func string(_ column: Int) -> String? {
        let index = Int32(column)
        guard let text = sqlite3_column_text(handle, index) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, index))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    /// Runs `body` on the column's text bytes in place (empty for NULL), valid only until the next step or reset:
    /// for comparing a column without making a `String` of it.
    package func withTextBytes<T>(_ column: Int, _ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        let index = Int32(column)
        guard let text = sqlite3_column_text(handle, index) else {
            return try body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
        return try body(UnsafeRawBufferPointer(start: text, count: Int(sqlite3_column_bytes(handle, index))))
    }

    /// The column as bytes, or nil when it is NULL.
    ///
    /// A zero-length blob reads as empty `Data`.
    package func data(_ column: Int) -> Data? {
        let index = Int32(column)
        if sqlite3_column_type(handle, index) == SQLITE_NULL { return nil }
        guard let bytes = sqlite3_column_blob(handle, index) else { return Data() }
        return Data(bytes: bytes, count: Int(sqlite3_column_bytes(handle, index)))
    }

    /// The column in its own storage class.
    package func value(_ column: Int) -> SQLiteValue {
        let index = Int32(column)
        switch sqlite3_column_type(handle, index) {
        case SQLITE_INTEGER: return .integer(int64(column))
        case SQLITE_FLOAT: return .real(double(column))
        case SQLITE_TEXT: return .text(string(column) ?? "")
        case SQLITE_BLOB: return .blob(data(column) ?? Data())
        default: return .null
        }
    }
}
