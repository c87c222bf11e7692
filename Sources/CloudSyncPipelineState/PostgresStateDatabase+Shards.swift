import CloudSync
import CloudSyncPipeline
import CloudSyncPostgres
import Foundation

/// Sharded jobs in PostgreSQL: ranges as rows, leased with `FOR UPDATE SKIP LOCKED`, each lease timed by the
/// server's clock (so machines' clocks need not agree) and tied to the leasing session (a runner that dies frees its
/// range at once, one that hangs when its lease runs out).
extension PostgresStateDatabase {
    /// The server's time in milliseconds, as every lease is measured.
    private static let now = "(extract(epoch from clock_timestamp()) * 1000)::bigint"

    /// The unfinished sharded job `job`: its run id and plan, if one is under way or was left by a run that stopped.
    public func unfinishedShardedJob(_ job: String) throws(CloudSyncError) -> (runID: String, plan: String)? {
        let row = try run { db throws(PostgresError) in
            try db.execute(
                "SELECT run_id, plan FROM sharded_jobs WHERE pipeline = $1 AND job = $2 AND NOT finished",
                [.text(pipeline), .text(job)])
        }.rows.first
        return row.map { ($0[0].text ?? "", $0[1].text ?? "") }
    }

    /// The sharded jobs the runner holding the run lock coordinates now, oldest first: what a runner that joins works
    /// on (never what a stopped run left, which only its next run may take up, if its plan is the same).
    public func shardedJobsUnderWay() throws(CloudSyncError) -> [String] {
        try run { db throws(PostgresError) in
            try db.execute(
                "SELECT job FROM sharded_jobs j WHERE pipeline = $1 AND NOT finished AND EXISTS (SELECT 1 FROM "
                    + "pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.pid = j.coordinator) AND "
                    + "coordinator = (SELECT backend FROM run_locks r WHERE r.pipeline = $1) ORDER BY started_at, job",
                [.text(pipeline)])
        }.rows.compactMap { $0[0].text }
    }

    /// Makes this session the coordinator of the unfinished sharded job `job` an earlier run left.
    public func adoptShardedJob(_ job: String) throws(CloudSyncError) {
        try run { db throws(PostgresError) in
            try db.execute(
                "UPDATE sharded_jobs SET coordinator = pg_backend_pid() WHERE pipeline = $1 AND job = $2",
                [.text(pipeline), .text(job)])
        }
    }

    /// Records `job` as sharded into `ranges` for run `runID`, replacing whatever an earlier run left of it.
    public func startShardedJob(_ job: String, runID: String, plan: String, ranges: [KeyRange], at time: String)
        throws(CloudSyncError)
    {
        let p = PostgresValue.text(pipeline)
        let j = PostgresValue.text(job)
        try run { db throws(PostgresError) in
            try db.transaction { () throws(PostgresError) in
                for table in ["sharded_jobs", "shards", "shard_counts", "shard_failures", "shard_keys"] {
                    try db.execute("DELETE FROM \(table) WHERE pipeline = $1 AND job = $2", [p, j])
                }
                try db.execute(
                    "INSERT INTO sharded_jobs (pipeline, job, run_id, plan, shards, started_at, coordinator) "
                        + "VALUES ($1, $2, $3, $4, $5, $6, pg_backend_pid())",
                    [p, j, .text(runID), .text(plan), .integer(Int64(ranges.count)), .text(time)])
                // Hexadecimal keys with NULL for an open end, decoded by the server.
                try db.execute(
                    "INSERT INTO shards (pipeline, job, shard, after_key, through_key) "
                        + "SELECT $1, $2, n - 1, decode(a, 'hex'), decode(t, 'hex') "
                        + "FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS r(a, t, n)",
                    [p, j, hexArray(ranges.map(\.after)), hexArray(ranges.map(\.through))])
            }
        }
    }

    /// Leases the lowest range of `job` that is not done and that no live runner holds, for `leaseMs`; nil when
    /// there is none now.
    public func leaseShard(_ job: String, runner: String, leaseMs: Int64) throws(CloudSyncError) -> LeasedShard? {
        let row = try run { db throws(PostgresError) in
            try db.execute(
                """
                WITH picked AS (
                    SELECT shard, runner AS previous FROM shards s
                    WHERE pipeline = $1 AND job = $2 AND NOT done AND (
                        runner IS NULL OR lease_until_ms < \(Self.now)
                        OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = s.backend))
                    ORDER BY shard LIMIT 1 FOR UPDATE SKIP LOCKED
                )
                UPDATE shards s SET runner = $3, backend = pg_backend_pid(),
                    lease_until_ms = \(Self.now) + $4,
                    taken_over = s.taken_over + CASE WHEN picked.previous IS NULL THEN 0 ELSE 1 END
                FROM picked WHERE s.pipeline = $1 AND s.job = $2 AND s.shard = picked.shard
                RETURNING s.shard, s.after_key, s.through_key, s.done_after, picked.previous
                """, [.text(pipeline), .text(job), .text(runner), .integer(leaseMs)])
        }.rows.first
        guard let row else { return nil }
        let after = (row[3].bytes ?? row[1].bytes).map { String(decoding: $0, as: UTF8.self) }
        let through = row[2].bytes.map { String(decoding: $0, as: UTF8.self) }
        return LeasedShard(
            shard: Int(row[0].integer ?? 0), range: KeyRange(after: after, through: through),
            takenOverFrom: row[4].text)
    }

