import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A SQLite database file with one connection, safe to share between tasks and threads.
///
/// Every use of the connection runs on a private serial queue, so calls never overlap. The `async` forms wait
/// for that queue without holding a thread of the Swift concurrency pool; the synchronous forms block the
/// caller and are for code that has nowhere to await.
package final class SQLiteDatabase: @unchecked Sendable {
    /// How to open a database.
    package struct Options: Sendable {
        /// How long a statement waits for another connection's lock before failing with `SQLITE_BUSY`.
        package var busyTimeoutMilliseconds: Int32 = 5000
        /// Use write-ahead logging, so readers in other processes do not block the writer.
        package var writeAheadLog = true
        /// Enforce `FOREIGN KEY` constraints.
        package var foreignKeys = true
        /// Open without write access (for dry runs); the file must exist.
        ///
        /// The connection sees every committed transaction, including those still in the write-ahead log (`-wal`)
        /// that a running or killed writer left behind, and takes the usual locks, so it reads consistently while
        /// other processes write, whenever they start. A database in write-ahead-log mode is read through one read
        /// transaction held from opening to ``close()``: every read sees the one state the database was in when it
        /// opened, however the file changes meanwhile (a rollback-journal database is read a statement at a time,
        /// since holding its lock would stop writers). No statement can write.
        ///
        /// What it leaves beside the database, as SQLite 3.40 behaves (checked by the tests): when there is no
        /// `-wal` and no `-journal` (the last writer closed cleanly), nothing — a write-ahead-log database is opened
        /// for reading and writing with writes refused (`query_only`), so SQLite makes the `-wal` and `-shm` a reader
        /// needs and removes them on close, as the last connection of a clean run does; if another process wrote
        /// meanwhile, they stay, for that writer or the next to fold in (this connection never checkpoints). When both
        /// `-wal` and `-shm` exist, nothing, and no byte of either changes (the index is opened read-only, SQLite's
        /// `readonly_shm`); when only the `-wal` exists, SQLite creates the 32 KiB `-shm` index it needs to read the
        /// log. A file that only a read-only open can reach, in a directory where nothing can be created, is read as
        /// it is, without locks.
        package var readOnly = false
        /// When a commit reaches the disk.
        package var durability: Durability = .processCrashSafe
        /// Whether SQLite keeps its temporary files in memory (`temp_store = MEMORY`) instead of files in `/var/tmp`.
        ///
        /// Right for a database whose statements never sort or group more than a page of rows: a multi-row upsert
        /// firing triggers inside a transaction otherwise writes a statement journal file per statement past 64 KiB.
        /// Wrong for someone else's tables, where a query may sort millions of rows.
        package var temporaryFilesInMemory = false
        /// The most memory SQLite's page cache may take, in bytes; nil for SQLite's default (2 MiB).
        ///
        /// A transaction whose dirty pages outgrow the cache spills them into the file before it commits, and with a
        /// rollback journal each spill first fsyncs the journal: a larger cache lets a large transaction commit with
        /// one set of fsyncs. The cache only grows as pages are used.
        package var cacheBytes: Int?
        /// The page size a database created by this open gets, in bytes: a power of two from 512 to 65,536.
        ///
        /// Nil for SQLite's default (4,096). An existing database keeps the size it was made with.
        package var pageSizeOfNewFile: Int?

        /// Options with each setting given or left at its default: 5 s busy timeout, write-ahead log, foreign keys
        /// enforced, read-write, ``Durability/processCrashSafe``.
        package init(
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
    package enum Durability: String, Sendable {
        /// `synchronous = NORMAL`: with the write-ahead log, a commit survives the process crashing at any moment;
        /// the last commits before a power loss or kernel crash may be rolled back (never corrupted).
        case processCrashSafe = "NORMAL"
        /// `synchronous = FULL`: every commit is fsynced before it returns, so it also survives a power loss.
        case powerLossSafe = "FULL"
    }

    /// The database file.
    package let path: String
    // Touched only on `queue`: that is what makes the unchecked Sendable conformance sound. Nil once closed.
    private var connection: SQLiteConnection?
    private let closed = Mutex(false)
    /// Whether the connection holds a read transaction from opening to closing (see ``Options/readOnly``).
    private let holdsSnapshot: Bool
    private let queue: DispatchQueue
    private let onQueue = DispatchSpecificKey<ObjectIdentifier>()

    /// Opens `path`, creating it (mode 0600, readable only by its owner) when it does not exist.
    ///
    /// The parent directory must exist. A file that is not a database fails here with `SQLITE_NOTADB`,
    /// and is left untouched.
    package init(path: String, options: Options = Options()) throws(SQLiteError) {
        let connection: SQLiteConnection
        if options.readOnly {
            // The header is read before SQLite opens the file: closing any descriptor of a file drops every POSIX
            // lock the process holds on it, SQLite's included.
            let writeAheadLog = Self.isWriteAheadLogFile(path)
            connection = try Self.openReadOnly(path: path, writeAheadLog: writeAheadLog, options: options)
            holdsSnapshot = writeAheadLog
            if writeAheadLog { try Self.beginSnapshot(connection) }
        } else {
            try Self.createOwnerOnlyFile(at: path)
            connection = try SQLiteConnection(path: path, readOnly: false)
            try Self.configure(connection, options: options)
            holdsSnapshot = false
        }
        if options.temporaryFilesInMemory {
            try connection.executeScript("PRAGMA temp_store = MEMORY")
        }
        self.path = path
        self.connection = connection
        self.queue = DispatchQueue(label: "cloudsync.sqlite")
        queue.setSpecific(key: onQueue, value: ObjectIdentifier(self))
    }

    /// A read-only connection that creates nothing when the write-ahead log and its index exist, and otherwise
    /// lets SQLite create what it needs to read the log (see ``Options/readOnly``).
    private static func openReadOnly(path: String, writeAheadLog: Bool, options: Options) throws(SQLiteError)
        -> SQLiteConnection
    {
        let manager = FileManager.default
        let hasLog = manager.fileExists(atPath: path + "-wal")
        // With no log and no journal beside it, the last writer closed cleanly, but another may start at any moment
        // and change the file under a reader that took no locks: read it with SQLite's locks. In write-ahead-log
        // mode that needs the -wal and -shm, which a read-write connection (that refuses every write) removes again
        // when it closes last; a read-only one would leave them.
        if writeAheadLog && !hasLog && !manager.fileExists(atPath: path + "-journal") {
            if let connection = try? SQLiteConnection(path: path, readOnly: false, create: false) {
                do {
                    try connection.executeScript("PRAGMA query_only = ON")
                    try configure(connection, options: options)
                    return connection
                } catch {
                    connection.close()
                    if error.code.primary == .notADatabase || error.code.primary == .corrupt { throw error }
                }
            }
        }
        if manager.fileExists(atPath: path + "-wal") && manager.fileExists(atPath: path + "-shm") {
            do {
                let connection = try SQLiteConnection(path: path, readOnly: true, readOnlySharedMemory: true)
                try configure(connection, options: options)
                return connection
            } catch let error where error.code.primary == .notADatabase || error.code.primary == .corrupt {
                throw error
            } catch {
                // The index vanished or needs recovery by a writer that is gone: read the ordinary way instead.
            }
        }
        do {
            let connection = try SQLiteConnection(path: path, readOnly: true)
            try configure(connection, options: options)
            return connection
        } catch let error where !hasLog && error.code.primary != .notADatabase && error.code.primary != .corrupt {
            // Nothing can be created beside the file (a read-only directory), so no writer can be at work on it
            // through SQLite's locks either: read it as it is.
            guard error.code.primary == .cannotOpen || error.code.primary == .readOnly else { throw error }
            let connection = try SQLiteConnection(path: path, readOnly: true, immutable: true)
            try configure(connection, options: options)
            return connection
        }
    }

    /// Whether the file's header says write-ahead-log mode (its read and write versions are 2).
    private static func isWriteAheadLogFile(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        guard let header = try? handle.read(upToCount: 20), header.count == 20 else { return false }
        return header[header.startIndex + 18] == 2 && header[header.startIndex + 19] == 2
    }

    /// Starts the read transaction a read-only connection to a write-ahead-log database holds until it closes.
    private static func beginSnapshot(_ connection: SQLiteConnection) throws(SQLiteError) {
        // A deferred transaction takes its snapshot at its first read.
        try connection.executeScript("BEGIN; SELECT count(*) FROM sqlite_schema")
    }

    /// Creates the file with mode 0600 before SQLite does, since SQLite would create it world-readable;
    /// SQLite gives the `-wal` and `-shm` files the same mode as the database.
    private static func createOwnerOnlyFile(at path: String) throws(SQLiteError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if descriptor >= 0 {
            Glibc.close(descriptor)
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
        // A negative size is in KiB.
        if let bytes = options.cacheBytes {
            try connection.executeScript("PRAGMA cache_size = -\(max(1, bytes / 1024))")
        }
        // Only a file with no page yet takes it (and only before the switch to the write-ahead log writes the first).
        if let pageSize = options.pageSizeOfNewFile, !options.readOnly {
            try connection.executeScript("PRAGMA page_size = \(pageSize)")
        }
        if options.writeAheadLog && !options.readOnly {
            try switchToWriteAheadLog(connection, waitingUpTo: options.busyTimeoutMilliseconds)
            try connection.executeScript("PRAGMA synchronous = \(options.durability.rawValue)")
        }
    }

    /// Switches the file to write-ahead logging, waiting up to `milliseconds` for other connections.
    ///
    /// SQLite does not call the busy handler while another connection holds the lock this needs (two processes
    /// creating the same new file), so the switch is retried here until the busy timeout, then fails with
    /// `SQLITE_BUSY` as any statement would.
    private static func switchToWriteAheadLog(_ connection: SQLiteConnection, waitingUpTo milliseconds: Int32)
        throws(SQLiteError)
    {
        let deadline = DispatchTime.now() + .milliseconds(Int(max(0, milliseconds)))
        while true {
            do {
                try connection.executeScript("PRAGMA journal_mode = WAL")
                return
            } catch let error where error.code.primary == .busy || error.code.primary == .locked {
                guard DispatchTime.now() < deadline else { throw error }
                usleep(5_000)
            }
        }
    }

    // MARK: Closing

    /// Whether ``close()`` was called.
    package var isClosed: Bool { closed.withLock { $0 } }

    /// Closes the connection after the calls already waiting for it; later calls throw ``closedError``.
    ///
    /// Closing twice is harmless. When this is the last connection to the file, SQLite checkpoints the write-ahead
    /// log into the database and removes the `-wal` and `-shm` files (a read-only connection cannot, and leaves them).
    package func close() {
        precondition(
            DispatchQueue.getSpecific(key: onQueue) != ObjectIdentifier(self),
            "SQLiteDatabase.close called from inside a read or write of the same database")
        queue.sync { closeOnQueue() }
    }

    /// Closes the connection like ``close()``, without blocking a thread of the concurrency pool while waiting.
    package func close() async {
        await withCheckedContinuation { continuation in
            queue.async {
                self.closeOnQueue()
                continuation.resume()
            }
        }
    }

    private func closeOnQueue() {
        closed.withLock { $0 = true }
        if holdsSnapshot, let connection {
            try? connection.executeScript("ROLLBACK")
            // A reader never folds the log into the database: what others wrote stays in the log for them. An empty
            // log (nobody wrote) is removed, with its index, when this is the last connection.
            let logSize = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
            if logSize > 0 { connection.keepLogOnClose() }
        }
        connection?.close()
        connection = nil
    }

    /// The error every call after ``close()`` throws.
    package var closedError: SQLiteError {
        SQLiteError(
            code: .misuse, message: "the database was closed; open it again to use it", path: path)
    }

    private func openConnection() throws(SQLiteError) -> SQLiteConnection {
        guard let connection else { throw closedError }
        return connection
    }

    // MARK: Synchronous access

    /// Runs `body` with the connection, outside any transaction.
    package func read<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        precondition(
            DispatchQueue.getSpecific(key: onQueue) != ObjectIdentifier(self),
            "SQLiteDatabase.read called from inside another read or write of the same database")
        return try queue.sync { try body(openConnection()) }
    }

    /// Runs `body` in a transaction that commits only when `body` returns without throwing.
    package func write<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try read { connection in try connection.transaction { try body(connection) } }
    }

    // MARK: Asynchronous access

    /// Runs `body` with the connection without blocking a thread of the concurrency pool while waiting.
    package func read<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(with: Result { try body(self.openConnection()) })
            }
        }
    }

    /// Runs `body` in a transaction, without blocking a thread of the concurrency pool while waiting.
    package func write<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        try await read { connection in try connection.transaction { try body(connection) } }
    }
}
