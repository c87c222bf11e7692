import CloudSync
import CloudSyncSQLite
import Foundation

/// A provider over a table of someone else's SQLite database (an application's own), read and written as it is.
///
/// It never creates, alters or migrates anything in that database: no table, no index, no journal-mode change. A key
/// is a row of `table` whose `keyColumn` holds the key and `valueColumn` the value; a write updates the row (and
/// `updatedAtColumn`, in epoch milliseconds, when one is named) or inserts one, a remove deletes it. With `readOnly`
/// the file is opened without write access and every write fails, for a source that must never change.
public final class SQLiteTableProvider: Provider {
    /// Which table and columns hold the keys and values.
    public struct Mapping: Sendable, Equatable {
        public var table: String
        public var keyColumn: String
        public var valueColumn: String
        /// A column set to the write time in epoch milliseconds; nil for none.
        public var updatedAtColumn: String?

        /// A mapping onto `table`.
        public init(table: String, keyColumn: String, valueColumn: String, updatedAtColumn: String? = nil) {
            self.table = table
            self.keyColumn = keyColumn
            self.valueColumn = valueColumn
            self.updatedAtColumn = updatedAtColumn
        }
    }

    public let id: String
    public let capabilities: ProviderCapabilities
    /// The database file.
    public let path: String
    public let mapping: Mapping
    public let readOnly: Bool
    /// Counts each call (one transaction) as one request.
    public let metrics: ProviderMetrics
    private let database: SQLiteDatabase
    private let clock: any StoreClock
    /// SQL fragments, with every name quoted.
    private let sql: (select: String, update: String, insert: String, delete: String, list: String, count: String)

    /// Opens the existing database at `path` and checks that `mapping` names a table and columns it has.
    public init(
        id: String = "sqlite", path: String, mapping: Mapping, readOnly: Bool = false,
        clock: any StoreClock = SystemClock(), metrics: ProviderMetrics = ProviderMetrics()
    ) throws(CloudSyncError) {
        self.id = id
        self.path = path
        self.mapping = mapping
        self.readOnly = readOnly
        self.clock = clock
        self.metrics = metrics
        capabilities = ProviderCapabilities(tier: .file, batchLimit: 500, canList: true, reportsQuota: false)
        guard FileManager.default.fileExists(atPath: path) else {
            throw CloudSyncError(
                .config, "the database \(path) does not exist; a mapped table is never created: check the path",
                provider: id)
        }
        let opened: SQLiteDatabase
        let keyIsText: Bool
        do {
            // No write-ahead log: switching the journal mode would change the application's database.
            opened = try SQLiteDatabase(
                path: path, options: SQLiteDatabase.Options(writeAheadLog: false, readOnly: readOnly))
            keyIsText = try opened.read { db throws(CloudSyncError) in
                try Self.check(mapping, in: db, path: path, provider: id)
            }
        } catch let error as CloudSyncError {
            throw error
        } catch let error as SQLiteError where error.code.primary == .busy || error.code.primary == .locked {
            throw CloudSyncError(
                .timeout, "\(path) stayed locked by another process while it was being opened; try again later",
                provider: id)
        } catch let error as SQLiteError {
            throw CloudSyncError(.config, "cannot open \(path): \(error.details)", provider: id)
        } catch {
            throw CloudSyncError(.config, "cannot open \(path): \(error)", provider: id)
        }
        database = opened
        let table = Self.quote(mapping.table)
        let key = Self.quote(mapping.keyColumn)
        let value = Self.quote(mapping.valueColumn)
        let stamp = mapping.updatedAtColumn.map(Self.quote)
        // Keys are text to the store; a key column of another type is compared as text (no index, but correct).
        let keyText = keyIsText ? key : "CAST(\(key) AS TEXT)"
        // Keys are their bytes: whatever collation the column declares (NOCASE counts `Apple` and `apple` as one),
        // a key names only the row whose key has its bytes. On a BINARY column (the default) this changes nothing
        // and the column's index still serves every lookup.
        let keyIs = "\(keyText) = ? COLLATE BINARY"
        sql = (
            select: "SELECT \(value) FROM \(table) WHERE \(keyIs)",
            update: "UPDATE \(table) SET \(value) = ?" + (stamp.map { ", \($0) = ?" } ?? "") + " WHERE \(keyIs)",
            insert: "INSERT INTO \(table) (\(key), \(value)" + (stamp.map { ", \($0)" } ?? "") + ") VALUES (?, ?"
                + (stamp == nil ? "" : ", ?") + ")",
            delete: "DELETE FROM \(table) WHERE \(keyIs)",
            list:
                "SELECT \(keyText) FROM \(table) WHERE \(keyText) > ? COLLATE BINARY ORDER BY \(keyText) COLLATE BINARY "
                + "LIMIT ?",
            // The rows a full listing yields: a NULL or empty key is never listed, so never counted.
            count: "SELECT count(*) FROM \(table) WHERE \(keyText) > '' COLLATE BINARY"
        )
    }

