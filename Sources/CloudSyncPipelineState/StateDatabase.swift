import CloudSync
import CloudSyncPipeline
import CloudSyncSQLite
import Foundation

/// A pipeline's state database (`<state>/state.db`, SQLite, mode 0600): the history of its runs, the account
/// identities its providers had last time, the opaque values providers keep between runs (rotating tokens, change
/// cursors), encrypted with the pipeline's codec when it names one, and the snapshots of sync and mirror jobs.
public final class StateDatabase: PipelineState {
    static let migrations = SQLiteMigrator([
        SQLiteMigration(
            "create runs, identities, provider values and snapshots",
            sql: """
                CREATE TABLE runs (
                    id TEXT PRIMARY KEY NOT NULL,
                    started_at TEXT NOT NULL,
                    finished_at TEXT NOT NULL,
                    status TEXT NOT NULL,
                    dry_run INTEGER NOT NULL,
                    jobs TEXT NOT NULL,
                    report TEXT
                );
                CREATE TABLE identities (
                    provider TEXT PRIMARY KEY NOT NULL,
                    identity TEXT NOT NULL,
                    seen_at TEXT NOT NULL
                ) WITHOUT ROWID;
                CREATE TABLE provider_values (
                    provider TEXT NOT NULL,
                    name TEXT NOT NULL,
                    value TEXT NOT NULL,
                    PRIMARY KEY (provider, name)
                ) WITHOUT ROWID;
                CREATE TABLE snapshots (
                    job TEXT NOT NULL,
                    key TEXT NOT NULL,
                    fingerprint TEXT NOT NULL,
                    PRIMARY KEY (job, key)
                ) WITHOUT ROWID;
                """),
        SQLiteMigration(
            "sync jobs' finished runs and deletions waiting for the mass-delete guard",
            sql: """
                CREATE TABLE sync_jobs (
                    job TEXT PRIMARY KEY NOT NULL,
                    finished_at TEXT NOT NULL
                ) WITHOUT ROWID;
                CREATE TABLE sync_deletions (
                    job TEXT NOT NULL,
                    key TEXT NOT NULL,
                    PRIMARY KEY (job, key)
                ) WITHOUT ROWID;
                """),
        SQLiteMigration(
            "sync jobs' change-feed cursors",
            sql: """
                CREATE TABLE sync_cursors (
                    job TEXT NOT NULL,
                    provider TEXT NOT NULL,
                    cursor TEXT NOT NULL,
                    PRIMARY KEY (job, provider)
                ) WITHOUT ROWID;
                """),
        SQLiteMigration(
            "mirror jobs' snapshot of what both sides held",
            sql: """
                CREATE TABLE mirror_rows (
                    job TEXT NOT NULL,
                    key TEXT NOT NULL,
                    digest TEXT NOT NULL,
                    source_version TEXT,
                    destination_version TEXT,
                    PRIMARY KEY (job, key)
                ) WITHOUT ROWID;
                """),
    ])

    /// The database file.
    public let path: String
    private let database: SQLiteDatabase
    private let seal: ProviderValueSeal
    /// In a read-only database, what was written during the session, kept in memory and never on disk.
    var overlay: Protected<[String: String?]>? { seal.overlay }

    /// The page cache of a writable state database while it commits many rows: room for the dirty pages of a sync's
    /// commit of `SyncRun.commitRows` snapshot rows spread over a large snapshot, which would otherwise spill
    /// mid-transaction and fsync the journal at each spill (210 journal fsyncs for 23 commits in a sync of 1,000,000
    /// keys).
    static let cacheBytes = 16 << 20
    /// The page cache the rest of the time.
    ///
    /// Reading a snapshot of 1,000,000 keys would otherwise keep its last ``cacheBytes`` of pages for the whole run,
    /// most of a quiet night's memory beyond the process's own.
    static let idleCacheBytes = 2 << 20

