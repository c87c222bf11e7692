import Foundation

/// A value as SQLite stores it: one of its five storage classes.
public enum SQLiteValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)
}

/// A Swift value that can be bound to a statement parameter.
public protocol SQLiteBindable {
    var sqliteValue: SQLiteValue { get }
}

extension SQLiteValue: SQLiteBindable {
    /// The value itself.
    public var sqliteValue: SQLiteValue { self }
}

extension Int64: SQLiteBindable {
    /// An integer.
    public var sqliteValue: SQLiteValue { .integer(self) }
}

extension Int: SQLiteBindable {
    /// An integer (64-bit).
    public var sqliteValue: SQLiteValue { .integer(Int64(self)) }
}

extension Double: SQLiteBindable {
    /// A real.
    public var sqliteValue: SQLiteValue { .real(self) }
}

extension String: SQLiteBindable {
    /// Text, as UTF-8.
    public var sqliteValue: SQLiteValue { .text(self) }
}

extension Data: SQLiteBindable {
    /// A blob of these bytes.
    public var sqliteValue: SQLiteValue { .blob(self) }
}

extension Bool: SQLiteBindable {
    /// An integer: 1 for true, 0 for false.
    public var sqliteValue: SQLiteValue { .integer(self ? 1 : 0) }
}

extension Optional: SQLiteBindable where Wrapped: SQLiteBindable {
    /// NULL for nil, else the wrapped value's.
    public var sqliteValue: SQLiteValue { self?.sqliteValue ?? .null }
}
