import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A SQLite database file with one connection, safe to share between tasks and threads.
///
/// Every use of the connection runs on a private serial queue, so calls never overlap. The `async` forms wait
/// for that queue without holding a thread of the Swift concurrency pool; the synchronous forms block the
/// caller and are for code that has nowhere to await.
public final class SQLiteDatabase: @unchecked Sendable {
    /// How to open a database.
    public struct Options: Sendable {
        /// How long a statement waits for another connection's lock before failing with `SQLITE_BUSY`.
        public var busyTimeoutMilliseconds: Int32 = 5000
        /// Use write-ahead logging, so readers in other processes do not block the writer.
        public var writeAheadLog = true
        /// Enforce `FOREIGN KEY` constraints.
        public var foreignKeys = true
        /// Open without write access; the file must exist.
        public var readOnly = false
        /// When a commit reaches the disk.
        public var durability: Durability = .processCrashSafe
        /// With `readOnly`: read the file as it is on disk, taking no locks and creating nothing beside it (for dry
        /// runs; changes other processes make meanwhile are not seen).
        public var immutable = false

        public init(
            busyTimeoutMilliseconds: Int32 = 5000, writeAheadLog: Bool = true, foreignKeys: Bool = true,
            readOnly: Bool = false, durability: Durability = .processCrashSafe
        ) {
            self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
            self.writeAheadLog = writeAheadLog
            self.foreignKeys = foreignKeys
            self.readOnly = readOnly
            self.durability = durability
        }
    }

    /// How far a committed transaction is guaranteed to survive (SQLite's `synchronous` setting).
    public enum Durability: String, Sendable {
        /// `synchronous = NORMAL`: with the write-ahead log, a commit survives the process crashing at any moment;
        /// the last commits before a power loss or kernel crash may be rolled back (never corrupted).
        case processCrashSafe = "NORMAL"
        /// `synchronous = FULL`: every commit is fsynced before it returns, so it also survives a power loss.
        case powerLossSafe = "FULL"
    }

    /// The database file.
    public let path: String
    // Touched only on `queue`: that is what makes the unchecked Sendable conformance sound.
    private let connection: SQLiteConnection
    private let queue: DispatchQueue
    private let onQueue = DispatchSpecificKey<ObjectIdentifier>()

    /// Opens `path`, creating it (mode 0600, readable only by its owner) when it does not exist.
    ///
    /// The parent directory must exist. A file that is not a database fails here with `SQLITE_NOTADB`,
    /// and is left untouched.
    public init(path: String, options: Options = Options()) throws(SQLiteError) {
        if !options.readOnly { try Self.createOwnerOnlyFile(at: path) }
        let connection = try SQLiteConnection(
            path: path, readOnly: options.readOnly, immutable: options.readOnly && options.immutable)
        try Self.configure(connection, options: options)
        self.path = path
        self.connection = connection
        self.queue = DispatchQueue(label: "cloudsync.sqlite")
        queue.setSpecific(key: onQueue, value: ObjectIdentifier(self))
    }

    /// Creates the file with mode 0600 before SQLite does, since SQLite would create it world-readable;
    /// SQLite gives the `-wal` and `-shm` files the same mode as the database.
    private static func createOwnerOnlyFile(at path: String) throws(SQLiteError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if descriptor >= 0 {
            close(descriptor)
            return
        }
        let failure = errno
        if failure == EEXIST { return }
        throw SQLiteError(
            code: .cannotOpen,
            message: "cannot create the database file: \(String(cString: strerror(failure))); "
                + "check that its directory exists and is writable",
            path: path)
    }

    private static func configure(_ connection: SQLiteConnection, options: Options) throws(SQLiteError) {
        try connection.executeScript("PRAGMA busy_timeout = \(max(0, options.busyTimeoutMilliseconds))")
        try connection.executeScript("PRAGMA foreign_keys = \(options.foreignKeys ? "ON" : "OFF")")
        // Reading the schema here makes a file that is not a database fail now, at open, not at first use.
        try connection.executeScript("SELECT count(*) FROM sqlite_schema")
        if options.writeAheadLog && !options.readOnly {
            try connection.executeScript("PRAGMA journal_mode = WAL")
            try connection.executeScript("PRAGMA synchronous = \(options.durability.rawValue)")
        }
    }

    // MARK: Synchronous access

    /// Runs `body` with the connection, outside any transaction.
    public func read<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        precondition(
            DispatchQueue.getSpecific(key: onQueue) != ObjectIdentifier(self),
            "SQLiteDatabase.read called from inside another read or write of the same database")
        return try queue.sync { try body(connection) }
    }

    /// Runs `body` in a transaction that commits only when `body` returns without throwing.
    public func write<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try read { connection in try connection.transaction { try body(connection) } }
    }

    // MARK: Asynchronous access

    /// Runs `body` with the connection without blocking a thread of the concurrency pool while waiting.
    public func read<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(with: Result { try body(self.connection) })
            }
        }
    }

    /// Runs `body` in a transaction, without blocking a thread of the concurrency pool while waiting.
    public func write<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        try await read { connection in try connection.transaction { try body(connection) } }
    }
}
