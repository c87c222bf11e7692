import CloudSync
import CloudSyncLocal
import CloudSyncPostgres
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncPipeline
@testable import CloudSyncPipelineState

/// The two state implementations driven by one seeded sequence of operations, every answer compared: SQLite and
/// PostgreSQL are independent engines, so where they disagree (key order with NUL or non-ASCII bytes, a row written
/// twice in one page, an empty key, NULL versions) one implementation is wrong.
@Suite(.timeLimit(.minutes(5))) struct PipelineStateAgreementTests {
    /// Keys from an alphabet that exercises byte order and PostgreSQL's text limits: NUL, a newline, quotes,
    /// backslashes, braces, commas, accents, CJK and an emoji.
    private static let alphabet = Array("aZ09._-/ é日🌍\u{0}\n\"\\{},")

    private func key(_ random: inout SeededRandom) -> String {
        String((0..<Int.random(in: 0...4, using: &random)).map { _ in Self.alphabet.randomElement(using: &random)! })
    }

    private func fingerprint(_ random: inout SeededRandom) -> SyncFingerprint? {
        Bool.random(using: &random) && Int.random(in: 0..<4, using: &random) == 0
            ? nil
            : SyncFingerprint(text: "v\(Int.random(in: 0..<1000, using: &random))")
    }

    @Test(arguments: [1, 2, 3, 4])
    func bothImplementationsGiveTheSameAnswers(seed: UInt64) async throws {
        let directory = try TemporaryDirectory()
        let server = try await PostgresServer.shared()
        // Off the concurrency pool: every call blocks its thread, and 400 steps in a row would hold a pool thread (of
        // two) for seconds, starving the in-process emulators other tests talk to.
        let mismatches = try await offPool { try self.compare(seed: seed, directory: directory, url: server.url) }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
    }

    private func compare(seed: UInt64, directory: TemporaryDirectory, url: String) throws -> [String] {
        var mismatches: [String] = []
        func check(_ agreed: Bool, _ what: String) { if !agreed { mismatches.append(what) } }
        let spec = SharedStateSpec(
            url: Interpolated(value: url, written: "${env:URL}"), schema: PostgresServer.uniqueName("agree"))
        let codec = BindingCodec()
        let sqlite = try StateDatabase(path: directory.file("state.db"), codec: codec)
        let postgres = try PostgresStateDatabase(spec, pipeline: "agree", codec: codec)
        // A second pipeline in the same schema, so a query that forgets the pipeline shows up as a difference.
        let neighbour = try PostgresStateDatabase(spec, pipeline: "neighbour")
        defer {
            sqlite.close()
            postgres.close()
            neighbour.close()
        }
        let states: [any PipelineState] = [sqlite, postgres]
        var random = SeededRandom(seed: seed)
        let jobs = ["sync-a", "sync-b"]
        for step in 0..<400 {
            let job = jobs.randomElement(using: &random)!
            let keys = (0..<Int.random(in: 0...12, using: &random)).map { _ in key(&random) }
            let label = "seed \(seed), step \(step)"
            switch Int.random(in: 0..<12, using: &random) {
            case 0, 1:
                let rows = keys.map { ($0, fingerprint(&random)) }
                for state in states { try state.updateSnapshot(of: job, rows) }
                try neighbour.updateSnapshot(of: job, rows.map { ($0.0, SyncFingerprint(text: "other")) })
            case 2:
                let rows = keys.map { ($0, fingerprint(&random)) }
                let deletions = keys.filter { _ in Bool.random(using: &random) }
                for state in states { try state.recordSyncProgress(of: job, snapshot: rows, deletions: deletions) }
            case 3:
                let answers = try states.map {
                    try $0.snapshotRows(of: job, keys: keys).map { "\($0.key)=\($0.fingerprint.text)" }
                }
                check(answers[0] == answers[1], "\(label): snapshotRows(keys:)")
            case 4:
                let after = Bool.random(using: &random) ? nil : keys.first
                let limit = Int.random(in: 1...20, using: &random)
                let answers = try states.map {
                    try $0.snapshotRows(of: job, after: after, limit: limit).map { "\($0.key)=\($0.fingerprint.text)" }
                }
                check(answers[0] == answers[1], "\(label): snapshotRows(after:)")
                let counts = try states.map { try $0.snapshotCount(of: job) }
                check(counts[0] == counts[1], "\(label): snapshotCount")
            case 5:
                let after = Bool.random(using: &random) ? nil : keys.first
                let answers = try states.map {
                    try $0.deletions(of: job, after: after, limit: 50).map { "\($0.key)=\($0.baseline?.text ?? "-")" }
                }
                check(answers[0] == answers[1], "\(label): deletions")
                if Bool.random(using: &random) { for state in states { try state.clearDeletions(of: job) } }
            case 6:
                let cursors: [String: String]? =
                    Bool.random(using: &random)
                    ? nil : Dictionary(uniqueKeysWithValues: ["p1", "p2"].map { ($0, "c\(step)-\($0)") })
                for state in states {
                    try state.markSynced(job, at: "2026-12-04T00:00:\(step % 60)Z", cursors: cursors)
                }
            case 7:
                let answers = try states.map {
                    "\(try $0.hasSynced(job)) \(try $0.syncCursors(of: job).sorted { $0.key < $1.key })"
                }
                check(answers[0] == answers[1], "\(label): hasSynced, syncCursors")
            case 8:
                let rows = keys.map { key -> (key: String, row: MirrorRow?) in
                    let version = Bool.random(using: &random) ? nil : "e\(step)"
                    return (
                        key,
                        Bool.random(using: &random)
                            ? nil : MirrorRow(digest: "d\(step)", sourceVersion: version, destinationVersion: nil)
                    )
                }
                for state in states { try state.updateMirrorRows(of: job, rows) }
                let answers = try states.map {
                    try $0.mirrorRows(of: job, keys: keys).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
                }
                check(answers[0] == answers[1], "\(label): mirrorRows")
            case 9:
                let identity =
                    Bool.random(using: &random) ? uncheckedIdentity : "user-\(step)@example.com"
                for state in states { try state.remember(identity: identity, of: "cloud", at: "t\(step)") }
                let answers = try states.map { try $0.identity(of: "cloud") }
                check(answers[0] == answers[1] && answers[0] == identity, "\(label): identity")
            case 10:
                let value: String? = Bool.random(using: &random) ? nil : "token \(keys.first ?? "")"
                for state in states { try state.setValue(value, provider: "cloud", name: "token") }
                let answers = try states.map { try $0.value(provider: "cloud", name: "token") }
                check(answers[0] == answers[1] && answers[0] == value, "\(label): provider value")
            default:
                let run = RunRecord(
                    id: "run-\(step)", startedAt: "2026-12-04T01:\(String(format: "%02d", step % 60)):00Z",
                    finishedAt: "2026-12-04T02:00:00Z", status: .ok, dryRun: Bool.random(using: &random),
                    jobs: ["ok": step], report: Bool.random(using: &random) ? nil : "/reports/\(step).json")
                for state in states { try state.record(run) }
                let answers = try states.map { try $0.runs(limit: 3) }
                check(answers[0] == answers[1], "\(label): runs")
            }
        }
        return mismatches
    }
}

