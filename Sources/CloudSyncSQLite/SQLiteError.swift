internal import CSQLite
import Foundation

/// A SQLite result code, kept as the number SQLite returned (primary code in the low byte, extended code above it).
package struct SQLiteResultCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The code as SQLite returned it, extended bits included.
    package let rawValue: Int32

    /// The code `rawValue`, as SQLite returned it.
    package init(rawValue: Int32) { self.rawValue = rawValue }

    /// The primary result code, with the extended bits stripped (`SQLITE_BUSY_SNAPSHOT` -> `SQLITE_BUSY`).
    package var primary: SQLiteResultCode { SQLiteResultCode(rawValue: rawValue & 0xff) }

    /// `SQLITE_OK`: success.
    package static let ok = SQLiteResultCode(rawValue: SQLITE_OK)
    /// `SQLITE_ERROR`: a generic error (SQL syntax, a missing table, ...).
    package static let error = SQLiteResultCode(rawValue: SQLITE_ERROR)
    /// `SQLITE_INTERNAL`: a bug inside SQLite.
    package static let `internal` = SQLiteResultCode(rawValue: SQLITE_INTERNAL)
    /// `SQLITE_PERM`: the requested access mode was denied.
    package static let permission = SQLiteResultCode(rawValue: SQLITE_PERM)
    /// `SQLITE_ABORT`: an operation was aborted, often by a rollback.
    package static let abort = SQLiteResultCode(rawValue: SQLITE_ABORT)
    /// `SQLITE_BUSY`: another connection held a lock past the busy timeout; the call may succeed later.
    package static let busy = SQLiteResultCode(rawValue: SQLITE_BUSY)
    /// `SQLITE_LOCKED`: a conflict within the same connection or shared cache.
    package static let locked = SQLiteResultCode(rawValue: SQLITE_LOCKED)
    /// `SQLITE_NOMEM`: SQLite could not allocate memory.
    package static let noMemory = SQLiteResultCode(rawValue: SQLITE_NOMEM)
    /// `SQLITE_READONLY`: a write to a database opened read-only, or one the process cannot write.
    package static let readOnly = SQLiteResultCode(rawValue: SQLITE_READONLY)
    /// `SQLITE_INTERRUPT`: the operation was interrupted.
    package static let interrupt = SQLiteResultCode(rawValue: SQLITE_INTERRUPT)
    /// `SQLITE_IOERR`: the operating system reported an I/O error.
    package static let ioError = SQLiteResultCode(rawValue: SQLITE_IOERR)
    /// `SQLITE_CORRUPT`: the database file is malformed.
    package static let corrupt = SQLiteResultCode(rawValue: SQLITE_CORRUPT)
    /// `SQLITE_FULL`: the disk is full.
    package static let full = SQLiteResultCode(rawValue: SQLITE_FULL)
    /// `SQLITE_CANTOPEN`: the file (or its directory, or a journal) could not be opened.
    package static let cannotOpen = SQLiteResultCode(rawValue: SQLITE_CANTOPEN)
    /// `SQLITE_CONSTRAINT`: a constraint (unique, not null, foreign key, check) was violated.
    package static let constraint = SQLiteResultCode(rawValue: SQLITE_CONSTRAINT)
    /// `SQLITE_CONSTRAINT_PRIMARYKEY`: a row's primary key is one another row already has.
    package static let constraintPrimaryKey = SQLiteResultCode(rawValue: SQLITE_CONSTRAINT | (6 << 8))
    /// `SQLITE_CONSTRAINT_UNIQUE`: a row's value in a unique column is one another row already has.
    package static let constraintUnique = SQLiteResultCode(rawValue: SQLITE_CONSTRAINT | (8 << 8))
    /// `SQLITE_MISMATCH`: a data type mismatch, such as a non-integer rowid.
    package static let mismatch = SQLiteResultCode(rawValue: SQLITE_MISMATCH)
    /// `SQLITE_MISUSE`: the library was used wrongly, such as a finalized statement run again.
    package static let misuse = SQLiteResultCode(rawValue: SQLITE_MISUSE)
    /// `SQLITE_RANGE`: a parameter index out of range.
    package static let range = SQLiteResultCode(rawValue: SQLITE_RANGE)
    /// `SQLITE_NOTADB`: the file is not a SQLite database.
    package static let notADatabase = SQLiteResultCode(rawValue: SQLITE_NOTADB)
    /// `SQLITE_ROW`: a step produced a row (not an error).
    package static let row = SQLiteResultCode(rawValue: SQLITE_ROW)
    /// `SQLITE_DONE`: a statement finished (not an error).
    package static let done = SQLiteResultCode(rawValue: SQLITE_DONE)

    /// SQLite's own English name for the code, such as "database is locked".
    package var meaning: String { String(cString: sqlite3_errstr(rawValue)) }

    /// The number and SQLite's English meaning, such as "5 (database is locked)".
    package var description: String { "\(rawValue) (\(meaning))" }
}

/// An error reported by SQLite, or by this face when it is used wrongly.
///
/// The result code is kept as SQLite gave it (extended), so callers test `error.code.primary == .busy`
/// rather than matching message text.
package struct SQLiteError: Error, Sendable, CustomStringConvertible {
    /// The extended result code.
    package let code: SQLiteResultCode
    /// SQLite's message for this failure (`sqlite3_errmsg`), or this face's own.
    package let message: String
    /// The database file, when known.
    package let path: String?
    /// The statement that failed, when there was one.
    package let sql: String?
    /// The operating system's error number behind an I/O or open failure (`sqlite3_system_errno`), when SQLite gave one.
    package let systemErrno: Int32?

    /// An error with `code`, `message`, and where known the database file, the failing statement and the system's
    /// error number.
    package init(
        code: SQLiteResultCode, message: String, path: String? = nil, sql: String? = nil, systemErrno: Int32? = nil
    ) {
        self.code = code
        self.message = message
        self.path = path
        self.sql = sql
        self.systemErrno = systemErrno
    }

    /// `errno 5: Input/output error`, when SQLite gave a system error number.
    private var systemError: String? {
        systemErrno.map { "errno \($0): \(String(cString: strerror($0)))" }
    }

    /// What SQLite and the system said, without the path: `disk I/O error (SQLite code 522, errno 5: Input/output
    /// error) while running: <sql>`, leaving out the parts that are not known.
    package var details: String {
        var text = "\(message) (SQLite code \(code.rawValue)"
        if let system = systemError { text += ", " + system }
        text += ")"
        if let sql { text += " while running: \(sql)" }
        return text
    }

    /// `SQLite error <code> (primary <code>): <message> [database <path>] while running: <sql>`, leaving out the parts
    /// that are not known (the primary code when it is the same).
    package var description: String {
        var text = "SQLite error \(code.rawValue)"
        if code.primary != code { text += " (primary \(code.primary.rawValue))" }
        text += ": \(message)"
        if let system = systemError { text += " (\(system))" }
        if let path { text += " [database \(path)]" }
        if let sql { text += " while running: \(sql)" }
        return text
    }
}
