import CloudSync
import CloudSyncPipeline
import CloudSyncPostgres

/// Sync and mirror snapshots in PostgreSQL: each page of rows is one statement over arrays (`unnest`), never a round
/// trip per key, and keys travel as hexadecimal text decoded to `bytea` by the server.
extension PostgresStateDatabase {
    /// `$3`'s hexadecimal keys as a `bytea[]` a primary-key lookup takes (`key = ANY (…)`): an index scan whatever
    /// the tables' statistics, where `key IN (SELECT …)` may be planned as a scan of every row.
    static let hexKeyArray = "ARRAY(SELECT decode(k, 'hex') FROM unnest($3::text[]) AS k)"

    public func hasSynced(_ job: String) throws(CloudSyncError) -> Bool {
        try run { db throws(PostgresError) in
            try db.execute("SELECT 1 FROM sync_jobs WHERE pipeline = $1 AND job = $2", [.text(pipeline), .text(job)])
        }.rows.isEmpty == false
    }

    public func markSynced(_ job: String, at time: String, cursors: [String: String]?) throws(CloudSyncError) {
        guard !isReadOnly else { return }
        try run { db throws(PostgresError) in
            try db.transaction { () throws(PostgresError) in
                try db.execute(
                    "INSERT INTO sync_jobs (pipeline, job, finished_at) VALUES ($1, $2, $3) "
                        + "ON CONFLICT (pipeline, job) DO UPDATE SET finished_at = EXCLUDED.finished_at",
                    [.text(pipeline), .text(job), .text(time)])
                guard let cursors else { return }
                let ordered = cursors.sorted { $0.key < $1.key }
                try db.execute(
                    "DELETE FROM sync_cursors WHERE pipeline = $1 AND job = $2", [.text(pipeline), .text(job)])
                try db.execute(
                    "INSERT INTO sync_cursors (pipeline, job, provider, cursor) "
                        + "SELECT $1, $2, p, c FROM unnest($3::text[], $4::text[]) AS r(p, c)",
                    [.text(pipeline), .text(job), .array(ordered.map(\.key)), .array(ordered.map(\.value))])
            }
        }
    }

    public func syncCursors(of job: String) throws(CloudSyncError) -> [String: String] {
        let result = try run { db throws(PostgresError) in
            try db.execute(
                "SELECT provider, cursor FROM sync_cursors WHERE pipeline = $1 AND job = $2",
                [.text(pipeline), .text(job)])
        }
        return Dictionary(
            result.rows.map { ($0[0].text ?? "", $0[1].text ?? "") }, uniquingKeysWith: { first, _ in first })
    }

    public func snapshotRows(of job: String, keys: [String]) throws(CloudSyncError)
        -> [(key: String, fingerprint: SyncFingerprint)]
    {
        guard !keys.isEmpty else { return [] }
        let result = try run { db throws(PostgresError) in
            try db.execute(
                "SELECT key, fingerprint FROM snapshots WHERE pipeline = $1 AND job = $2 "
                    + "AND key = ANY (\(Self.hexKeyArray))",
                [.text(pipeline), .text(job), hexKeys(keys)])
        }
        var found: [StoreKey: SyncFingerprint] = [:]
        found.reserveCapacity(result.rows.count)
        for row in result.rows { found[StoreKey(keyText(row[0]))] = SyncFingerprint(text: row[1].text ?? "") }
        return keys.compactMap { key in found[StoreKey(key)].map { (key, $0) } }
    }

    public func snapshotRows(of job: String, after key: String?, limit: Int) throws(CloudSyncError)
        -> [(key: String, fingerprint: SyncFingerprint)]
    {
        try run { db throws(PostgresError) in
            try db.execute(
                "SELECT key, fingerprint FROM snapshots WHERE pipeline = $1 AND job = $2 AND key > $3 "
                    + "ORDER BY key LIMIT $4",
                [.text(pipeline), .text(job), .bytes(Array((key ?? "").utf8)), .integer(Int64(limit))])
        }.rows.map { row in (keyText(row[0]), SyncFingerprint(text: row[1].text ?? "")) }
    }

    public func snapshotCount(of job: String) throws(CloudSyncError) -> Int {
        let result = try run { db throws(PostgresError) in
            try db.execute(
                "SELECT count(*) FROM snapshots WHERE pipeline = $1 AND job = $2", [.text(pipeline), .text(job)])
        }
        return Int(result.rows.first?[0].integer ?? 0)
    }