/// A codec that binds a value to its key, as the envelope does, without keys of its own: decoding under another key
/// fails, so a state that seals a value under the wrong provider or name cannot read it back.
private struct BindingCodec: ValueCodec {
    struct WrongKey: Error {}

    func encode(_ value: String, key: String) throws -> String { key + "|" + value }

    func decode(_ stored: String, key: String) throws -> String {
        guard stored.hasPrefix(key + "|") else { throw WrongKey() }
        return String(stored.dropFirst(key.count + 1))
    }
}

/// A page's lookup by key stays an index lookup on the key right after a bulk write.
///
/// A run fills the snapshot table far faster than autovacuum analyzes it; without statistics the planner took the
/// lookup for a scan of the job's every row (5 s a page at 50,000 keys). The state analyzes the tables it fills.
@Suite struct PostgresStatePlanTests {
    @Test func aPagesLookupByKeyUsesTheKeyInTheIndexRightAfterABulkWrite() async throws {
        let server = try await PostgresServer.shared()
        let spec = SharedStateSpec(
            url: Interpolated(value: server.url, written: "${env:URL}"), schema: PostgresServer.uniqueName("plan"))
        // Off the concurrency pool, as every call blocks its thread.
        let plan = try await offPool {
            let state = try PostgresStateDatabase(spec, pipeline: "planned")
            defer { state.close() }
            for page in 0..<5 {
                try state.recordSyncProgress(
                    of: "sync",
                    snapshot: (0..<1000).map {
                        (String(format: "key-%06d", page * 1000 + $0), SyncFingerprint(text: "f"))
                    },
                    deletions: [])
            }
            return try state.connection.blocking { (db) throws(PostgresError) in
                try db.execute(
                    "EXPLAIN SELECT key, fingerprint FROM snapshots WHERE pipeline = $1 AND job = $2 AND key = ANY ("
                        + PostgresStateDatabase.hexKeyArray + ")",
                    [.text("planned"), .text("sync"), hexKeys(["key-000001", "key-004000"])])
            }.rows.compactMap { $0[0].text }.joined(separator: "\n")
        }
        #expect(
            plan.contains("Index Cond: ((pipeline = 'planned'::text) AND (job = 'sync'::text) AND (key = ANY"),
            "\(plan)")
    }
}