    /// Checks the table and columns exist; returns whether the key column is declared as text.
    private static func check(_ mapping: Mapping, in db: SQLiteConnection, path: String, provider: String)
        throws(CloudSyncError) -> Bool
    {
        let columns: [(name: String, type: String)]
        let tables: [String]
        do {
            columns = try db.query("SELECT name, type FROM pragma_table_info(?)", [mapping.table]) {
                ($0.string(0) ?? "", ($0.string(1) ?? "").uppercased())
            }
            tables = try db.query(
                "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite%' ORDER BY name"
            ) { $0.string(0) ?? "" }
        } catch {
            throw CloudSyncError(.config, "cannot read the tables of \(path): \(error)", provider: provider)
        }
        guard !columns.isEmpty else {
            throw CloudSyncError(
                .config,
                "\(path) has no table `\(mapping.table)`; its tables: "
                    + (tables.isEmpty ? "none" : tables.joined(separator: ", ")) + "; fix `table`",
                provider: provider)
        }
        let names = columns.map(\.name)
        let wanted =
            [
                ("keyColumn", mapping.keyColumn), ("valueColumn", mapping.valueColumn),
            ] + (mapping.updatedAtColumn.map { [("updatedAtColumn", $0)] } ?? [])
        for (field, column) in wanted where !names.contains(column) {
            throw CloudSyncError(
                .config,
                "table `\(mapping.table)` of \(path) has no column `\(column)` (\(field)); its columns: "
                    + names.joined(separator: ", "),
                provider: provider)
        }
        let keyType = columns.first { $0.name == mapping.keyColumn }?.type ?? ""
        return keyType.contains("CHAR") || keyType.contains("CLOB") || keyType.contains("TEXT")
    }

    /// `name` as an SQL identifier, whatever it holds.
    static func quote(_ name: String) -> String { "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }

    public func availability() async -> Availability {
        database.isClosed
            ? .unavailable(.closed, "the SQLite provider \(id) was closed; open a new provider on \(path)")
            : .available
    }

    public func close() async { await database.close() }

    private func refuseWrites() throws(CloudSyncError) {
        guard !readOnly else {
            throw CloudSyncError(
                .unsupported, "provider \(id) is read-only (readOnly: true): \(path) is never written", provider: id)
        }
    }

    public func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] {
        let select = sql.select
        let values: [String?] = try await run { db in
            let statement = try db.prepare(select)
            return try keys.map { key in
                try statement.bind(key)
                return try statement.step() ? statement.string(0) : nil
            }
        }
        metrics.recordRequest(bytesRead: values.reduce(0) { $0 + ($1?.utf8.count ?? 0) })
        return values.map { .success($0) }
    }

    public func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] {
        try refuseWrites()
        let (update, insert, stamped) = (sql.update, sql.insert, mapping.updatedAtColumn != nil)
        let now = clock.nowMilliseconds()
        let id = id
        let results: [Result<Void, CloudSyncError>] = try await run(writing: true) { db in
            let updating = try db.prepare(update)
            let inserting = try db.prepare(insert)
            return items.map { item in
                do {
                    try updating.bind(stamped ? [item.value, now, item.key] : [item.value, item.key]).run()
                    if db.changes == 0 {
                        try inserting.bind(stamped ? [item.key, item.value, now] : [item.key, item.value]).run()
                    }
                    return .success(())
                } catch let error as SQLiteError
                    where error.code == .constraintPrimaryKey || error.code == .constraintUnique
                {
                    // No row has these bytes, yet the insert collides: the key column's collation counts another
                    // key as this one.
                    return .failure(
                        CloudSyncError(
                            .provider,
                            "the table holds a key its key column counts as the same as \(item.key) though they "
                                + "differ byte for byte (the column's collation, such as NOCASE, ignores case or "
                                + "spelling): \(error.message); keys are compared by their bytes, so this one cannot "
                                + "be stored beside it; rename one, or give the column COLLATE BINARY",
                            provider: id, key: item.key))
                } catch let error as SQLiteError {
                    // A row the table's own constraints refuse (another NOT NULL column, a CHECK): this key only.
                    return .failure(
                        CloudSyncError(
                            .provider, "the table refused the row: \(error.message)", provider: id, key: item.key))
                } catch {
                    return .failure(CloudSyncError(.provider, "\(error)", provider: id, key: item.key))
                }
            }
        }
        metrics.recordWrite(items, results)
        return results
    }

    public func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] {
        try refuseWrites()
        metrics.recordRequest()
        let delete = sql.delete
        return try await run(writing: true) { db in
            let statement = try db.prepare(delete)
            return try keys.map { key in
                try statement.bind(key).run()
                return .success(())
            }
        }
    }

    public func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage {
        metrics.recordRequest()
        let limit = max(limit, 1)
        let list = sql.list
        let keys = try await run { db in
            try db.query(list, [cursor ?? "", limit + 1]) { $0.string(0) ?? "" }
        }
        let page = Array(keys.prefix(limit))
        return KeyPage(keys: page, nextCursor: keys.count > limit ? page.last : nil)
    }

    /// How many keys a full listing yields, counted in SQL (one pass over the key column's index where it has one),
    /// so a `migrate` from the table shows its progress total.
    public func keyCount() async throws -> Int? {
        metrics.recordRequest()
        let count = sql.count
        return try await run { db in try db.query(count) { Int($0.int64(0)) }.first ?? 0 }
    }

    private func run<T: Sendable>(writing: Bool = false, _ body: @escaping @Sendable (SQLiteConnection) throws -> T)
        async throws -> T
    {
        guard !database.isClosed else {
            throw CloudSyncError(.closed, "the SQLite provider \(id) was closed", provider: id)
        }
        do {
            return writing ? try await database.write(body) : try await database.read(body)
        } catch let error as SQLiteError {
            throw error.cloudSyncError(provider: id)
        }
    }
}
