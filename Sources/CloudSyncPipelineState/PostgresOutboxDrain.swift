import CloudSync
import CloudSyncPipeline
import CloudSyncPostgres

/// One runner's own session on the PostgreSQL state for the outbox drain that every runner of a run shares.
///
/// The drain is a row per pipeline (`outbox_drains`): the runner that starts the run opens it, naming the providers
/// whose entries must wait (their account could not be checked), and closes it once its own share is done. While it
/// is open, each runner claims due entries with `FOR UPDATE SKIP LOCKED` and keeps them locked, in one transaction,
/// until it has delivered them and stored the outcome: two runners never hold one entry, and a runner that dies frees
/// its claim at once (its transaction rolls back, the entries are due again). Claims hold a shared advisory lock
/// named after the pipeline, and closing takes it exclusively, so when ``finish()`` returns no claim is in flight and
/// none can start: the starter may then reload its outbox and run jobs that write the same keys.
///
/// A session of its own, not the state's: a claim's transaction stays open while its entries are delivered, and the
/// state's session serves everything else meanwhile (the run lock, leases).
final class PostgresOutboxDrain: SharedOutboxDrainSession {
    let pipeline: String
    private let location: String
    private let connection: PostgresConnection
    /// The advisory lock claims share and closing takes alone: the schema and the pipeline.
    private let lockName: PostgresValue

    private init(pipeline: String, schema: String, location: String, connection: PostgresConnection) {
        self.pipeline = pipeline
        self.location = location
        self.connection = connection
        lockName = .text("cloudsync.outbox-drain/\(schema)/\(pipeline)")
    }

    /// Opens a session on `state`'s server and schema.
    static func open(_ state: PostgresStateDatabase) async throws(CloudSyncError) -> PostgresOutboxDrain {
        do {
            let connection = try await PostgresConnection.connect(state.spec.url.value)
            _ = try await connection.execute("SET search_path TO \"\(state.schema)\"")
            return PostgresOutboxDrain(
                pipeline: state.pipeline, schema: state.schema, location: state.location, connection: connection)
        } catch {
            throw PostgresStateDatabase.failure(error, doing: "open the outbox drain in", location: state.location)
        }
    }

    /// Ends the session; an open claim is rolled back.
    public func close() async { await connection.close() }

    /// Opens the drain for run `runID`, forgetting an earlier run's counts: it hands out entries due by `dueBy` (on
    /// the starter's clock, for every runner), none for `held` providers.
    public func start(runID: String, held: [String], dueBy: Int64, at time: String) async throws(CloudSyncError) {
        try await use("open the outbox drain in") { () async throws(PostgresError) in
            _ = try await connection.transaction { () async throws(PostgresError) in
                _ = try await connection.execute(
                    "DELETE FROM outbox_drain_counts WHERE pipeline = $1", [.text(pipeline)])
                _ = try await connection.execute(
                    "INSERT INTO outbox_drains (pipeline, run_id, open, held, opened_at, due_by, backend) "
                        + "VALUES ($1, $2, true, $3::text[], $4, $5, (SELECT backend FROM run_locks WHERE pipeline = $1)) "
                        + "ON CONFLICT (pipeline) DO UPDATE SET run_id = EXCLUDED.run_id, open = true, "
                        + "held = EXCLUDED.held, opened_at = EXCLUDED.opened_at, due_by = EXCLUDED.due_by, "
                        + "backend = EXCLUDED.backend",
                    [.text(pipeline), .text(runID), .array(held), .text(time), .integer(dueBy)])
            }
        }
    }

    /// Whether a run's drain is open now, so a runner that joins helps with it.
    public func isOpen() async throws(CloudSyncError) -> Bool {
        try await use("read the outbox drain in") { () async throws(PostgresError) in try await isOpen(connection) }
    }

    /// Open, and opened by the runner that holds the run lock now: a drain left open by a runner that died is not
    /// worked on while a later run's jobs write.
    private func isOpen(_ connection: PostgresConnection) async throws(PostgresError) -> Bool {
        try await connection.execute(
            "SELECT EXISTS (SELECT 1 FROM outbox_drains d WHERE pipeline = $1 AND open AND EXISTS (SELECT 1 "
                + "FROM run_locks r WHERE r.pipeline = d.pipeline AND r.backend = d.backend AND EXISTS (SELECT 1 "
                + "FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.pid = r.backend)))",
            [.text(pipeline)]
        ).rows.first?[0].boolean ?? false
    }