    public func updateSnapshot(of job: String, _ rows: [(key: String, fingerprint: SyncFingerprint?)])
        throws(CloudSyncError)
    {
        try recordSyncProgress(of: job, snapshot: rows, deletions: [])
    }

    public func recordSyncProgress(
        of job: String, snapshot rows: [(key: String, fingerprint: SyncFingerprint?)], deletions: [String]
    ) throws(CloudSyncError) {
        guard !isReadOnly, !rows.isEmpty || !deletions.isEmpty else { return }
        let (kept, removed) = lastRowPerKey(rows, key: { $0.key }, value: { $0.fingerprint?.text })
        try run { db throws(PostgresError) in
            try db.transaction { () throws(PostgresError) in
                if !kept.isEmpty {
                    try db.execute(
                        "INSERT INTO snapshots (pipeline, job, key, fingerprint) "
                            + "SELECT $1, $2, decode(k, 'hex'), f FROM unnest($3::text[], $4::text[]) AS r(k, f) "
                            + "ON CONFLICT (pipeline, job, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint",
                        [.text(pipeline), .text(job), hexKeys(kept.map(\.key)), .array(kept.map(\.value))])
                }
                if !removed.isEmpty {
                    try db.execute(
                        "DELETE FROM snapshots WHERE pipeline = $1 AND job = $2 "
                            + "AND key = ANY (\(Self.hexKeyArray))",
                        [.text(pipeline), .text(job), hexKeys(removed)])
                }
                if !deletions.isEmpty {
                    try db.execute(
                        "INSERT INTO sync_deletions (pipeline, job, key) "
                            + "SELECT $1, $2, decode(k, 'hex') FROM unnest($3::text[]) AS k ON CONFLICT DO NOTHING",
                        [.text(pipeline), .text(job), hexKeys(deletions)])
                }
                try noteGrowth(of: "snapshots", by: kept.count, in: db)
                try noteGrowth(of: "sync_deletions", by: deletions.count, in: db)
            }
        }
    }

    public func clearDeletions(of job: String) throws(CloudSyncError) {
        guard !isReadOnly else { return }
        try run { db throws(PostgresError) in
            try db.execute(
                "DELETE FROM sync_deletions WHERE pipeline = $1 AND job = $2", [.text(pipeline), .text(job)])
        }
    }

    public func deletions(of job: String, after key: String?, limit: Int) throws(CloudSyncError) -> [SyncItem] {
        try run { db throws(PostgresError) in
            try db.execute(
                // Each row's snapshot looked up by its primary key (LATERAL): a join the planner is free to plan
                // may scan every snapshot row per deletion while the tables' statistics are new (5 s for 500 of
                // 50,000 keys, measured).
                "SELECT d.key, s.fingerprint FROM sync_deletions d JOIN LATERAL (SELECT fingerprint FROM snapshots "
                    + "WHERE pipeline = d.pipeline AND job = d.job AND key = d.key) s ON true "
                    + "WHERE d.pipeline = $1 AND d.job = $2 AND d.key > $3 ORDER BY d.key LIMIT $4",
                [.text(pipeline), .text(job), .bytes(Array((key ?? "").utf8)), .integer(Int64(limit))])
        }.rows.map { row in SyncItem(key: keyText(row[0]), baseline: SyncFingerprint(text: row[1].text ?? "")) }
    }

    // MARK: Mirror rows

    public func mirrorRows(of job: String, keys: [String]) throws(CloudSyncError) -> [StoreKey: MirrorRow] {
        guard !keys.isEmpty else { return [:] }
        let result = try run { db throws(PostgresError) in
            try db.execute(
                "SELECT key, digest, source_version, destination_version FROM mirror_rows "
                    + "WHERE pipeline = $1 AND job = $2 AND key = ANY (\(Self.hexKeyArray))",
                [.text(pipeline), .text(job), hexKeys(keys)])
        }
        var rows: [StoreKey: MirrorRow] = [:]
        rows.reserveCapacity(result.rows.count)
        for row in result.rows {
            rows[StoreKey(keyText(row[0]))] = MirrorRow(
                digest: row[1].text ?? "", sourceVersion: row[2].text, destinationVersion: row[3].text)
        }
        return rows
    }

