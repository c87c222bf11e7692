import CloudSync
import CloudSyncLocal
import CloudSyncSQLite
import CloudSyncTesting
import Foundation
import Testing

/// An application's own database: a preferences table with a modification time, and a table CloudSync must never
/// touch.
private func makeAppDatabase(_ path: String) throws {
    let app = try SQLiteDatabase(path: path, options: SQLiteDatabase.Options(writeAheadLog: false))
    try app.write { db in
        try db.executeScript(
            """
            CREATE TABLE prefs (name TEXT PRIMARY KEY, json TEXT NOT NULL, modified INTEGER);
            CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT NOT NULL);
            INSERT INTO prefs VALUES ('prefs.theme', '"dark"', 1), ('prefs.font', '14', 1), ('other.flag', '1', 1);
            INSERT INTO users (email) VALUES ('a@example.com');
            """)
    }
    app.close()
}

private let mapping = SQLiteTableProvider.Mapping(
    table: "prefs", keyColumn: "name", valueColumn: "json", updatedAtColumn: "modified")

@Suite struct SQLiteTableProviderTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    @Test func conformsToTheProviderContractOnAnApplicationsTable() async throws {
        let directory = self.directory
        let counter = Counter()
        let failures = await ProviderConformanceSuite.run {
            let path = directory.file("app-\(counter.next()).db")
            let app = try SQLiteDatabase(path: path)
            try app.write { db in
                try db.executeScript("CREATE TABLE prefs (name TEXT PRIMARY KEY, json TEXT NOT NULL, modified INTEGER)")
            }
            app.close()
            return try SQLiteTableProvider(path: path, mapping: mapping)
        }
        #expect(failures.isEmpty, "\(failures)")
    }

    /// A key column declared `COLLATE NOCASE` never merges `Apple` and `apple`.
    ///
    /// It counted them as one row: a write of `apple` updated `Apple`'s value and a read of `apple` answered it.
    /// Keys are bytes, so the table's collation never decides
    /// which row a key is: such a write fails for that key, saying why, and nothing of `Apple` changes.
    @Test func aCaseInsensitiveKeyColumnNeverMergesKeysThatDifferInCase() async throws {
        let path = directory.file("nocase.db")
        let app = try SQLiteDatabase(path: path)
        try await app.write { db in
            try db.executeScript(
                "CREATE TABLE prefs (name TEXT PRIMARY KEY COLLATE NOCASE, json TEXT NOT NULL, modified INTEGER)")
        }
        await app.close()
        let provider = try SQLiteTableProvider(path: path, mapping: mapping)
        _ = try await provider.set([KeyValue("Apple", "1")])
        let results = try await provider.set([KeyValue("apple", "2"), KeyValue("Banana", "3")])
        #expect(throws: CloudSyncError.self) { try results[0].get() }
        if case .failure(let error) = results[0] {
            #expect(error.key == "apple")
            #expect(error.message.contains("differ"))
        }
        #expect((try? results[1].get()) != nil)
        #expect(try await provider.get(["Apple", "apple", "Banana"]).map { try $0.get() } == ["1", nil, "3"])
        #expect(try await listEveryKey(of: provider, pageSize: 1) == ["Apple", "Banana"])
        _ = try await provider.remove(["apple"])
        #expect(try await provider.get(["Apple"]).map { try $0.get() } == ["1"])
    }

    /// The count a migrate shows as its progress total is what a full listing yields: rows whose key is NULL or empty
    /// are in neither, and a key column of another type is counted as the text it lists as.
    @Test func theKeyCountIsTheNumberOfKeysAListingYields() async throws {
        let path = directory.file("counted.db")
        let app = try SQLiteDatabase(path: path, options: SQLiteDatabase.Options(writeAheadLog: false))
        try await app.write { db in
            try db.executeScript(
                """
                CREATE TABLE prefs (name TEXT, json TEXT NOT NULL, modified INTEGER);
                INSERT INTO prefs VALUES ('a', '1', 1), ('b', '2', 1), (NULL, '3', 1), ('', '4', 1), ('c', '5', 1);
                CREATE TABLE numbered (id INTEGER PRIMARY KEY, body TEXT);
                INSERT INTO numbered (id, body) VALUES (1, 'x'), (20, 'y'), (300, 'z');
                """)
        }
        await app.close()
        let prefs = try SQLiteTableProvider(path: path, mapping: mapping)
        #expect(try await prefs.keyCount() == 3)
        #expect(try await listEveryKey(of: prefs, pageSize: 2).count == 3)
        let numbered = try SQLiteTableProvider(
            path: path, mapping: SQLiteTableProvider.Mapping(table: "numbered", keyColumn: "id", valueColumn: "body"))
        #expect(try await numbered.keyCount() == 3)
        #expect(try await listEveryKey(of: numbered, pageSize: 2) == ["1", "20", "300"])
        await prefs.close()
        await numbered.close()
    }

    @Test func readsAndWritesTheTableAsItIsAndChangesNothingElse() async throws {
        let path = directory.file("app.db")
        try makeAppDatabase(path)
        let schema = { () throws -> [String] in
            let db = try SQLiteDatabase(
                path: path, options: SQLiteDatabase.Options(writeAheadLog: false, readOnly: true))
            defer { db.close() }
            return try db.read { try $0.query("SELECT sql FROM sqlite_schema ORDER BY name") { $0.string(0) ?? "" } }
                + db.read { try $0.query("PRAGMA journal_mode") { $0.string(0) ?? "" } }
        }
        let before = try schema()
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        let provider = try SQLiteTableProvider(id: "app", path: path, mapping: mapping, clock: clock)
        #expect(try await provider.get(["prefs.theme", "missing"]).map { try $0.get() } == ["\"dark\"", nil])
        _ = try await provider.set([KeyValue("prefs.theme", "\"light\""), KeyValue("prefs.new", "1")])
        _ = try await provider.remove(["other.flag"])
        #expect(try await provider.listKeys(after: nil, limit: 10).keys == ["prefs.font", "prefs.new", "prefs.theme"])
        await provider.close()
        #expect(try schema() == before)  // no table, index or journal mode was added or changed
        let db = try SQLiteDatabase(path: path, options: SQLiteDatabase.Options(writeAheadLog: false, readOnly: true))
        let rows: [String] = try await db.read { (db: SQLiteConnection) in
            try db.query("SELECT name, json, modified FROM prefs ORDER BY name") {
                "\($0.string(0) ?? "")=\($0.string(1) ?? ""),\($0.int64(2))"
            }
        }
        #expect(rows == ["prefs.font=14,1", "prefs.new=1,1800000000000", "prefs.theme=\"light\",1800000000000"])
        let users: [Int64] = try await db.read { (db: SQLiteConnection) in
            try db.query("SELECT count(*) FROM users") { $0.int64(0) }
        }
        #expect(users == [1])
        await db.close()
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
    }

    @Test func aReadOnlySourceRefusesEveryWriteAndIsNeverWritten() async throws {
        let path = directory.file("source.db")
        try makeAppDatabase(path)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        let source = try SQLiteTableProvider(id: "app", path: path, mapping: mapping, readOnly: true)
        #expect(try await source.get(["prefs.font"])[0].get() == "14")
        let error = await #expect(throws: CloudSyncError.self) { try await source.set([KeyValue("prefs.font", "16")]) }
        #expect(error?.code == .unsupported)
        await #expect(throws: CloudSyncError.self) { try await source.remove(["prefs.font"]) }
        await source.close()
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes)
    }

    @Test func aMappingThatNamesWhatIsNotThereSaysWhatIs() throws {
        let path = directory.file("app.db")
        try makeAppDatabase(path)
        let noTable = #expect(throws: CloudSyncError.self) {
            try SQLiteTableProvider(path: path, mapping: .init(table: "settings", keyColumn: "k", valueColumn: "v"))
        }
        #expect(noTable?.message.contains("has no table `settings`; its tables: prefs, users") == true)
        let noColumn = #expect(throws: CloudSyncError.self) {
            try SQLiteTableProvider(path: path, mapping: .init(table: "prefs", keyColumn: "key", valueColumn: "json"))
        }
        #expect(
            noColumn?.message.contains("has no column `key` (keyColumn); its columns: name, json, modified") == true)
    }

    @Test func theKVProviderRefusesADatabaseWithTablesOfItsOwnAndLeavesItUntouched() throws {
        let path = directory.file("app.db")
        try makeAppDatabase(path)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        let error = #expect(throws: CloudSyncError.self) { try SQLiteProvider(id: "app", path: path) }
        #expect(error?.code == .config)
        #expect(error?.message.contains("holds tables of its own (prefs, users)") == true)
        #expect(error?.message.contains("`table`, `keyColumn` and `valueColumn`") == true)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes)
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
    }
}
