import CloudSync
import CloudSyncLocal
import CloudSyncSQLite
import CloudSyncTesting
import Foundation

/// 100,000 keys of 100 bytes through the store on the sqlite provider (batches of 1,000), beside the `sqlite3` shell
/// inserting and reading the same rows in one transaction.
func benchSQLiteStore(_ context: BenchContext) async throws -> [BenchRow] {
    guard context.has("sqlite3") else {
        print("sqlite provider: skipped (needs the sqlite3 shell: apt-get install sqlite3)")
        return []
    }
    let count = 100_000
    let value = String(repeating: "v", count: 100)
    let keys = (0..<count).map { String(format: "settings.item.%06d", $0) }
    let directory = try context.directory("sqlite-store")
    var options = StoreOptions()
    options.timeout = nil
    var store: CloudStore?
    let storeSet = try await context.medianSeconds(
        prepare: { run in
            store = try CloudStore(
                providers: [try SQLiteProvider(path: "\(directory)/store-\(run).db")], options: options)
        },
        measure: { _ in
            for start in stride(from: 0, to: count, by: 1000) {
                _ = try await store!.multiSet(keys[start..<start + 1000].map { KeyValue($0, value) })
            }
        })
    let storeGet = try await context.medianSeconds { _ in
        for start in stride(from: 0, to: count, by: 1000) {
            let values = try await store!.multiGet(Array(keys[start..<start + 1000]))
            guard values.allSatisfy({ $0?.utf8.count == 100 }) else { fatalError("missing values") }
        }
    }
    let insertScript = "\(directory)/insert.sql"
    let selectScript = "\(directory)/select.sql"
    try
        ("PRAGMA journal_mode=WAL;\nCREATE TABLE kv (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL, "
        + "updated_at_ms INTEGER NOT NULL) WITHOUT ROWID;\nBEGIN;\n"
        + keys.map { "INSERT INTO kv VALUES ('\($0)', '\(value)', 0);" }.joined(separator: "\n") + "\nCOMMIT;\n")
        .write(toFile: insertScript, atomically: true, encoding: .utf8)
    try ("BEGIN;\n" + keys.map { "SELECT value FROM kv WHERE key = '\($0)';" }.joined(separator: "\n") + "\nCOMMIT;\n")
        .write(toFile: selectScript, atomically: true, encoding: .utf8)
    var shellDatabase = ""
    let shellSet = try await context.medianSeconds(
        prepare: { run in shellDatabase = "\(directory)/shell-\(run).db" },
        measure: { _ in try context.shell("sqlite3 '\(shellDatabase)' < '\(insertScript)'") })
    let shellGet = try await context.medianSeconds { _ in
        try context.shell("sqlite3 '\(shellDatabase)' < '\(selectScript)'")
    }
    return [
        BenchRow(
            measure: "store on SQLite: set 100,000 × 100 B", unit: "s", ours: storeSet, peerName: "sqlite3 shell",
            peer: shellSet, target: .atMost(1.0), runs: context.runs),
        BenchRow(
            measure: "store on SQLite: get 100,000 × 100 B", unit: "s", ours: storeGet, peerName: "sqlite3 shell",
            peer: shellGet, target: .atMost(1.0), runs: context.runs),
    ]
}

/// The cost of one durable enqueue (a write queued through the store against an offline provider, on disk with fsync
/// before the call returns) with 100 and 10,000 entries already queued, beside inserting the same entry directly with
/// SQLite, into a table of the outbox's schema holding as many rows, at the same durability (WAL, synchronous = FULL).
func benchOutbox(_ context: BenchContext) async throws -> [BenchRow] {
    let directory = try context.directory("outbox")
    let value = String(repeating: "v", count: 100)
    let samples = 200
    var rows: [BenchRow] = []
    for preloaded in [100, 10_000] {
        // One enqueue of ours, then one insert of the peer's, in turn: a commit's cost is mostly its fsync, whose
        // latency drifts with the machine's disk, so both sides must meet the same moments of it.
        var oursTimings: [Double] = []
        var peerTimings: [Double] = []
        for run in 0..<context.runs {
            let path = "\(directory)/outbox-\(preloaded)-\(run).db"
            try queue(preloaded, entriesOf: value, into: peerDatabase(at: path))
            let store = try offlineStore(outboxAt: path)
            let database = try peerDatabase(at: "\(directory)/direct-\(preloaded)-\(run).db")
            try queue(preloaded, entriesOf: value, into: database)
            var ours = Duration.zero
            var peer = Duration.zero
            for index in 0..<samples {
                ours += try await context.clock.measure { try await store.set(value, forKey: "bench.\(index)") }
                peer += try context.clock.measure {
                    try database.write { db in
                        try db.execute(entryInsert, preloaded + index + 1, "bench.\(index)", value)
                    }
                }
            }
            oursTimings.append(seconds(ours))
            peerTimings.append(seconds(peer))
        }
        let ours = median(oursTimings)
        let direct = median(peerTimings)
        rows.append(
            BenchRow(
                measure: "durable outbox enqueue, \(preloaded) queued (mean of \(samples))", unit: "µs",
                ours: ours * 1e6 / Double(samples), peerName: "SQLite insert of the entry",
                peer: direct * 1e6 / Double(samples),
                target: .atMost(1.2), runs: context.runs))
    }
    rows.append(try await benchOutboxBatch(context, directory: directory, value: value))
    return rows
}

