import CloudSyncPostgres

/// The PostgreSQL state's schema, built by named migrations applied in order and recorded in `migrations`.
///
/// A migration is never edited once released: a change is a new one at the end. Migrating takes a transaction-level
/// advisory lock named after the schema, so runners starting at once apply each migration once, and the whole of it
/// is one transaction (PostgreSQL's DDL is transactional): a runner killed while migrating leaves the schema as it was.
enum PostgresStateMigrations {
    static let migrations: [(name: String, sql: String)] = [
        (
            "create runs, identities, provider values, sync and mirror snapshots, run locks and the outbox",
            """
            CREATE TABLE runs (
                pipeline text NOT NULL,
                id text NOT NULL,
                started_at text NOT NULL,
                finished_at text NOT NULL,
                status text NOT NULL,
                dry_run boolean NOT NULL,
                jobs text NOT NULL,
                report text,
                recorded bigint GENERATED ALWAYS AS IDENTITY,
                PRIMARY KEY (pipeline, id)
            );
            CREATE INDEX runs_by_start ON runs (pipeline, started_at DESC, recorded DESC);
            CREATE TABLE identities (
                pipeline text NOT NULL,
                provider text NOT NULL,
                identity bytea NOT NULL,
                seen_at text NOT NULL,
                PRIMARY KEY (pipeline, provider)
            );
            CREATE TABLE provider_values (
                pipeline text NOT NULL,
                provider text NOT NULL,
                name text NOT NULL,
                value bytea NOT NULL,
                PRIMARY KEY (pipeline, provider, name)
            );
            CREATE TABLE snapshots (
                pipeline text NOT NULL,
                job text NOT NULL,
                key bytea NOT NULL,
                fingerprint text NOT NULL,
                PRIMARY KEY (pipeline, job, key)
            );
            CREATE TABLE sync_jobs (
                pipeline text NOT NULL,
                job text NOT NULL,
                finished_at text NOT NULL,
                PRIMARY KEY (pipeline, job)
            );
            CREATE TABLE sync_deletions (
                pipeline text NOT NULL,
                job text NOT NULL,
                key bytea NOT NULL,
                PRIMARY KEY (pipeline, job, key)
            );
            CREATE TABLE sync_cursors (
                pipeline text NOT NULL,
                job text NOT NULL,
                provider text NOT NULL,
                cursor text NOT NULL,
                PRIMARY KEY (pipeline, job, provider)
            );
            CREATE TABLE mirror_rows (
                pipeline text NOT NULL,
                job text NOT NULL,
                key bytea NOT NULL,
                digest text NOT NULL,
                source_version text,
                destination_version text,
                PRIMARY KEY (pipeline, job, key)
            );
            CREATE TABLE run_locks (
                pipeline text PRIMARY KEY,
                host text NOT NULL,
                pid integer NOT NULL,
                since text NOT NULL,
                backend integer NOT NULL
            );
            CREATE TABLE outbox (
                pipeline text NOT NULL,
                id bigint NOT NULL,
                key bytea NOT NULL,
                provider text NOT NULL,
                operation text NOT NULL CHECK (operation IN ('set', 'remove')),
                value bytea,
                attempts integer NOT NULL,
                next_attempt_at_ms bigint NOT NULL,
                enqueued_at_ms bigint NOT NULL,
                last_error_code text NOT NULL,
                PRIMARY KEY (pipeline, id),
                UNIQUE (pipeline, key, provider)
            );
            """
        ),
        (
            "sharded jobs: their key ranges, leases, progress, counts by runner and failures",
            """
            CREATE TABLE sharded_jobs (
                pipeline text NOT NULL,
                job text NOT NULL,
                run_id text NOT NULL,
                plan text NOT NULL,
                shards integer NOT NULL,
                started_at text NOT NULL,
                finished boolean NOT NULL DEFAULT false,
                coordinator integer NOT NULL,
                PRIMARY KEY (pipeline, job)
            );
            CREATE TABLE shards (
                pipeline text NOT NULL,
                job text NOT NULL,
                shard integer NOT NULL,
                after_key bytea,
                through_key bytea,
                done_after bytea,
                done boolean NOT NULL DEFAULT false,
                error text,
                runner text,
                backend integer,
                lease_until_ms bigint,
                taken_over integer NOT NULL DEFAULT 0,
                PRIMARY KEY (pipeline, job, shard)
            );
            CREATE TABLE shard_counts (
                pipeline text NOT NULL,
                job text NOT NULL,
                runner text NOT NULL,
                count text NOT NULL,
                value bigint NOT NULL,
                PRIMARY KEY (pipeline, job, runner, count)
            );
            CREATE TABLE shard_failures (
                pipeline text NOT NULL,
                job text NOT NULL,
                shard integer NOT NULL,
                runner text NOT NULL,
                failures text NOT NULL,
                omitted integer NOT NULL,
                PRIMARY KEY (pipeline, job, shard, runner)
            );
            """
        ),
        (
            "the outbox drain every runner of a run shares, what each runner drained, ranges' key lists, and keys ranges set aside",
            """
            CREATE TABLE outbox_drains (
                pipeline text PRIMARY KEY,
                run_id text NOT NULL,
                open boolean NOT NULL,
                held text[] NOT NULL,
                opened_at text NOT NULL,
                due_by bigint NOT NULL,
                backend integer
            );
            CREATE TABLE outbox_drain_counts (
                pipeline text NOT NULL,
                runner text NOT NULL,
                count text NOT NULL,
                value bigint NOT NULL,
                PRIMARY KEY (pipeline, runner, count)
            );
            ALTER TABLE shard_failures ADD COLUMN key_lists text;
            CREATE TABLE shard_keys (
                pipeline text NOT NULL,
                job text NOT NULL,
                list text NOT NULL,
                key bytea NOT NULL,
                PRIMARY KEY (pipeline, job, list, key)
            );
            """
        ),
        (
            "slots the serve processes of several hosts claim, and each run's report kept with its history",
            """
            CREATE TABLE serve_slots (
                pipeline text NOT NULL,
                slot_ms bigint NOT NULL,
                host text NOT NULL,
                claimed_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (pipeline, slot_ms)
            );
            ALTER TABLE runs ADD COLUMN report_json text;
            """
        ),
        (
            "the id of the run a run lock's holder runs, so runners join a run by name",
            "ALTER TABLE run_locks ADD COLUMN run_id text;"
        ),
    ]