/// The outbox's storage in PostgreSQL against SQLite's and the in-memory one: one seeded sequence of replaces,
/// updates, deletes and batched commits, and after each step every storage loads the same entries.
@Suite struct OutboxStorageAgreementTests {
    @Test(arguments: [11, 12, 13])
    func everyStorageHoldsTheSameEntries(seed: UInt64) async throws {
        let directory = try TemporaryDirectory()
        let url = try await PostgresServer.shared().url
        // Off the concurrency pool, as every call blocks its thread.
        let mismatches = try await offPool { try self.compare(seed: seed, directory: directory, url: url) }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
    }

    private func compare(seed: UInt64, directory: TemporaryDirectory, url: String) throws -> [String] {
        var mismatches: [String] = []
        let spec = SharedStateSpec(
            url: Interpolated(value: url, written: "${env:URL}"), schema: PostgresServer.uniqueName("outbox"))
        let state = try PostgresStateDatabase(spec, pipeline: "queued")
        defer { state.close() }
        let sqlite = try SQLiteOutboxStorage(path: directory.file("outbox.db"))
        defer { sqlite.close() }
        let storages: [any OutboxStorage] = [InMemoryOutboxStorage(), sqlite, PostgresOutboxStorage(state: state)]
        var random = SeededRandom(seed: seed)
        let keys = ["a", "b", "é", "日本", "nul\u{0}key", "", "quote\"s\\"]
        var nextID: Int64 = 1
        func entry() -> OutboxEntry {
            defer { nextID += 1 }
            let remove = Int.random(in: 0..<4, using: &random) == 0
            return OutboxEntry(
                id: nextID, key: keys.randomElement(using: &random)!, operation: remove ? .remove : .set,
                encodedValue: remove ? nil : "value \(nextID) \u{0}🌍",
                provider: ["p1", "p2"].randomElement(using: &random)!,
                attempts: 1, nextAttemptAtMs: Int64(nextID * 10), enqueuedAtMs: Int64(nextID),
                lastErrorCode: "ERR_OFFLINE")
        }
        for step in 0..<200 {
            let held = try storages[0].loadAll()
            switch Int.random(in: 0..<4, using: &random) {
            case 0:
                let new = entry()
                for storage in storages { try storage.replace(new) }
            case 1:
                var changed = held.filter { _ in Bool.random(using: &random) }
                for index in changed.indices {
                    changed[index].attempts += 1
                    changed[index].nextAttemptAtMs += 1000
                    changed[index].lastErrorCode = "ERR_SERVER"
                }
                for storage in storages { try storage.update(changed) }
            case 2:
                let ids = held.filter { _ in Bool.random(using: &random) }.map(\.id) + [999_999]
                for storage in storages { try storage.delete(ids: ids) }
            default:
                let ids = held.filter { _ in Int.random(in: 0..<3, using: &random) == 0 }.map(\.id)
                let batch = (0..<Int.random(in: 0...6, using: &random)).map { _ in entry() }
                for storage in storages { try storage.commit(storing: batch, deleting: ids) }
            }
            let loaded = try storages.map { try $0.loadAll() }
            if loaded[1] != loaded[0] { mismatches.append("seed \(seed), step \(step): SQLite") }
            if loaded[2] != loaded[0] { mismatches.append("seed \(seed), step \(step): PostgreSQL") }
        }
        return mismatches
    }
}