    /// Opens (creating when needed) the state database at `path`; provider values are encrypted with `codec`.
    ///
    /// With `readOnly` (dry runs) the file must exist and is never written: runs are not recorded and provider
    /// values set during the session live in memory only.
    public init(path: String, codec: (any ValueCodec)? = nil, readOnly: Bool = false) throws(CloudSyncError) {
        self.path = path
        seal = ProviderValueSeal(codec: codec, readOnly: readOnly)
        do {
            // A rollback journal rather than a write-ahead log: the state is written a few times a run, and a
            // read-only open (dry runs, `history`) of a journaled database creates no -wal or -shm beside it.
            if readOnly {
                // A file an older version wrote is read through a migrated private copy; `path` is never written.
                database = try Self.migrations.openReadOnly(
                    path: path, options: SQLiteDatabase.Options(writeAheadLog: false), otherwise: .migratedCopy)
            } else {
                var options = SQLiteDatabase.Options(writeAheadLog: false)
                options.temporaryFilesInMemory = true
                options.cacheBytes = Self.idleCacheBytes
                database = try SQLiteDatabase(path: path, options: options)
                try Self.migrations.migrate(database)
            }
        } catch let error as SQLiteError where error.code.primary == .full {
            throw CloudSyncError(
                .quotaExceeded,
                "the state database \(path) cannot be written: the disk under it is full (\(error.message)); free "
                    + "space on that file system and run again")
        } catch let error as SQLiteError {
            throw CloudSyncError(
                .config, "cannot open the state database \(path): \(error.message); check the state directory")
        } catch let error as CloudSyncError {
            throw error
        } catch {
            throw CloudSyncError(
                .config,
                "cannot open the state database \(path): \(describeFileError(error)); check the state directory")
        }
    }

    /// Releases the database file.
    public func close() {}

    /// Runs `body` with the page cache at ``cacheBytes``, then gives the room back.
    func withRoomForACommit<T>(_ body: () throws(CloudSyncError) -> T) throws(CloudSyncError) -> T {
        try setCache(bytes: Self.cacheBytes)
        defer { try? setCache(bytes: Self.idleCacheBytes) }
        return try body()
    }

    /// Sets the page cache's size; outside a transaction, so a smaller size lets the pages beyond it go at once.
    private func setCache(bytes: Int) throws(CloudSyncError) {
        guard overlay == nil else { return }
        do {
            try database.read { db in try db.executeScript("PRAGMA cache_size = -\(bytes / 1024)") }
        } catch {
            throw CloudSyncError(.config, "the state database \(path) failed: \(error)")
        }
    }

    func run<T>(_ body: (SQLiteConnection) throws -> T) throws(CloudSyncError) -> T {
        do {
            return overlay == nil ? try database.write(body) : try database.read(body)
        } catch let error as CloudSyncError {
            throw error
        } catch {
            throw CloudSyncError(.config, "the state database \(path) failed: \(error)")
        }
    }

    // MARK: Runs

    /// Records a finished run.
    public func record(_ run: RunRecord) throws(CloudSyncError) {
        guard overlay == nil else { return }
        let jobs = String(decoding: (try? JSONEncoder.sorted.encode(run.jobs)) ?? Data("{}".utf8), as: UTF8.self)
        try self.run { db in
            try db.execute(
                "INSERT OR REPLACE INTO runs (id, started_at, finished_at, status, dry_run, jobs, report) "
                    + "VALUES (?, ?, ?, ?, ?, ?, ?)",
                run.id, run.startedAt, run.finishedAt, run.status.rawValue, run.dryRun, jobs, run.report)
        }
    }

    /// The last `limit` runs, newest first.
    public func runs(limit: Int) throws(CloudSyncError) -> [RunRecord] {
        try runs(where: "", [], limit: limit)
    }

    public func run(id: String) throws(CloudSyncError) -> RunRecord? {
        try runs(where: "WHERE id = ?", [id], limit: 1).first
    }

    /// Up to `limit` runs matching `filter` (a `WHERE` clause and its values), newest first.
    private func runs(where filter: String, _ values: [any SQLiteBindable], limit: Int) throws(CloudSyncError)
        -> [RunRecord]
    {
        try run { db in
            try db.query(
                "SELECT id, started_at, finished_at, status, dry_run, jobs, report FROM runs \(filter) "
                    + "ORDER BY started_at DESC, rowid DESC LIMIT ?", values + [limit]
            ) { row in
                RunRecord(
                    id: row.string(0) ?? "", startedAt: row.string(1) ?? "", finishedAt: row.string(2) ?? "",
                    status: RunStatus(rawValue: row.string(3) ?? "") ?? .failed, dryRun: row.int64(4) != 0,
                    jobs: (try? JSONDecoder().decode([String: Int].self, from: Data((row.string(5) ?? "{}").utf8)))
                        ?? [:],
                    report: row.string(6))
            }
        }
    }

    // MARK: Identities

    /// The account identity `provider` had when last seen, if it reports one.
    public func identity(of provider: String) throws(CloudSyncError) -> String? {
        try run { db in
            try db.query("SELECT identity FROM identities WHERE provider = ?", [provider]) { $0.string(0) }.first
                ?? nil
        }
    }