    /// Creates `schema` when missing, applies the migrations it lacks, and leaves the session's `search_path` on it.
    static func migrate(_ schema: String, in db: PostgresSession) throws(PostgresError) {
        try db.executeScript("SET search_path TO \"\(schema)\"")
        try db.transaction { () throws(PostgresError) in
            try db.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [.text("cloudsync.migrate/" + schema)])
            // Looked up first, so a role given only its schema (no CREATE on the database) never asks to create one.
            let exists = try db.execute("SELECT 1 FROM pg_namespace WHERE nspname = $1", [.text(schema)])
            if exists.rows.isEmpty { try db.executeScript("CREATE SCHEMA \"\(schema)\"") }
            try db.executeScript(
                "CREATE TABLE IF NOT EXISTS migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            let applied = Set(try db.execute("SELECT name FROM migrations").rows.compactMap { $0[0].text })
            for migration in migrations where !applied.contains(migration.name) {
                try db.executeScript(migration.sql)
                try db.execute("INSERT INTO migrations (name) VALUES ($1)", [.text(migration.name)])
            }
        }
    }

    /// Points the session at `schema` without changing anything; false when the schema lacks a migration (no
    /// runner has set it up, or an older one did), so a reader takes the state as empty.
    static func use(_ schema: String, in db: PostgresSession) throws(PostgresError) -> Bool {
        try db.executeScript("SET search_path TO \"\(schema)\"")
        let table = try db.execute("SELECT to_regclass($1) IS NOT NULL", [.text("\"\(schema)\".migrations")])
        guard table.rows.first?[0].boolean == true else { return false }
        let applied = Set(try db.execute("SELECT name FROM migrations").rows.compactMap { $0[0].text })
        return migrations.allSatisfy { applied.contains($0.name) }
    }
}
