import CloudSyncSQLite
import CloudSyncTesting
import Foundation
import Testing

@Suite struct SQLiteDatabaseTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    private func openDatabase(_ name: String = "test.db", options: SQLiteDatabase.Options = .init()) throws
        -> SQLiteDatabase
    {
        try SQLiteDatabase(path: directory.file(name), options: options)
    }

    @Test func createsTheFileReadableOnlyByItsOwnerInWALMode() throws {
        let database = try openDatabase()
        let attributes = try FileManager.default.attributesOfItem(atPath: database.path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let mode = try database.read { try $0.query("PRAGMA journal_mode") { $0.string(0) } }
        #expect(mode == ["wal"])
        let foreignKeys = try database.read { try $0.query("PRAGMA foreign_keys") { $0.int64(0) } }
        #expect(foreignKeys == [1])
    }

    /// A large transaction in a rollback-journal database commits with one set of fsyncs only if its dirty pages fit
    /// the cache: every connection (the writer's and the readers') gets the size asked for.
    @Test func theCacheSizeAskedForIsEveryConnections() throws {
        var options = SQLiteDatabase.Options(writeAheadLog: false)
        options.cacheBytes = 16 << 20
        let database = try openDatabase(options: options)
        #expect(try database.read { try $0.query("PRAGMA cache_size") { $0.int64(0) } } == [-16_384])
        #expect(try database.write { try $0.query("PRAGMA cache_size") { $0.int64(0) } } == [-16_384])
        #expect(try openDatabase("default.db").read { try $0.query("PRAGMA cache_size") { $0.int64(0) } } == [-2_000])
    }

    @Test func enforcesForeignKeys() throws {
        let database = try openDatabase()
        try database.write { db in
            try db.executeScript(
                """
                CREATE TABLE parent (id INTEGER PRIMARY KEY);
                CREATE TABLE child (parent_id INTEGER NOT NULL REFERENCES parent(id));
                """)
        }
        let error = #expect(throws: SQLiteError.self) {
            try database.write { db in try db.execute("INSERT INTO child (parent_id) VALUES (?)", 42) }
        }
        #expect(error?.code.primary == .constraint)
        #expect(error?.code.rawValue == 787)  // SQLITE_CONSTRAINT_FOREIGNKEY
    }

    @Test func rollsBackWhenTheBodyThrows() throws {
        struct Abort: Error {}
        let database = try openDatabase()
        try database.write { try $0.executeScript("CREATE TABLE t (x INTEGER)") }
        #expect(throws: Abort.self) {
            try database.write { db in
                try db.execute("INSERT INTO t (x) VALUES (?)", 1)
                throw Abort()
            }
        }
        let count = try database.read { try $0.query("SELECT count(*) FROM t") { $0.int64(0) } }
        #expect(count == [0])
        #expect(try database.read { $0.isInTransaction } == false)
    }

    @Test func commitsWhenTheBodyReturns() throws {
        let database = try openDatabase()
        try database.write { db in
            try db.executeScript("CREATE TABLE t (x INTEGER)")
            try db.execute("INSERT INTO t (x) VALUES (?)", 7)
        }
        let reopened = try openDatabase()
        #expect(try reopened.read { try $0.query("SELECT x FROM t") { $0.int64(0) } } == [7])
    }

    @Test func nestedTransactionFailureUndoesOnlyTheInnerWork() throws {
        struct Abort: Error {}
        let database = try openDatabase()
        try database.write { db in
            try db.executeScript("CREATE TABLE t (x INTEGER)")
            try db.execute("INSERT INTO t (x) VALUES (1)")
            try? db.transaction {
                try db.execute("INSERT INTO t (x) VALUES (2)")
                throw Abort()
            }
        }
        #expect(try database.read { try $0.query("SELECT x FROM t") { $0.int64(0) } } == [1])
    }

    @Test func appliesEachMigrationExactlyOnceAcrossReopenings() throws {
        let runs = Counter()
        let migrator = SQLiteMigrator([
            SQLiteMigration("create items", sql: "CREATE TABLE items (key TEXT PRIMARY KEY, value TEXT)"),
            SQLiteMigration("add updated_at") { db in
                runs.next()
                try db.executeScript("ALTER TABLE items ADD COLUMN updated_at INTEGER")
            },
        ])
        do {
            let database = try openDatabase()
            #expect(try migrator.migrate(database) == ["create items", "add updated_at"])
            #expect(try migrator.migrate(database) == [])
        }
        let reopened = try openDatabase()
        #expect(try migrator.migrate(reopened) == [])
        #expect(runs.value == 1)
        #expect(try SQLiteMigrator.appliedMigrations(in: reopened) == ["create items", "add updated_at"])

        let extended = SQLiteMigrator(
            migrator.migrations + [SQLiteMigration("index values", sql: "CREATE INDEX items_value ON items(value)")])
        #expect(try extended.migrate(reopened) == ["index values"])
    }

    @Test func aFailedMigrationLeavesNoTraceAndRunsAgainNextTime() throws {
        let database = try openDatabase()
        let broken = SQLiteMigrator([
            SQLiteMigration("good", sql: "CREATE TABLE a (x)"),
            SQLiteMigration("bad", sql: "CREATE TABLE b (x); THIS IS NOT SQL"),
        ])
        #expect(throws: SQLiteError.self) { try broken.migrate(database) }
        #expect(try SQLiteMigrator.appliedMigrations(in: database) == ["good"])
        let tables = try database.read {
            try $0.query("SELECT name FROM sqlite_schema WHERE type = 'table' AND name = 'b'") { $0.string(0) }
        }
        #expect(tables.isEmpty)
    }

    @Test func aLockedDatabaseReportsTheBusyCode() throws {
        let holder = try openDatabase()
        try holder.write { try $0.executeScript("CREATE TABLE t (x INTEGER)") }
        let waiter = try openDatabase(options: .init(busyTimeoutMilliseconds: 0))
        try holder.read { try $0.executeScript("BEGIN IMMEDIATE") }
        defer { try? holder.read { try $0.executeScript("ROLLBACK") } }

        let error = #expect(throws: SQLiteError.self) {
            try waiter.write { try $0.execute("INSERT INTO t (x) VALUES (1)") }
        }
        #expect(error?.code.primary == .busy)
        #expect(error?.path == waiter.path)
    }

    @Test func refusesAFileThatIsNotADatabaseAndLeavesItAlone() throws {
        let path = directory.file("notes.txt")
        let contents = Data(String(repeating: "these are not the bytes of a database\n", count: 200).utf8)
        try contents.write(to: URL(fileURLWithPath: path))
        let error = #expect(throws: SQLiteError.self) { try SQLiteDatabase(path: path) }
        #expect(error?.code.primary == .notADatabase)
        #expect(error?.description.contains(path) == true)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == contents)
    }

    @Test func aMissingDirectoryIsAClearError() throws {
        let path = directory.file("no/such/dir/test.db")
        let error = #expect(throws: SQLiteError.self) { try SQLiteDatabase(path: path) }
        #expect(error?.code == .cannotOpen)
        #expect(error?.description.contains("No such file or directory") == true)
    }

    @Test func errorsKeepTheExtendedCodeMessageAndStatement() throws {
        let database = try openDatabase()
        try database.write { try $0.executeScript("CREATE TABLE t (k TEXT PRIMARY KEY)") }
        try database.write { try $0.execute("INSERT INTO t (k) VALUES (?)", "a") }
        let error = #expect(throws: SQLiteError.self) {
            try database.write { try $0.execute("INSERT INTO t (k) VALUES (?)", "a") }
        }
        #expect(error?.code.rawValue == 1555)  // SQLITE_CONSTRAINT_PRIMARYKEY
        #expect(error?.code.primary == .constraint)
        #expect(error?.message == "UNIQUE constraint failed: t.k")
        #expect(error?.sql == "INSERT INTO t (k) VALUES (?)")
    }

    @Test func wrongParameterCountIsRefused() throws {
        let database = try openDatabase()
        let error = #expect(throws: SQLiteError.self) {
            try database.read { try $0.execute("SELECT ?, ?", 1) }
        }
        #expect(error?.code == .range)
    }

    @Test func manyConcurrentTasksWriteThroughOneConnection() async throws {
        let database = try openDatabase()
        try await database.write { try $0.executeScript("CREATE TABLE t (task INTEGER, row INTEGER)") }
        let tasks = 64
        let rowsPerTask = 20
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<tasks {
                group.addTask {
                    for row in 0..<rowsPerTask {
                        try await database.write { db in
                            try db.execute("INSERT INTO t (task, row) VALUES (?, ?)", task, row)
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let counts = try await database.read { db in
            try db.query("SELECT count(*), count(DISTINCT task * 1000 + row) FROM t") { [$0.int64(0), $0.int64(1)] }
        }
        #expect(counts == [[Int64(tasks * rowsPerTask), Int64(tasks * rowsPerTask)]])
    }

    @Test func synchronousAndAsynchronousCallersShareTheConnectionSafely() async throws {
        let database = try openDatabase()
        try await database.write { try $0.executeScript("CREATE TABLE t (x INTEGER)") }
        let threadsDone = DispatchGroup()
        for value in 0..<8 {
            threadsDone.enter()
            Thread.detachNewThread {
                for _ in 0..<10 { try? database.write { try $0.execute("INSERT INTO t (x) VALUES (?)", value) } }
                threadsDone.leave()
            }
        }
        for value in 0..<80 {
            try await database.write { try $0.execute("INSERT INTO t (x) VALUES (?)", 100 + value) }
        }
        await offPool { threadsDone.wait() }
        let count = try await database.read { try $0.query("SELECT count(*) FROM t") { $0.int64(0) } }
        #expect(count == [160])
    }

    /// Every file in `folder` and its bytes.
    private func files(in folder: String) throws -> [String: Data] {
        var contents: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: folder) {
            contents[name] = try Data(contentsOf: URL(fileURLWithPath: folder + "/" + name))
        }
        return contents
    }

    private func rowCount(_ database: SQLiteDatabase) throws -> [Int64] {
        try database.read { try $0.query("SELECT count(*) FROM t") { $0.int64(0) } }
    }

    @Test func aReadOnlyOpenReadsTheLogAndCreatesNothingWhenTheLogAndItsIndexExist() throws {
        let live = directory.file("live.db")
        let writer = try openDatabase("live.db")
        try writer.write { db in
            try db.executeScript("CREATE TABLE t (x INTEGER)")
            for value in 0..<50 { try db.execute("INSERT INTO t (x) VALUES (?)", value) }
        }
        // The writer is still open, so its commits sit in the -wal; read a copy of the three files.
        try FileManager.default.createDirectory(atPath: directory.file("copy"), withIntermediateDirectories: true)
        for suffix in ["", "-wal", "-shm"] {
            try FileManager.default.copyItem(atPath: live + suffix, toPath: directory.file("copy/live.db") + suffix)
        }
        let before = try files(in: directory.file("copy"))
        do {
            let reader = try SQLiteDatabase(path: directory.file("copy/live.db"), options: .init(readOnly: true))
            #expect(try rowCount(reader) == [50])
            let error = #expect(throws: SQLiteError.self) {
                try reader.write { try $0.execute("INSERT INTO t (x) VALUES (1)") }
            }
            #expect(error?.code.primary == .readOnly)
        }
        #expect(try files(in: directory.file("copy")) == before)
        _ = writer
    }

    @Test func aReadOnlyOpenOfACleanlyClosedDatabaseCreatesNothing() throws {
        do {
            let writer = try openDatabase("clean.db")
            try writer.write { db in
                try db.executeScript("CREATE TABLE t (x INTEGER)")
                for value in 0..<50 { try db.execute("INSERT INTO t (x) VALUES (?)", value) }
            }
        }
        let before = try files(in: directory.path)
        #expect(before.keys.sorted() == ["clean.db"])
        do {
            let reader = try openDatabase("clean.db", options: .init(readOnly: true))
            #expect(try rowCount(reader) == [50])
        }
        // With no log beside it the file holds everything, so it is read as it is: no -wal or -shm appears (SQLite
        // would otherwise add an empty log and its index, and a read-only connection could not remove them).
        let after = try files(in: directory.path)
        #expect(after == before)
    }

    @Test func aReadOnlyOpenOfAMissingFileFailsAndCreatesNothing() throws {
        let error = #expect(throws: SQLiteError.self) {
            try openDatabase("missing.db", options: .init(readOnly: true))
        }
        #expect(error?.code.primary == .cannotOpen)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
    }

    @Test func closeIsIdempotentAndLaterCallsThrowAClearError() async throws {
        let database = try openDatabase()
        try await database.write { try $0.executeScript("CREATE TABLE t (x INTEGER)") }
        // A synchronous context picks the blocking form, an asynchronous one the awaiting form.
        let closeBlocking = { database.close() }
        closeBlocking()
        closeBlocking()
        await database.close()
        #expect(database.isClosed)
        let error = #expect(throws: SQLiteError.self) { try rowCount(database) }
        #expect(error?.code == .misuse)
        #expect(error?.message == "the database was closed; open it again to use it")
        #expect(error?.path == database.path)
        let asyncError = await #expect(throws: SQLiteError.self) {
            try await database.write { try $0.execute("INSERT INTO t (x) VALUES (1)") }
        }
        #expect(asyncError?.message == error?.message)
    }

    @Test func closingTheLastConnectionCheckpointsTheLogAndRemovesItsFiles() throws {
        let database = try openDatabase("closed.db")
        try database.write { db in
            try db.executeScript("CREATE TABLE t (x INTEGER)")
            for value in 0..<100 { try db.execute("INSERT INTO t (x) VALUES (?)", value) }
        }
        #expect(try files(in: directory.path).keys.sorted() == ["closed.db", "closed.db-shm", "closed.db-wal"])
        database.close()
        #expect(try files(in: directory.path).keys.sorted() == ["closed.db"])
        // The file alone now holds everything: even a read that ignores the log sees every row.
        let copy = try Data(contentsOf: URL(fileURLWithPath: directory.file("closed.db")))
        try copy.write(to: URL(fileURLWithPath: directory.file("alone.db")))
        #expect(try rowCount(try openDatabase("alone.db")) == [100])
    }

    @Test func closingWhileAnotherConnectionIsOpenLeavesTheLogToIt() throws {
        let first = try openDatabase("shared.db")
        let second = try openDatabase("shared.db")
        try first.write { db in
            try db.executeScript("CREATE TABLE t (x INTEGER)")
            try db.execute("INSERT INTO t (x) VALUES (1)")
        }
        #expect(try rowCount(second) == [1])
        first.close()
        #expect(FileManager.default.fileExists(atPath: directory.file("shared.db-wal")))
        #expect(try rowCount(second) == [1])
        second.close()
        #expect(try files(in: directory.path).keys.sorted() == ["shared.db"])
    }
}