    /// Claims up to `limit` entries due when the drain opened (oldest first, none of `excluding`'s providers, none
    /// another runner holds), hands them to `settle` while they stay locked, and stores what it decided with `runner`'s counts, all in
    /// one transaction; returns how many it claimed, 0 when none was left, nil when the drain is closed.
    public func claim(
        limit: Int, excluding: [String], runner: String,
        settle: ([OutboxEntry]) async -> DrainSettlement
    ) async throws(CloudSyncError) -> Int? {
        try await use("drain the outbox in") { () async throws(PostgresError) -> Int? in
            try await connection.transaction { () async throws(PostgresError) -> Int? in
                _ = try await connection.execute(
                    "SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))", [lockName])
                guard try await isOpen(connection) else { return nil }
                // Neither the providers the starter holds back nor the ones this runner cannot reach.
                let claimed = try await connection.execute(
                    "SELECT \(PostgresOutboxStorage.columns) FROM outbox WHERE pipeline = $1 "
                        + "AND NOT (provider = ANY($2::text[])) AND NOT EXISTS (SELECT 1 FROM outbox_drains d "
                        + "WHERE d.pipeline = $1 AND (outbox.provider = ANY(d.held) OR next_attempt_at_ms > d.due_by)) "
                        + "ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED",
                    [.text(pipeline), .array(excluding), .integer(Int64(limit))]
                ).rows.map(PostgresOutboxStorage.entry)
                guard !claimed.isEmpty else { return 0 }
                // A row another runner rescheduled while this query waited comes back as it is now (PostgreSQL
                // re-reads a row it locks after it changed), and is no longer due: it stays for the next run.
                let dueBy =
                    try await connection.execute(
                        "SELECT due_by FROM outbox_drains WHERE pipeline = $1", [.text(pipeline)]
                    ).rows.first?[0].integer ?? 0
                let due = claimed.filter { $0.nextAttemptAtMs <= dueBy }
                if !due.isEmpty { try await store(await settle(due), runner: runner) }
                return claimed.count
            }
        }
    }

    /// Closes the drain once every claim in flight has ended, so none starts after; returns what each runner counted.
    public func finish() async throws(CloudSyncError) -> [String: [String: Int]] {
        try await use("close the outbox drain in") { () async throws(PostgresError) in
            _ = try await connection.transaction { () async throws(PostgresError) in
                _ = try await connection.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [lockName])
                _ = try await connection.execute(
                    "UPDATE outbox_drains SET open = false WHERE pipeline = $1", [.text(pipeline)])
            }
            var counts: [String: [String: Int]] = [:]
            for row in try await connection.execute(
                "SELECT runner, count, value FROM outbox_drain_counts WHERE pipeline = $1", [.text(pipeline)]
            ).rows {
                counts[row[0].text ?? "", default: [:]][row[1].text ?? ""] = Int(row[2].integer ?? 0)
            }
            return counts
        }
    }

    private func store(_ settlement: DrainSettlement, runner: String) async throws(PostgresError) {
        if !settlement.removed.isEmpty {
            _ = try await connection.execute(
                "DELETE FROM outbox WHERE pipeline = $1 AND id = ANY($2::bigint[])",
                [.text(pipeline), .array(settlement.removed.map { String($0) })])
        }
        if !settlement.rescheduled.isEmpty {
            let (sql, values) = PostgresOutboxStorage.reschedule(settlement.rescheduled, of: pipeline)
            _ = try await connection.execute(sql, values)
        }
        let counts = settlement.counts.filter { $0.value > 0 }.sorted { $0.key < $1.key }
        guard !counts.isEmpty else { return }
        _ = try await connection.execute(
            "INSERT INTO outbox_drain_counts (pipeline, runner, count, value) "
                + "SELECT $1, $2, c, v FROM unnest($3::text[], $4::bigint[]) AS r(c, v) "
                + "ON CONFLICT (pipeline, runner, count) DO UPDATE SET value = outbox_drain_counts.value + EXCLUDED.value",
            [
                .text(pipeline), .text(runner), .array(counts.map(\.key)), .array(counts.map { String($0.value) }),
            ])
    }

    private func use<T: Sendable>(_ action: String, _ body: () async throws(PostgresError) -> T)
        async throws(CloudSyncError) -> T
    {
        do {
            return try await body()
        } catch {
            throw PostgresStateDatabase.failure(error, doing: action, location: location)
        }
    }
}