    /// Remembers `identity` as `provider`'s account.
    public func remember(identity: String, of provider: String, at time: String) throws(CloudSyncError) {
        guard overlay == nil else { return }
        try run { db in
            try db.execute(
                "INSERT OR REPLACE INTO identities (provider, identity, seen_at) VALUES (?, ?, ?)", provider, identity,
                time)
        }
    }

    // MARK: Provider values

    /// The value `provider` keeps under `name`, decrypted with the database's codec; nil when none is kept.
    ///
    /// In a read-only database, a value set during the session wins over the file. Throws `ERR_DECODE` when the codec
    /// cannot decrypt the stored value (the key changed), `ERR_CONFIG` when the database fails.
    public func value(provider: String, name: String) throws(CloudSyncError) -> String? {
        try seal.value(provider: provider, name: name) { () throws(CloudSyncError) in
            try run { db in
                try db.query("SELECT value FROM provider_values WHERE provider = ? AND name = ?", [provider, name]) {
                    $0.string(0)
                }.first ?? nil
            }
        }
    }

    /// Keeps `value` under `name` for `provider`, encrypted with the database's codec; nil forgets it.
    ///
    /// A read-only database keeps it in memory for the session only. Throws `ERR_ENCODE` when encryption fails,
    /// `ERR_CONFIG` when the database fails.
    public func setValue(_ value: String?, provider: String, name: String) throws(CloudSyncError) {
        try seal.setValue(value, provider: provider, name: name) { (stored) throws(CloudSyncError) in
            try run { db in
                if let stored {
                    try db.execute(
                        "INSERT OR REPLACE INTO provider_values (provider, name, value) VALUES (?, ?, ?)", provider,
                        name, stored)
                } else {
                    try db.execute("DELETE FROM provider_values WHERE provider = ? AND name = ?", provider, name)
                }
            }
        }
    }

    // MARK: Sync snapshots

    /// Whether sync job `job` has finished a run before (so its snapshot is a baseline, not a first run's start).
    public func hasSynced(_ job: String) throws(CloudSyncError) -> Bool {
        try run { db in try db.query("SELECT 1 FROM sync_jobs WHERE job = ?", [job]) { _ in true }.first ?? false }
    }

    /// Records that sync job `job` finished a run at `time`; with `cursors`, replaces the job's change-feed cursors
    /// by them in the same transaction (a provider not among them has none afterwards).
    ///
    /// The cursors land after every snapshot row of the run, so a run killed before leaves the last run's cursors,
    /// from which the next run reads the changes it made again.
    public func markSynced(_ job: String, at time: String, cursors: [String: String]?) throws(CloudSyncError) {
        guard overlay == nil else { return }
        try run { db in
            try db.transaction {
                try db.execute("INSERT OR REPLACE INTO sync_jobs (job, finished_at) VALUES (?, ?)", job, time)
                if let cursors {
                    try db.execute("DELETE FROM sync_cursors WHERE job = ?", job)
                    for (provider, cursor) in cursors {
                        try db.execute(
                            "INSERT INTO sync_cursors (job, provider, cursor) VALUES (?, ?, ?)", job, provider, cursor)
                    }
                }
            }
        }
    }

    /// The change-feed cursor each provider of `job` had when its last clean run began.
    public func syncCursors(of job: String) throws(CloudSyncError) -> [String: String] {
        try run { db in
            Dictionary(
                try db.query("SELECT provider, cursor FROM sync_cursors WHERE job = ?", [job]) {
                    ($0.string(0) ?? "", $0.string(1) ?? "")
                }, uniquingKeysWith: { first, _ in first })
        }
    }

    /// The snapshot rows of `job` for these keys (those it has), in key order.
    public func snapshotRows(of job: String, keys: [String]) throws(CloudSyncError)
        -> [(key: String, fingerprint: SyncFingerprint)]
    {
        try rows(of: job, keys: keys, "SELECT fingerprint FROM snapshots WHERE job = ? AND key = ?") { select in
            select.string(0).map { SyncFingerprint(text: $0) }
        }.map { (key: $0.key, fingerprint: $0.row) }
    }

