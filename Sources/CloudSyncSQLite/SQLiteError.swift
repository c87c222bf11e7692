internal import CSQLite

/// A SQLite result code, kept as the number SQLite returned (primary code in the low byte, extended code above it).
public struct SQLiteResultCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The primary result code, with the extended bits stripped (`SQLITE_BUSY_SNAPSHOT` -> `SQLITE_BUSY`).
    public var primary: SQLiteResultCode { SQLiteResultCode(rawValue: rawValue & 0xff) }

    public static let ok = SQLiteResultCode(rawValue: SQLITE_OK)
    public static let error = SQLiteResultCode(rawValue: SQLITE_ERROR)
    public static let `internal` = SQLiteResultCode(rawValue: SQLITE_INTERNAL)
    public static let permission = SQLiteResultCode(rawValue: SQLITE_PERM)
    public static let abort = SQLiteResultCode(rawValue: SQLITE_ABORT)
    public static let busy = SQLiteResultCode(rawValue: SQLITE_BUSY)
    public static let locked = SQLiteResultCode(rawValue: SQLITE_LOCKED)
    public static let noMemory = SQLiteResultCode(rawValue: SQLITE_NOMEM)
    public static let readOnly = SQLiteResultCode(rawValue: SQLITE_READONLY)
    public static let interrupt = SQLiteResultCode(rawValue: SQLITE_INTERRUPT)
    public static let ioError = SQLiteResultCode(rawValue: SQLITE_IOERR)
    public static let corrupt = SQLiteResultCode(rawValue: SQLITE_CORRUPT)
    public static let full = SQLiteResultCode(rawValue: SQLITE_FULL)
    public static let cannotOpen = SQLiteResultCode(rawValue: SQLITE_CANTOPEN)
    public static let constraint = SQLiteResultCode(rawValue: SQLITE_CONSTRAINT)
    public static let mismatch = SQLiteResultCode(rawValue: SQLITE_MISMATCH)
    public static let misuse = SQLiteResultCode(rawValue: SQLITE_MISUSE)
    public static let range = SQLiteResultCode(rawValue: SQLITE_RANGE)
    public static let notADatabase = SQLiteResultCode(rawValue: SQLITE_NOTADB)
    public static let row = SQLiteResultCode(rawValue: SQLITE_ROW)
    public static let done = SQLiteResultCode(rawValue: SQLITE_DONE)

    /// SQLite's own English name for the code, such as "database is locked".
    public var meaning: String { String(cString: sqlite3_errstr(rawValue)) }

    public var description: String { "\(rawValue) (\(meaning))" }
}

/// An error reported by SQLite, or by this face when it is used wrongly.
///
/// The result code is kept as SQLite gave it (extended), so callers test `error.code.primary == .busy`
/// rather than matching message text.
public struct SQLiteError: Error, Sendable, CustomStringConvertible {
    /// The extended result code.
    public let code: SQLiteResultCode
    /// SQLite's message for this failure (`sqlite3_errmsg`), or this face's own.
    public let message: String
    /// The database file, when known.
    public let path: String?
    /// The statement that failed, when there was one.
    public let sql: String?

    public init(code: SQLiteResultCode, message: String, path: String? = nil, sql: String? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.sql = sql
    }

    public var description: String {
        var text = "SQLite error \(code.rawValue)"
        if code.primary != code { text += " (primary \(code.primary.rawValue))" }
        text += ": \(message)"
        if let path { text += " [database \(path)]" }
        if let sql { text += " while running: \(sql)" }
        return text
    }
}
