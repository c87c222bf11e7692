import Foundation

/// A value as SQLite stores it: one of its five storage classes.
package enum SQLiteValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)
}

/// A Swift value that can be bound to a statement parameter.
package protocol SQLiteBindable {
    var sqliteValue: SQLiteValue { get }
}

extension SQLiteValue: SQLiteBindable {
    /// The value itself.
    package var sqliteValue: SQLiteValue { self }
}

extension Int64: SQLiteBindable {
    /// An integer.
    package var sqliteValue: SQLiteValue { .integer(self) }
}

extension Int: SQLiteBindable {
    /// An integer (64-bit).
    package var sqliteValue: SQLiteValue { .integer(Int64(self)) }
}

extension Double: SQLiteBindable {
    /// A real.
    package var sqliteValue: SQLiteValue { .real(self) }
}

extension String: SQLiteBindable {
    /// Text, as UTF-8.
    package var sqliteValue: SQLiteValue { .text(self) }
}

extension Data: SQLiteBindable {
    /// A blob of these bytes.
    package var sqliteValue: SQLiteValue { .blob(self) }
}

extension Bool: SQLiteBindable {
    /// An integer: 1 for true, 0 for false.
    package var sqliteValue: SQLiteValue { .integer(self ? 1 : 0) }
}

extension Optional: SQLiteBindable where Wrapped: SQLiteBindable {
    /// NULL for nil, else the wrapped value's.
    package var sqliteValue: SQLiteValue { self?.sqliteValue ?? .null }
}