    /// What `select` (one row by job and key) reads for each of `keys` that has a row, in the order of `keys`, in one
    /// transaction through one prepared statement; `read` makes the row's value (nil: none).
    func rows<Row>(
        of job: String, keys: [String], _ select: String, _ read: @escaping (SQLiteStatement) -> Row?
    ) throws(CloudSyncError) -> [(key: String, row: Row)] {
        guard !keys.isEmpty else { return [] }
        return try run { db in
            try db.transaction {
                let statement = try db.prepare(select)
                var rows: [(key: String, row: Row)] = []
                for key in keys {
                    try statement.bind(job, key)
                    if try statement.step(), let row = read(statement) { rows.append((key, row)) }
                    statement.reset()
                }
                return rows
            }
        }
    }

    /// Up to `limit` snapshot rows of `job` after `key` (bytewise), in key order.
    public func snapshotRows(of job: String, after key: String?, limit: Int) throws(CloudSyncError)
        -> [(key: String, fingerprint: SyncFingerprint)]
    {
        try run { db in
            try db.query(
                "SELECT key, fingerprint FROM snapshots WHERE job = ? AND key > ? ORDER BY key LIMIT ?",
                [job, key ?? "", limit]
            ) { row in (row.string(0) ?? "", SyncFingerprint(text: row.string(1) ?? "")) }
        }
    }

    /// How many keys `job`'s snapshot holds.
    public func snapshotCount(of job: String) throws(CloudSyncError) -> Int {
        try run { db in
            try db.query("SELECT count(*) FROM snapshots WHERE job = ?", [job]) { Int($0.int64(0)) }.first ?? 0
        }
    }

    /// Replaces `job`'s snapshot rows for these keys in one transaction: a nil fingerprint removes the row.
    ///
    /// Each page of a sync lands here after its writes, so a run killed at any point leaves rows that describe
    /// either the state before or after each page — both true baselines for the next run.
    public func updateSnapshot(of job: String, _ rows: [(key: String, fingerprint: SyncFingerprint?)])
        throws(CloudSyncError)
    {
        guard overlay == nil, !rows.isEmpty else { return }
        try run { db in try db.transaction { try Self.writeSnapshotRows(rows, of: job, in: db) } }
    }

    /// Replaces `job`'s snapshot rows for these keys and sets `deletions` aside, in one transaction (one commit, so
    /// one set of fsyncs, for many pages).
    public func recordSyncProgress(
        of job: String, snapshot rows: [(key: String, fingerprint: SyncFingerprint?)], deletions: [String]
    ) throws(CloudSyncError) {
        guard overlay == nil, !rows.isEmpty || !deletions.isEmpty else { return }
        try withRoomForACommit { () throws(CloudSyncError) in
            try run { db in
                try db.transaction {
                    try Self.writeSnapshotRows(rows, of: job, in: db)
                    let insert = try db.prepare("INSERT OR IGNORE INTO sync_deletions (job, key) VALUES (?, ?)")
                    for key in deletions {
                        try insert.bind(job, key).run()
                        insert.reset()
                    }
                }
            }
        }
    }

    /// Sets each row's fingerprint, or removes the row where it has none; the caller holds the transaction.
    private static func writeSnapshotRows(
        _ rows: [(key: String, fingerprint: SyncFingerprint?)], of job: String, in db: SQLiteConnection
    ) throws {
        let upsert = try db.prepare("INSERT OR REPLACE INTO snapshots (job, key, fingerprint) VALUES (?, ?, ?)")
        let delete = try db.prepare("DELETE FROM snapshots WHERE job = ? AND key = ?")
        for (key, fingerprint) in rows {
            if let fingerprint {
                try upsert.bind(job, key, fingerprint.text).run()
                upsert.reset()
            } else {
                try delete.bind(job, key).run()
                delete.reset()
            }
        }
    }

    /// Forgets the deletions an earlier run of `job` set aside.
    public func clearDeletions(of job: String) throws(CloudSyncError) {
        guard overlay == nil else { return }
        try run { db in try db.execute("DELETE FROM sync_deletions WHERE job = ?", job) }
    }

    /// Up to `limit` keys set aside for deletion after `key`, with their snapshot rows, in key order.
    public func deletions(of job: String, after key: String?, limit: Int) throws(CloudSyncError) -> [SyncItem] {
        try run { db in
            try db.query(
                "SELECT d.key, s.fingerprint FROM sync_deletions d JOIN snapshots s ON s.job = d.job AND s.key = d.key "
                    + "WHERE d.job = ? AND d.key > ? ORDER BY d.key LIMIT ?", [job, key ?? "", limit]
            ) { row in SyncItem(key: row.string(0) ?? "", baseline: SyncFingerprint(text: row.string(1) ?? "")) }
        }
    }
}
