import CloudSync
import CloudSyncPipeline
import CloudSyncPostgres

/// A pipeline's outbox in its PostgreSQL state: one row per entry in the `outbox` table, the pipeline's name on each.
///
/// Every call is one transaction: when it returns, the server has committed it (durable as the server's own
/// `synchronous_commit` makes it), and a call cut short leaves nothing. A batch of the outbox's changes is a handful of
/// statements over arrays, whatever its size. The run lock keeps one runner at a time on a pipeline's outbox; the
/// drain before a run's first job is the exception, shared by every runner that joins (``SharedOutboxDrain``).
final class PostgresOutboxStorage: OutboxStorage {
    private let state: PostgresStateDatabase

    init(state: PostgresStateDatabase) { self.state = state }

    /// The columns ``entry(_:)`` reads, in its order.
    static let columns =
        "id, key, provider, operation, value, attempts, next_attempt_at_ms, enqueued_at_ms, last_error_code"

    /// An entry from a row of ``columns``.
    static func entry(_ row: [PostgresValue]) -> OutboxEntry {
        OutboxEntry(
            id: row[0].integer ?? 0, key: keyText(row[1]),
            operation: FailedWrite.Operation(rawValue: row[3].text ?? "") ?? .set,
            encodedValue: row[4].bytes.map { String(decoding: $0, as: UTF8.self) }, provider: row[2].text ?? "",
            attempts: Int(row[5].integer ?? 0), nextAttemptAtMs: row[6].integer ?? 0,
            enqueuedAtMs: row[7].integer ?? 0, lastErrorCode: row[8].text ?? "")
    }

    func loadAll() throws -> [OutboxEntry] {
        try state.run { db throws(PostgresError) in
            try db.execute(
                "SELECT \(Self.columns) FROM outbox WHERE pipeline = $1 ORDER BY id", [.text(state.pipeline)])
        }.rows.map(Self.entry)
    }

    func replace(_ entry: OutboxEntry) throws {
        try commit(storing: [entry], deleting: [])
    }

    func delete(ids: [Int64]) throws {
        try commit(storing: [], deleting: ids)
    }

    /// Removes `ids`, then stores `entries`, each taking the place of the row its key and provider had, in one
    /// transaction.
    func commit(storing entries: [OutboxEntry], deleting ids: [Int64]) throws {
        guard !entries.isEmpty || !ids.isEmpty else { return }
        // One statement may not touch a row twice: of two entries for one key and provider, the later one stands.
        var last: [OutboxPairKey: Int] = [:]
        for (index, entry) in entries.enumerated() { last[OutboxPairKey(entry)] = index }
        let stored = entries.enumerated().filter { last[OutboxPairKey($0.element)] == $0.offset }.map(\.element)
        let pipeline = PostgresValue.text(state.pipeline)
        try state.run { db throws(PostgresError) in
            try db.transaction { () throws(PostgresError) in
                if !ids.isEmpty {
                    try db.execute(
                        "DELETE FROM outbox WHERE pipeline = $1 AND id = ANY($2::bigint[])",
                        [pipeline, .array(ids.map { String($0) })])
                }
                guard !stored.isEmpty else { return }
                // An entry's id may be one another row of this pipeline still holds (never in the outbox's own use,
                // whose ids only grow); that row goes first, as the SQLite storage's upsert replaces it.
                try db.execute(
                    "DELETE FROM outbox WHERE pipeline = $1 AND id = ANY($2::bigint[])",
                    [pipeline, .array(stored.map { String($0.id) })])
                try db.execute(
                    "INSERT INTO outbox (pipeline, id, key, provider, operation, value, attempts, next_attempt_at_ms, "
                        + "enqueued_at_ms, last_error_code) "
                        + "SELECT $1, i, decode(k, 'hex'), p, o, decode(v, 'hex'), a, n, e, c FROM unnest($2::bigint[], "
                        + "$3::text[], $4::text[], $5::text[], $6::text[], $7::integer[], $8::bigint[], $9::bigint[], "
                        + "$10::text[]) AS r(i, k, p, o, v, a, n, e, c) "
                        + "ON CONFLICT (pipeline, key, provider) DO UPDATE SET id = EXCLUDED.id, "
                        + "operation = EXCLUDED.operation, value = EXCLUDED.value, attempts = EXCLUDED.attempts, "
                        + "next_attempt_at_ms = EXCLUDED.next_attempt_at_ms, enqueued_at_ms = EXCLUDED.enqueued_at_ms, "
                        + "last_error_code = EXCLUDED.last_error_code",
                    [
                        pipeline, .array(stored.map { String($0.id) }), hexKeys(stored.map(\.key)),
                        .array(stored.map(\.provider)), .array(stored.map(\.operation.rawValue)),
                        hexArray(stored.map(\.encodedValue)), .array(stored.map { String($0.attempts) }),
                        .array(stored.map { String($0.nextAttemptAtMs) }),
                        .array(stored.map { String($0.enqueuedAtMs) }),
                        .array(stored.map(\.lastErrorCode)),
                    ])
            }
        }
    }

    /// Stores new attempt counts, next times and last error codes of entries still stored, matched by id.
    func update(_ entries: [OutboxEntry]) throws {
        guard !entries.isEmpty else { return }
        let (sql, values) = Self.reschedule(entries, of: state.pipeline)
        try state.run { db throws(PostgresError) in try db.execute(sql, values) }
    }

    /// The statement that stores `entries`' new attempt counts, next times and last error codes, matched by id, and
    /// its values: one statement over arrays, whatever the count.
    static func reschedule(_ entries: [OutboxEntry], of pipeline: String) -> (String, [PostgresValue]) {
        (
            "UPDATE outbox o SET attempts = r.a, next_attempt_at_ms = r.n, last_error_code = r.c "
                + "FROM unnest($2::bigint[], $3::integer[], $4::bigint[], $5::text[]) AS r(i, a, n, c) "
                + "WHERE o.pipeline = $1 AND o.id = r.i",
            [
                .text(pipeline), .array(entries.map { String($0.id) }), .array(entries.map { String($0.attempts) }),
                .array(entries.map { String($0.nextAttemptAtMs) }), .array(entries.map(\.lastErrorCode)),
            ]
        )
    }
}

/// An entry's key (by its bytes) and provider: the outbox keeps one entry per pair.
private struct OutboxPairKey: Hashable {
    let key: StoreKey
    let provider: String

    init(_ entry: OutboxEntry) {
        key = StoreKey(entry.key)
        provider = entry.provider
    }
}
