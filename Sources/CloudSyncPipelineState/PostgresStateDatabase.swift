import CloudSync
import CloudSyncPipeline
import CloudSyncPostgres
import Foundation

/// A pipeline's state in a PostgreSQL schema (`state: { postgresql: URL, schema: NAME }`): what ``StateDatabase``
/// keeps in `state.db`, plus the run lock and the outbox, shared by every runner that names the same server and
/// schema, on any machine.
///
/// One schema may hold many pipelines: every row carries the pipeline's name. Keys are stored as `bytea`, so they
/// compare by their bytes (as the core's keys do) and may hold any character, NUL included. The schema and its tables
/// are created and upgraded by named migrations (`PostgresStateMigrations`) under a transaction-level advisory
/// lock, so runners starting together migrate once. All calls are synchronous on one connection, which is also the
/// session holding the run lock (`PostgresRunLock`): when the runner dies or loses the connection, the
/// server releases its lock at once.
public final class PostgresStateDatabase: SharedPipelineState, @unchecked Sendable {
    /// The server and schema, for messages: `host:port/database, schema NAME`, never the URL.
    public let location: String
    /// The pipeline whose rows these are.
    public let pipeline: String
    /// The schema the tables are in.
    public let schema: String
    /// Whether the schema holds every table this version uses; false only for a read-only state of a schema no runner
    /// has set up (or an older one did), which reads as empty.
    public let isSetUp: Bool
    let connection: PostgresConnection
    /// Where the state is, so a runner may open a second session there (the outbox drain's).
    let spec: SharedStateSpec
    private let seal: ProviderValueSeal
    /// Rows written to each big table by this session, and how many more it takes to analyze it again.
    private let growth = Protected<[String: (written: Int, next: Int)]>([:])

    /// Connects to `spec`'s server, creates or upgrades its schema (unless `readOnly`), and reads and writes
    /// `pipeline`'s rows there.
    ///
    /// Throws `ERR_OFFLINE` when the server does not answer and `ERR_CONFIG` when it refuses the login, the database
    /// or a privilege, each naming the server and schema and never the URL.
    public init(
        _ spec: SharedStateSpec, pipeline: String, codec: (any ValueCodec)? = nil, readOnly: Bool = false
    ) throws(CloudSyncError) {
        self.pipeline = pipeline
        schema = spec.schema
        self.spec = spec
        seal = ProviderValueSeal(codec: codec, readOnly: readOnly)
        var location = spec.description
        do {
            connection = try PostgresConnection.connectBlocking(spec.url.value)
        } catch {
            throw Self.failure(error, doing: "connect to", location: location)
        }
        location = "PostgreSQL \(connection.server), schema \(spec.schema)"
        self.location = location
        do {
            isSetUp = try connection.blocking { (db) throws(PostgresError) in
                guard readOnly else {
                    try PostgresStateMigrations.migrate(spec.schema, in: db)
                    return true
                }
                return try PostgresStateMigrations.use(spec.schema, in: db)
            }
        } catch {
            connection.closeBlocking()
            throw Self.failure(error, doing: "set up the state in", location: location)
        }
    }

    deinit { connection.closeBlocking() }

    /// Ends the connection, releasing the run lock if this state holds it.
    public func close() { connection.closeBlocking() }

    /// `ERR_OFFLINE` for a server that does not answer or a lost connection, else `ERR_CONFIG`; the message names
    /// the server and what to check.
    static func failure(_ error: PostgresError, doing action: String, location: String) -> CloudSyncError {
        let advice: String
        switch (error.kind, error.sqlState) {
        case (.unreachable, _):
            advice = "check that the server runs and this machine can reach it"
        case (.connection, _):
            advice = "the connection to the server was lost; run again once it answers"
        case (_, "42501"?):
            advice =
                "the role lacks a privilege; grant it CONNECT on the database and USAGE and CREATE on the schema "
                + "(docs/shared-state.md, \"Setting it up\")"
        case (.connect, _):
            advice = "check the role, its password and the database the URL names"
        default:
            advice = "check the server's log for this statement"
        }
        let code: ErrorCode = error.kind == .unreachable || error.kind == .connection ? .offline : .config
        return CloudSyncError(
            code,
            "cannot \(action) the state database \(location): \(error.message)"
                + (error.sqlState.map { " (SQLSTATE \($0))" } ?? "") + "; \(advice)")
    }

    /// Runs `body` on the connection; a failure becomes ``failure(_:doing:location:)``.
    @discardableResult
    func run<T>(_ body: (PostgresSession) throws(PostgresError) -> T) throws(CloudSyncError) -> T {
        do {
            return try connection.blocking(body)
        } catch {
            throw Self.failure(error, doing: "use", location: location)
        }
    }

    var isReadOnly: Bool { seal.overlay != nil }

    /// Counts `rows` written to `table` and refreshes its statistics (`ANALYZE`) after the first thousand and each
    /// time the count doubles: a run fills snapshot tables far faster than autovacuum looks, and without statistics
    /// the planner takes a page's lookup by key for a scan of every row of the job (5 s a page at 50,000 keys,
    /// measured).
    func noteGrowth(of table: String, by rows: Int, in db: PostgresSession) throws(PostgresError) {
        guard rows > 0 else { return }
        let due = growth.withLock { growth -> Bool in
            var entry = growth[table] ?? (0, 1000)
            entry.written += rows
            let due = entry.written >= entry.next
            if due { entry.next = entry.written * 2 }
            growth[table] = entry
            return due
        }
        if due { try db.executeScript("ANALYZE \(table)") }
    }