/// The cost per entry of queueing a batch of 100 failed writes (one `multiSet` against an offline provider, every
/// entry on disk with fsync before the call returns), beside the same 100 entries inserted with SQLite, into a table
/// of the outbox's schema, in one transaction at the same durability.
private func benchOutboxBatch(_ context: BenchContext, directory: String, value: String) async throws -> BenchRow {
    let batches = 20
    let size = 100
    // Ours and the peer take turns, batch by batch, as the single enqueues do.
    var oursTimings: [Double] = []
    var peerTimings: [Double] = []
    for run in 0..<context.runs {
        let store = try offlineStore(outboxAt: "\(directory)/outbox-batch-\(run).db")
        let database = try peerDatabase(at: "\(directory)/direct-batch-\(run).db")
        var ours = Duration.zero
        var peer = Duration.zero
        for batch in 0..<batches {
            let items = (0..<size).map { KeyValue("bench.\(batch).\($0)", value) }
            ours += try await context.clock.measure {
                for result in try await store.multiSet(items) {
                    guard (try? result.get())?.queued == ["offline"] else { fatalError("not queued: \(result)") }
                }
            }
            peer += try context.clock.measure {
                try database.write { db in
                    let insert = try db.prepare(entryInsert)
                    for index in 0..<size {
                        try insert.bind(batch * size + index + 1, "bench.\(batch).\(index)", value).run()
                    }
                }
            }
        }
        oursTimings.append(seconds(ours))
        peerTimings.append(seconds(peer))
    }
    let ours = median(oursTimings)
    let direct = median(peerTimings)
    let entries = Double(batches * size)
    return BenchRow(
        measure: "durable outbox enqueue, batch of \(size) failed writes (per entry, \(batches) batches)", unit: "µs",
        ours: ours * 1e6 / entries, peerName: "SQLite inserts of the entries, one transaction",
        peer: direct * 1e6 / entries,
        target: .atMost(1.2), runs: context.runs)
}

/// A store whose one provider refuses every write as offline, queueing each in a durable outbox at `path`.
private func offlineStore(outboxAt path: String) throws -> CloudStore {
    let provider = FaultInjectingProvider(id: "offline")
    provider.fail(.set, with: CloudSyncError(.offline, "benchmark"))
    var options = StoreOptions()
    options.outbox = try Outbox(
        storage: SQLiteOutboxStorage(path: path), limits: Outbox.Limits(maxEntries: 1_000_000))
    return try CloudStore(providers: [provider], options: options)
}

/// The outbox benches' peer: a database of the outbox's schema (an entry's nine columns, unique by key and
/// provider), at the outbox's durability (WAL, synchronous = FULL), into which the peer inserts the entries itself.
///
/// A table of only keys and values would leave out what an entry must hold to be retried (its provider, operation,
/// attempts, times and last error), and so measure the size of the row rather than the cost of queueing it.
private func peerDatabase(at path: String) throws -> SQLiteDatabase {
    _ = try SQLiteOutboxStorage(path: path)  // creates the schema
    return try SQLiteDatabase(path: path, options: .init(durability: .powerLossSafe))
}

/// Fills the outbox table of `database` with `count` entries of `value`, as both sides' queues start.
private func queue(_ count: Int, entriesOf value: String, into database: SQLiteDatabase) throws {
    try database.write { db in
        let insert = try db.prepare(entryInsert)
        for index in 0..<count { try insert.bind(index + 1, "preloaded.\(index)", value).run() }
    }
}

/// One entry as the store queues a failed write to the offline provider, given its id, key and value: how the peer
/// inserts each entry, and how both sides' queues are filled beforehand.
private let entryInsert = """
    INSERT INTO outbox (id, key, provider, operation, value, attempts, next_attempt_at_ms, enqueued_at_ms,
        last_error_code) VALUES (?, ?, 'offline', 'set', ?, 1, 1765000001000, 1765000000000, 'ERR_OFFLINE')
    """