    public func updateMirrorRows(of job: String, _ rows: [(key: String, row: MirrorRow?)]) throws(CloudSyncError) {
        guard !isReadOnly, !rows.isEmpty else { return }
        let (kept, removed) = lastRowPerKey(rows, key: { $0.key }, value: { $0.row })
        try run { db throws(PostgresError) in
            try db.transaction { () throws(PostgresError) in
                if !kept.isEmpty {
                    try db.execute(
                        "INSERT INTO mirror_rows (pipeline, job, key, digest, source_version, destination_version) "
                            + "SELECT $1, $2, decode(k, 'hex'), d, s, t "
                            + "FROM unnest($3::text[], $4::text[], $5::text[], $6::text[]) AS r(k, d, s, t) "
                            + "ON CONFLICT (pipeline, job, key) DO UPDATE SET digest = EXCLUDED.digest, "
                            + "source_version = EXCLUDED.source_version, "
                            + "destination_version = EXCLUDED.destination_version",
                        [
                            .text(pipeline), .text(job), hexKeys(kept.map(\.key)), .array(kept.map(\.value.digest)),
                            .array(kept.map(\.value.sourceVersion)), .array(kept.map(\.value.destinationVersion)),
                        ])
                }
                try noteGrowth(of: "mirror_rows", by: kept.count, in: db)
                if !removed.isEmpty {
                    try db.execute(
                        "DELETE FROM mirror_rows WHERE pipeline = $1 AND job = $2 "
                            + "AND key = ANY (\(Self.hexKeyArray))",
                        [.text(pipeline), .text(job), hexKeys(removed)])
                }
            }
        }
    }
}

/// Splits rows into those to store and the keys to remove, keeping only the last row of a key written twice (one
/// statement may not touch a row twice), in their first order.
private func lastRowPerKey<Row, Value>(_ rows: [Row], key: (Row) -> String, value: (Row) -> Value?) -> (
    kept: [(key: String, value: Value)], removed: [String]
) {
    var last: [StoreKey: Int] = [:]
    last.reserveCapacity(rows.count)
    for (index, row) in rows.enumerated() { last[StoreKey(key(row))] = index }
    var kept: [(key: String, value: Value)] = []
    var removed: [String] = []
    for (index, row) in rows.enumerated() where last[StoreKey(key(row))] == index {
        if let value = value(row) { kept.append((key(row), value)) } else { removed.append(key(row)) }
    }
    return (kept, removed)
}

/// Keys as one text array of hexadecimal, which the statement decodes to `bytea` (`decode(k, 'hex')`): any bytes
/// travel, NUL included, which PostgreSQL's `text` refuses.
func hexKeys(_ keys: [String]) -> PostgresValue { hexArray(keys) }

/// ``hexKeys(_:)`` for texts that may be missing (a remove's value): nil is the array's NULL.
func hexArray<Texts: Collection>(_ texts: Texts) -> PostgresValue where Texts.Element: HexArrayElement {
    let digits = Array("0123456789abcdef".utf8)
    let quote = UInt8(ascii: "\"")
    var literal: [UInt8] = [UInt8(ascii: "{")]
    literal.reserveCapacity(texts.reduce(2) { $0 + ($1.utf8Bytes?.count ?? 2) * 2 + 3 })
    for (index, text) in texts.enumerated() {
        if index > 0 { literal.append(UInt8(ascii: ",")) }
        guard let bytes = text.utf8Bytes else {
            literal.append(contentsOf: "NULL".utf8)
            continue
        }
        // Quoted, so an empty text is an empty element rather than a malformed array.
        literal.append(quote)
        for byte in bytes {
            literal.append(digits[Int(byte >> 4)])
            literal.append(digits[Int(byte & 0x0F)])
        }
        literal.append(quote)
    }
    literal.append(UInt8(ascii: "}"))
    return .text(String(decoding: literal, as: UTF8.self))
}

/// A text or a missing text, as ``hexArray(_:)`` writes it.
protocol HexArrayElement {
    var utf8Bytes: String.UTF8View? { get }
}

extension String: HexArrayElement {
    var utf8Bytes: String.UTF8View? { utf8 }
}

extension Optional: HexArrayElement where Wrapped == String {
    var utf8Bytes: String.UTF8View? { self?.utf8 }
}

/// A `bytea` key column read back as the key it stores.
func keyText(_ value: PostgresValue) -> String {
    String(decoding: value.bytes ?? [], as: UTF8.self)
}