    /// Records a finished batch of range `shard`: `lastKey` done, `counts` added to `runner`'s, the lease renewed,
    /// all at once; false (and nothing recorded) when `runner` no longer holds the range.
    public func recordShardBatch(
        _ job: String, shard: Int, runner: String, counts: [String: Int], lastKey: String?,
        failures: [RunReport.Failure], leaseMs: Int64
    ) throws(CloudSyncError) -> Bool {
        let ordered = counts.sorted { $0.key < $1.key }
        let listed = Self.json(failures)
        return try run { db throws(PostgresError) in
            try db.transaction { () throws(PostgresError) in
                let held = try db.execute(
                    "UPDATE shards SET lease_until_ms = \(Self.now) + $5, "
                        + "done_after = CASE WHEN $6::text IS NULL THEN done_after ELSE decode($6, 'hex') END "
                        + "WHERE pipeline = $1 AND job = $2 AND shard = $3 AND runner = $4 AND NOT done",
                    [
                        .text(pipeline), .text(job), .integer(Int64(shard)), .text(runner), .integer(leaseMs),
                        lastKey.map { .text(hex($0)) } ?? .null,
                    ])
                guard held.affectedRows == 1 else { return false }
                // Kept with the batch, so a runner that dies later leaves them named; the range's end replaces them
                // with its runner's whole list.
                if !failures.isEmpty {
                    try db.execute(
                        "INSERT INTO shard_failures (pipeline, job, shard, runner, failures, omitted) "
                            + "VALUES ($1, $2, $3, $4, $5, 0) ON CONFLICT (pipeline, job, shard, runner) DO UPDATE "
                            + "SET failures = (shard_failures.failures::jsonb || EXCLUDED.failures::jsonb)::text",
                        [.text(pipeline), .text(job), .integer(Int64(shard)), .text(runner), .text(listed)])
                }
                guard !ordered.isEmpty else { return true }
                try db.execute(
                    "INSERT INTO shard_counts (pipeline, job, runner, count, value) "
                        + "SELECT $1, $2, $3, c, v FROM unnest($4::text[], $5::bigint[]) AS r(c, v) "
                        + "ON CONFLICT (pipeline, job, runner, count) DO UPDATE SET value = shard_counts.value + EXCLUDED.value",
                    [
                        .text(pipeline), .text(job), .text(runner), .array(ordered.map(\.key)),
                        .array(ordered.map { String($0.value) }),
                    ])
                return true
            }
        }
    }

    /// Marks range `shard` done by `runner` with the failures its run named (and, for a range that could not run,
    /// why); false when `runner` no longer held it.
    public func finishShard(
        _ job: String, shard: Int, runner: String, failures: [RunReport.Failure], omitted: Int,
        keyLists: [String: [String]]?, error: String?  // lists by count name, not store keys
    ) throws(CloudSyncError) -> Bool {
        let listed = Self.json(failures)
        let lists = keyLists.map {
            String(decoding: (try? JSONEncoder.sorted.encode($0)) ?? Data("{}".utf8), as: UTF8.self)
        }
        return try run { db throws(PostgresError) in
            try db.transaction { () throws(PostgresError) in
                let held = try db.execute(
                    "UPDATE shards SET done = true, error = $5, lease_until_ms = NULL "
                        + "WHERE pipeline = $1 AND job = $2 AND shard = $3 AND runner = $4 AND NOT done",
                    [
                        .text(pipeline), .text(job), .integer(Int64(shard)), .text(runner),
                        error.map { .text($0) } ?? .null,
                    ])
                guard held.affectedRows == 1 else { return false }
                if !failures.isEmpty || omitted > 0 || keyLists != nil {
                    try db.execute(
                        "INSERT INTO shard_failures (pipeline, job, shard, runner, failures, omitted, key_lists) "
                            + "VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (pipeline, job, shard, runner) "
                            + "DO UPDATE SET failures = EXCLUDED.failures, omitted = EXCLUDED.omitted, "
                            + "key_lists = EXCLUDED.key_lists",
                        [
                            .text(pipeline), .text(job), .integer(Int64(shard)), .text(runner), .text(listed),
                            .integer(Int64(omitted)), lists.map(PostgresValue.text) ?? .null,
                        ])
                }
                return true
            }
        }
    }

