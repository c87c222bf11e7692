import Foundation

/// A named change to a database's schema.
package struct SQLiteMigration: Sendable {
    /// A unique, stable name; it is recorded in the database once the migration has been applied.
    package let name: String
    let apply: @Sendable (SQLiteConnection) throws -> Void

    /// A migration named `name` that runs `apply` on the connection, inside the transaction that records it: a throw
    /// rolls both back.
    package init(_ name: String, apply: @escaping @Sendable (SQLiteConnection) throws -> Void) {
        self.name = name
        self.apply = apply
    }

    /// A migration that runs a fixed SQL script.
    package init(_ name: String, sql: String) {
        self.init(name) { connection in try connection.executeScript(sql) }
    }
}

/// Applies named migrations in order, each exactly once per database file.
///
/// Applied names are recorded in the table `cloudsync_migrations`. Each migration runs in its own transaction
/// together with its record, so a failing migration leaves neither its changes nor its record behind.
package struct SQLiteMigrator: Sendable {
    /// The migrations, in the order they are applied.
    package let migrations: [SQLiteMigration]

    /// A migrator of `migrations`, applied in this order; their names must be unique (a duplicate stops the program,
    /// being a programming error).
    package init(_ migrations: [SQLiteMigration]) {
        var seen = Set<String>()
        for migration in migrations {
            precondition(seen.insert(migration.name).inserted, "duplicate migration name \(migration.name)")
        }
        self.migrations = migrations
    }

    /// Applies the migrations the database has not seen yet; returns their names in the order applied.
    @discardableResult
    package func migrate(_ database: SQLiteDatabase) throws -> [String] {
        try database.read { connection in
            try connection.executeScript(
                """
                CREATE TABLE IF NOT EXISTS cloudsync_migrations (
                    name TEXT PRIMARY KEY NOT NULL,
                    applied_at_ms INTEGER NOT NULL
                )
                """)
            let applied = Set(try connection.query("SELECT name FROM cloudsync_migrations") { $0.string(0) ?? "" })
            var appliedNow: [String] = []
            for migration in migrations where !applied.contains(migration.name) {
                let appliedHere = try connection.transaction {
                    // Another connection (a second process creating the same file) may have applied it since the
                    // list was read; the transaction's write lock makes this look final.
                    let recorded = try connection.query(
                        "SELECT 1 FROM cloudsync_migrations WHERE name = ?", [migration.name]
                    ) { _ in true }
                    guard recorded.isEmpty else { return false }
                    try migration.apply(connection)
                    try connection.execute(
                        "INSERT INTO cloudsync_migrations (name, applied_at_ms) VALUES (?, ?)", migration.name,
                        Int64((Date().timeIntervalSince1970 * 1000).rounded()))
                    return true
                }
                if appliedHere { appliedNow.append(migration.name) }
            }
            return appliedNow
        }
    }

    /// What ``openReadOnly(path:options:isCurrent:otherwise:)`` reads when the file is not current.
    package enum ReadOnlyFallback: Sendable {
        /// A private copy of the file, migrated (a file an older version wrote).
        case migratedCopy
        /// A private, empty, migrated database (a file a process was killed while creating holds nothing yet).
        case emptyDatabase
    }

    /// Opens `path` for reading only, with today's tables, and never writes it.
    ///
    /// A file `isCurrent` accepts (by default: it has seen every migration) is read as it is, with `options`, read-only.
    /// Any other is read through `otherwise`, a private file in the temporary directory, migrated there.
    package func openReadOnly(
        path: String, options: SQLiteDatabase.Options,
        isCurrent: ((SQLiteDatabase) throws -> Bool)? = nil, otherwise fallback: ReadOnlyFallback
    ) throws -> SQLiteDatabase {
        var readOnly = options
        readOnly.readOnly = true
        let current = try SQLiteDatabase(path: path, options: readOnly)
        let accepted =
            try isCurrent?(current)
            ?? {
                let applied = Set(try Self.appliedMigrations(in: current))
                return !migrations.contains { !applied.contains($0.name) }
            }()
        guard !accepted else { return current }
        current.close()
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent(
            "cloudsync-read-\(getpid())-\(UUID().uuidString).db"
        ).path
        defer { try? FileManager.default.removeItem(atPath: copy) }
        if fallback == .migratedCopy { try FileManager.default.copyItem(atPath: path, toPath: copy) }
        let upgrading = try SQLiteDatabase(path: copy, options: SQLiteDatabase.Options(writeAheadLog: false))
        try migrate(upgrading)
        upgrading.close()
        // Opened before the file is removed: the open file stays readable until it is closed.
        return try SQLiteDatabase(path: copy, options: SQLiteDatabase.Options(writeAheadLog: false, readOnly: true))
    }

    /// Names of the migrations recorded in the database, in the order they were applied.
    package static func appliedMigrations(in database: SQLiteDatabase) throws -> [String] {
        try database.read { connection in
            guard try connection.hasTable("cloudsync_migrations") else { return [] }
            return try connection.query("SELECT name FROM cloudsync_migrations ORDER BY rowid") { $0.string(0) ?? "" }
        }
    }
}