    // MARK: Runs

    public func record(_ run: RunRecord) throws(CloudSyncError) {
        guard !isReadOnly else { return }
        let jobs = String(decoding: (try? JSONEncoder.sorted.encode(run.jobs)) ?? Data("{}".utf8), as: UTF8.self)
        // Replaced rather than updated, so a run recorded again counts as the newest, as SQLite's REPLACE makes it.
        try self.run { db throws(PostgresError) in
            try db.transaction { () throws(PostgresError) in
                try db.execute("DELETE FROM runs WHERE pipeline = $1 AND id = $2", [.text(pipeline), .text(run.id)])
                try db.execute(
                    "INSERT INTO runs (pipeline, id, started_at, finished_at, status, dry_run, jobs, report) "
                        + "VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                    [
                        .text(pipeline), .text(run.id), .text(run.startedAt), .text(run.finishedAt),
                        .text(run.status.rawValue), .boolean(run.dryRun), .text(jobs),
                        run.report.map(PostgresValue.text) ?? .null,
                    ])
            }
        }
    }

    public func runs(limit: Int) throws(CloudSyncError) -> [RunRecord] {
        try runs(id: nil, limit: limit)
    }

    public func run(id: String) throws(CloudSyncError) -> RunRecord? {
        try runs(id: id, limit: 1).first
    }

    /// Up to `limit` runs (only the one recorded under `id`, when given), newest first.
    private func runs(id: String?, limit: Int) throws(CloudSyncError) -> [RunRecord] {
        let result = try run { db throws(PostgresError) in
            try db.execute(
                "SELECT id, started_at, finished_at, status, dry_run, jobs, report FROM runs WHERE pipeline = $1 "
                    + "AND ($3::text IS NULL OR id = $3) ORDER BY started_at DESC, recorded DESC LIMIT $2",
                [.text(pipeline), .integer(Int64(limit)), id.map(PostgresValue.text) ?? .null])
        }
        return result.rows.map { row in
            RunRecord(
                id: row[0].text ?? "", startedAt: row[1].text ?? "", finishedAt: row[2].text ?? "",
                status: RunStatus(rawValue: row[3].text ?? "") ?? .failed, dryRun: row[4].boolean ?? false,
                jobs: (try? JSONDecoder().decode([String: Int].self, from: Data((row[5].text ?? "{}").utf8))) ?? [:],
                report: row[6].text)
        }
    }

    // MARK: Identities

    public func identity(of provider: String) throws(CloudSyncError) -> String? {
        let result = try run { db throws(PostgresError) in
            try db.execute(
                "SELECT identity FROM identities WHERE pipeline = $1 AND provider = $2",
                [.text(pipeline), .text(provider)]
            )
        }
        return result.rows.first?[0].bytes.map { String(decoding: $0, as: UTF8.self) }
    }

    public func remember(identity: String, of provider: String, at time: String) throws(CloudSyncError) {
        guard !isReadOnly else { return }
        try run { db throws(PostgresError) in
            try db.execute(
                "INSERT INTO identities (pipeline, provider, identity, seen_at) VALUES ($1, $2, $3, $4) "
                    + "ON CONFLICT (pipeline, provider) DO UPDATE SET identity = EXCLUDED.identity, seen_at = EXCLUDED.seen_at",
                [.text(pipeline), .text(provider), .bytes(Array(identity.utf8)), .text(time)])
        }
    }

    // MARK: Provider values

    public func value(provider: String, name: String) throws(CloudSyncError) -> String? {
        try seal.value(provider: provider, name: name) { () throws(CloudSyncError) in
            try run { db throws(PostgresError) in
                try db.execute(
                    "SELECT value FROM provider_values WHERE pipeline = $1 AND provider = $2 AND name = $3",
                    [.text(pipeline), .text(provider), .text(name)])
            }.rows.first?[0].bytes.map { String(decoding: $0, as: UTF8.self) }
        }
    }

    public func setValue(_ value: String?, provider: String, name: String) throws(CloudSyncError) {
        try seal.setValue(value, provider: provider, name: name) { (stored) throws(CloudSyncError) in
            try run { db throws(PostgresError) in
                if let stored {
                    try db.execute(
                        "INSERT INTO provider_values (pipeline, provider, name, value) VALUES ($1, $2, $3, $4) "
                            + "ON CONFLICT (pipeline, provider, name) DO UPDATE SET value = EXCLUDED.value",
                        [.text(pipeline), .text(provider), .text(name), .bytes(Array(stored.utf8))])
                } else {
                    try db.execute(
                        "DELETE FROM provider_values WHERE pipeline = $1 AND provider = $2 AND name = $3",
                        [.text(pipeline), .text(provider), .text(name)])
                }
            }
        }
    }
}

extension PostgresStateDatabase {
    /// Itself: every runner of the pipeline meets in this schema.
    public var shared: (any SharedPipelineState)? { self }

    /// The pipeline's outbox in the `outbox` table, which every runner of the pipeline sees.
    public func outboxStorage() -> any OutboxStorage { PostgresOutboxStorage(state: self) }

    /// The `outbox` table's entries of the pipeline.
    public func outboxEntries() throws -> [OutboxEntry] { try PostgresOutboxStorage(state: self).loadAll() }

    /// A connection of its own for the outbox drain (`PostgresOutboxDrain`).
    public func openOutboxDrain() async throws(CloudSyncError) -> any SharedOutboxDrainSession {
        try await PostgresOutboxDrain.open(self)
    }
}