    /// Renews `runner`'s lease of range `shard`; false when it no longer holds it.
    public func renewShardLease(_ job: String, shard: Int, runner: String, leaseMs: Int64) throws(CloudSyncError)
        -> Bool
    {
        try recordShardBatch(
            job, shard: shard, runner: runner, counts: [:], lastKey: nil, failures: [], leaseMs: leaseMs)
    }

    /// How many of `job`'s ranges there are, how many are done, and how many a runner could lease now.
    public func shardStanding(_ job: String) throws(CloudSyncError) -> ShardStanding {
        let row = try run { db throws(PostgresError) in
            try db.execute(
                """
                SELECT count(*), count(*) FILTER (WHERE done), count(*) FILTER (WHERE NOT done AND (
                    runner IS NULL OR lease_until_ms < \(Self.now)
                    OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = s.backend)))
                FROM shards s WHERE pipeline = $1 AND job = $2
                """, [.text(pipeline), .text(job)])
        }.rows.first
        return ShardStanding(
            shards: Int(row?[0].integer ?? 0), done: Int(row?[1].integer ?? 0), leasable: Int(row?[2].integer ?? 0))
    }

    /// What every runner of `job` did, once its ranges are done; marks the job finished.
    public func finishShardedJob(_ job: String) throws(CloudSyncError) -> ShardOutcome {
        let p = PostgresValue.text(pipeline)
        let j = PostgresValue.text(job)
        let (counts, shards, failures) = try run { db throws(PostgresError) in
            try db.transaction { () throws(PostgresError) in
                try db.execute("UPDATE sharded_jobs SET finished = true WHERE pipeline = $1 AND job = $2", [p, j])
                return (
                    try db.execute(
                        "SELECT runner, count, value FROM shard_counts WHERE pipeline = $1 AND job = $2", [p, j]),
                    try db.execute(
                        "SELECT shard, runner, taken_over, error FROM shards WHERE pipeline = $1 AND job = $2 "
                            + "ORDER BY shard", [p, j]),
                    try db.execute(
                        "SELECT failures, omitted, key_lists FROM shard_failures WHERE pipeline = $1 AND job = $2 "
                            + "ORDER BY shard, runner", [p, j])
                )
            }
        }
        var outcome = ShardOutcome(
            counts: [:], finished: [:], takenOver: 0, failures: [], failuresOmitted: 0, errors: [:])
        for row in counts.rows {
            outcome.counts[row[0].text ?? "?", default: [:]][row[1].text ?? "?"] = Int(row[2].integer ?? 0)
        }
        for row in shards.rows {
            outcome.finished[row[1].text ?? "?", default: 0] += 1
            outcome.takenOver += Int(row[2].integer ?? 0)
            if let error = row[3].text { outcome.errors[Int(row[0].integer ?? 0)] = error }
        }
        for row in failures.rows {
            let listed =
                (try? JSONDecoder().decode([RunReport.Failure].self, from: Data((row[0].text ?? "[]").utf8)))
                ?? []
            for failure in listed {
                if outcome.failures.count < JobReport.failureListLimit {
                    outcome.failures.append(failure)
                } else {
                    outcome.failuresOmitted += 1
                }
            }
            outcome.failuresOmitted += Int(row[1].integer ?? 0)
            guard let text = row[2].text else { continue }
            var joined = outcome.keyLists ?? [:]
            for (name, keys) in (try? JSONDecoder().decode([String: [String]].self, from: Data(text.utf8))) ?? [:] {
                let room = KeyLists.limit - joined[name, default: []].count
                if room > 0 { joined[name, default: []] += keys.prefix(room) }
            }
            outcome.keyLists = joined
        }
        return outcome
    }

    /// The id of the run whose runner holds this pipeline's run lock now (a run a joining runner may help): nil when
    /// none does, empty when its runner did not name it.
    public func runUnderWay() throws(CloudSyncError) -> String? {
        try run { db throws(PostgresError) in
            try db.execute(
                "SELECT coalesce(run_id, '') FROM run_locks r WHERE pipeline = $1 AND EXISTS (SELECT 1 FROM pg_locks l "
                    + "WHERE l.locktype = 'advisory' AND l.granted AND l.pid = r.backend)", [.text(pipeline)])
        }.rows.first?[0].text
    }
}

/// `key`'s bytes in hexadecimal, as the server's `decode(…, 'hex')` reads them.
func hex(_ key: String) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var text: [UInt8] = []
    text.reserveCapacity(key.utf8.count * 2)
    for byte in key.utf8 {
        text.append(digits[Int(byte >> 4)])
        text.append(digits[Int(byte & 0x0F)])
    }
    return String(decoding: text, as: UTF8.self)
}

extension PostgresStateDatabase {
    /// The failures a range's runner named, as the JSON array the shards table keeps.
    fileprivate static func json(_ failures: [RunReport.Failure]) -> String {
        String(decoding: (try? JSONEncoder().encode(failures)) ?? Data("[]".utf8), as: UTF8.self)
    }
}
