// The sync's nights, each beside a same-outcome SQL peer (`cloudsync-bench --nights SIZES`, and after the mixed sync
// of `--sync SIZES`): nothing changed, 1% changed and every key new on one side, compared in full (`incremental:
// false`); nothing changed with the default settings (which read the SQLite files' change feeds) beside the
// full-compare SQL; 1% changed with the default settings beside SQL that reads the same change logs.
//
// The peers do what the sync's outcome needs the fastest way SQL can: they compare the two sides' values directly,
// hash (SHA-3, the shell's own) only the values that differ or are new to their snapshot, and keep their temporary
// tables in memory. Each side runs in a child process under GNU time: CPU seconds (the robust figure on a busy
// machine) beside wall time and peak memory.
import Foundation

/// One scenario's median runs, ours and the peer's.
struct SyncScenarioResult {
    var name: String
    var keys: Int
    var ours: ChildRun
    var peer: ChildRun
}

/// The night a scenario measures, and how it is made from the prepared files.
private struct SyncScenario {
    var name: String
    /// SQL run on `a.db` before the timed runs (nil: nothing changed).
    var change: String?
    /// Our sync reads change feeds (the default settings) instead of comparing in full.
    var incremental: Bool
    /// The peer reads the files' change logs since its cursors, instead of comparing in full.
    var peerReadsChangeLogs = false
    /// Starts from an empty `b.db` and no state: the first sync of a new side.
    var allNew: Bool = false
    /// The peer's CPU target for our CPU, and our peak memory's (MiB) at 1,000,000 keys.
    var cpuTarget: Double
    var memoryTarget: Double?
}

private let scenarios = [
    SyncScenario(
        name: "unchanged, incremental: false", change: nil, incremental: false, cpuTarget: 1.0, memoryTarget: 52),
    SyncScenario(
        name: "1% changed, incremental: false", change: changeOnePercent, incremental: false, cpuTarget: 1.0,
        memoryTarget: 52),
    SyncScenario(name: "all new on one side", change: nil, incremental: false, allNew: true, cpuTarget: 1.3),
    SyncScenario(name: "unchanged, default settings", change: nil, incremental: true, cpuTarget: 0.2),
    SyncScenario(
        name: "1% changed, default settings", change: changeOnePercent, incremental: true, peerReadsChangeLogs: true,
        cpuTarget: 1.0),
]

/// Rewrites 1% of `a`'s values.
private let changeOnePercent =
    "UPDATE kv SET value = replace(value, '\"v1\"', '\"v2\"'), updated_at_ms = 2 "
    + "WHERE CAST(substr(key, 15) AS INTEGER) % 100 = 5"

/// The nights at each of `sizes` (`runs` times each, 3 by default), then their growth; 1 when a size or a night
/// failed (each named with its error as it happens, the others still measured), else 0.
func nightsBenchmark(sizes: [Int], runs: Int?) -> Int32 {
    var results: [SyncScenarioResult] = []
    var failed = false
    for size in sizes {
        do {
            results += try benchSyncScenarios(keys: size, runs: max(1, runs ?? 3))
        } catch {
            failed = true
            print("sync nights at \(size) keys failed: \(error)")
        }
        fflush(nil)
    }
    reportScenarioGrowth(results)
    return failed || results.count < sizes.count * scenarios.count ? 1 : 0
}

/// Runs every scenario at `count` keys, `runs` times each; prints a row per scenario as it is measured.
func benchSyncScenarios(keys count: Int, runs: Int) throws -> [SyncScenarioResult] {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cloudsync-nights-\(getpid())").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    try prepareNights(count, in: directory)
    var results: [SyncScenarioResult] = []
    for scenario in scenarios {
        do {
            let result = try measure(scenario, keys: count, runs: runs, in: directory)
            results.append(result)
        } catch {
            print("sync \(count) keys, \(scenario.name): failed: \(error)")
        }
        fflush(nil)
    }
    return results
}

/// Both databases of `count` alike keys, a first sync with the default settings (its snapshot and feed cursors), and
/// the peers' state made from the same files: each key's SHA-3 and each change log's last sequence number; all kept
/// in `prepared/`.
private func prepareNights(_ count: Int, in directory: String) throws {
    let executable = Bundle.main.executablePath ?? CommandLine.arguments[0]
    let prepared = directory + "/prepared"
    try FileManager.default.createDirectory(atPath: prepared, withIntermediateDirectories: true)
    // A full run creates both files (and takes no feed cursor); the rows are then written with SQL, as another
    // program would, and a run with the default settings compares them in full, recording each key's tags, and takes
    // both feeds' cursors.
    _ = try runChild(executable, ["--sync-child", try nightPipeline(incremental: false, in: prepared)])
    for side in ["a", "b"] {
        try benchShell("sqlite3 '\(prepared)/\(side).db' \"\(rows(count, where: "1", version: "'v1'", updated: 0))\"")
    }
    _ = try runChild(executable, ["--sync-child", try nightPipeline(incremental: true, in: prepared)])
    try benchShell(
        "sqlite3 '\(prepared)/peer.db' \"ATTACH '\(prepared)/a.db' AS a; ATTACH '\(prepared)/b.db' AS b; "
            + "CREATE TABLE snapshot (key TEXT PRIMARY KEY, digest BLOB NOT NULL) WITHOUT ROWID; "
            + "INSERT INTO snapshot SELECT key, sha3(value) FROM a.kv; "
            + "CREATE TABLE cursors (side TEXT PRIMARY KEY, seq INTEGER NOT NULL); "
            + "INSERT INTO cursors SELECT 'a', coalesce(max(seq), 0) FROM a.cloudsync_changes; "
            + "INSERT INTO cursors SELECT 'b', coalesce(max(seq), 0) FROM b.cloudsync_changes\"")
}

/// The pipeline of the nights' sync in `directory`: its files `a.db` and `b.db` and its state beside them.
private func nightPipeline(incremental: Bool, in directory: String) throws -> String {
    let file = directory + "/night-\(incremental ? "default" : "full").yaml"
    try """
    version: 1
    name: nights
    state: \(directory)/state
    providers:
      a: { type: sqlite, path: \(directory)/a.db, create: true }
      b: { type: sqlite, path: \(directory)/b.db, create: true }
    store:
      providers: [a, b]
    jobs:
      - { type: sync, name: sync\(incremental ? "" : ", incremental: false") }
    report: { path: \(directory)/report.json }
    """.write(toFile: file, atomically: true, encoding: .utf8)
    return file
}

/// `runs` turns of our sync and its peer on fresh copies of the prepared files; the medians, and the row printed.
private func measure(_ scenario: SyncScenario, keys count: Int, runs: Int, in directory: String) throws
    -> SyncScenarioResult
{
    let executable = Bundle.main.executablePath ?? CommandLine.arguments[0]
    let ours = directory + "/ours"
    let peer = directory + "/peer"
    let script = directory + "/peer.sql"
    try peerScript(scenario, in: peer).write(toFile: script, atomically: true, encoding: .utf8)
    var (ourRuns, peerRuns) = ([ChildRun](), [ChildRun]())
    var agreement = ""
    for run in 0..<runs {
        for copy in [ours, peer] {
            try benchShell("rm -rf '\(copy)' && cp -a '\(directory)/prepared' '\(copy)'")
            if let change = scenario.change { _ = try runChild("/usr/bin/sqlite3", [copy + "/a.db", change]) }
            if scenario.allNew {
                // The new side: an empty file with the provider's tables (as its first open makes it), no snapshot.
                try benchShell("rm -rf '\(copy)/state'")
                _ = try runChild(
                    "/usr/bin/sqlite3", [copy + "/b.db", "DELETE FROM kv; DELETE FROM cloudsync_changes; VACUUM"])
                _ = try runChild("/usr/bin/sqlite3", [copy + "/peer.db", "DELETE FROM snapshot"])
            }
        }
        try benchShell("sync")
        ourRuns.append(
            try runChild(executable, ["--sync-child", try nightPipeline(incremental: scenario.incremental, in: ours)]))
        peerRuns.append(try runChild("/usr/bin/sqlite3", [peer + "/peer.db"], input: script))
        if run == 0 && count <= 1_000_000 { agreement = try endStates(ours, peer) }
    }
    let result = SyncScenarioResult(
        name: scenario.name, keys: count, ours: ChildRun.medianRun(ourRuns), peer: ChildRun.medianRun(peerRuns))
    printRow(result, scenario: scenario, agreement: agreement, runs: runs)
    return result
}

/// "agree" when both copies of `a.db` and of `b.db` hold the same keys and values, else how many rows differ.
private func endStates(_ ours: String, _ peer: String) throws -> String {
    var differing: [String] = []
    for side in ["a", "b"] {
        let count = try rowsDiffering("\(ours)/\(side).db", "\(peer)/\(side).db")
        if count != "0" { differing.append("\(side): \(count) rows") }
    }
    return differing.isEmpty ? "end states agree" : "end states DIFFER (" + differing.joined(separator: ", ") + ")"
}

private func printRow(_ result: SyncScenarioResult, scenario: SyncScenario, agreement: String, runs: Int) {
    let ratio = result.ours.cpuSeconds / max(result.peer.cpuSeconds, 0.001)
    var line =
        "sync \(result.keys) keys, \(scenario.name): CPU \(String(format: "%.2f", result.ours.cpuSeconds)) s "
        + "(wall \(String(format: "%.2f", result.ours.seconds)) s, \(String(format: "%.1f", result.ours.peakMegabytes)) "
        + "MB) beside \(scenario.peerReadsChangeLogs ? "change-log" : "same-outcome") SQL "
        + "\(String(format: "%.2f", result.peer.cpuSeconds)) s (wall \(String(format: "%.2f", result.peer.seconds)) s, "
        + "\(String(format: "%.1f", result.peer.peakMegabytes)) MB): \(String(format: "%.2f", ratio))× "
        + "(target ≤ \(String(format: "%.2f", scenario.cpuTarget))×: \(ratio <= scenario.cpuTarget ? "met" : "NOT MET"))"
    if let memory = scenario.memoryTarget, result.keys <= 1_000_000 {
        let mebibytes = result.ours.peakMegabytes
        line +=
            "; peak \(String(format: "%.1f", mebibytes)) MiB (target ≤ \(Int(memory))): "
            + (mebibytes <= memory ? "met" : "NOT MET")
    }
    if !agreement.isEmpty { line += "; \(agreement)" }
    print(line + "; medians of \(runs)")
    print("  counts: \(result.ours.output.trimmingCharacters(in: .whitespacesAndNewlines))")
}

/// Each scenario's growth from one size to the next (ten times the keys within eleven times the CPU) and the
/// largest size's peak memory against 100 MB.
func reportScenarioGrowth(_ results: [SyncScenarioResult]) {
    for name in scenarios.map(\.name) {
        let sizes = results.filter { $0.name == name }.sorted { $0.keys < $1.keys }
        for (smaller, larger) in zip(sizes, sizes.dropFirst()) {
            let allowed = Double(larger.keys) / Double(smaller.keys) * 1.1
            let growth = larger.ours.cpuSeconds / max(smaller.ours.cpuSeconds, 0.001)
            print(
                "sync \(name): \(larger.keys) keys took \(String(format: "%.2f", growth))× the CPU of \(smaller.keys) "
                    + "(target ≤ \(String(format: "%.1f", allowed))×): \(growth <= allowed ? "met" : "NOT MET"); "
                    + "peak \(String(format: "%.1f", larger.ours.peakMegabytes)) MB (target ≤ 100): "
                    + (larger.ours.peakMegabytes <= 100 ? "met" : "NOT MET"))
        }
    }
}

/// The peer's SQL for `scenario`, run by the `sqlite3` shell on its copy in `directory` with `peer.db` (snapshot and
/// cursors) as its main database: it gathers the keys that may need work into `changed`, then decides and applies.
private func peerScript(_ scenario: SyncScenario, in directory: String) -> String {
    let gather =
        scenario.peerReadsChangeLogs
        ? """
        CREATE TEMP TABLE touched (key TEXT PRIMARY KEY) WITHOUT ROWID;
        INSERT OR IGNORE INTO touched SELECT key FROM a.cloudsync_changes
          WHERE seq > (SELECT seq FROM main.cursors WHERE side = 'a');
        INSERT OR IGNORE INTO touched SELECT key FROM b.cloudsync_changes
          WHERE seq > (SELECT seq FROM main.cursors WHERE side = 'b');
        INSERT INTO changed SELECT t.key, x.value, y.value, s.digest FROM temp.touched AS t
          LEFT JOIN a.kv AS x ON x.key = t.key LEFT JOIN b.kv AS y ON y.key = t.key
          LEFT JOIN main.snapshot AS s ON s.key = t.key
          WHERE x.value IS NOT y.value OR (s.key IS NULL AND x.key IS NOT NULL)
            OR (s.key IS NOT NULL AND x.key IS NULL AND y.key IS NULL);
        """
        : """
        INSERT INTO changed SELECT x.key, x.value, y.value, s.digest FROM a.kv AS x
          LEFT JOIN b.kv AS y ON y.key = x.key LEFT JOIN main.snapshot AS s ON s.key = x.key
          WHERE y.value IS NOT x.value OR s.key IS NULL;
        INSERT INTO changed SELECT y.key, NULL, y.value, s.digest FROM b.kv AS y
          LEFT JOIN main.snapshot AS s ON s.key = y.key
          WHERE NOT EXISTS (SELECT 1 FROM a.kv AS x WHERE x.key = y.key);
        INSERT INTO changed SELECT s.key, NULL, NULL, s.digest FROM main.snapshot AS s
          WHERE NOT EXISTS (SELECT 1 FROM a.kv AS x WHERE x.key = s.key)
            AND NOT EXISTS (SELECT 1 FROM b.kv AS y WHERE y.key = s.key);
        """
    return """
        PRAGMA temp_store = memory;
        ATTACH '\(directory)/a.db' AS a;
        ATTACH '\(directory)/b.db' AS b;
        BEGIN;
        CREATE TEMP TABLE changed (key TEXT PRIMARY KEY, va TEXT, vb TEXT, ds BLOB) WITHOUT ROWID;
        \(gather)
        CREATE TEMP TABLE act AS SELECT key, va, vb, da, db, \(sqlSyncDecision)
          FROM (SELECT key, va, vb, sha3(va) AS da, sha3(vb) AS db, ds FROM temp.changed);
        INSERT OR REPLACE INTO b.kv (key, value, updated_at_ms) SELECT key, va, 1 FROM temp.act WHERE action = 'to-b';
        INSERT OR REPLACE INTO a.kv (key, value, updated_at_ms) SELECT key, vb, 1 FROM temp.act WHERE action = 'to-a';
        DELETE FROM a.kv WHERE key IN (SELECT key FROM temp.act WHERE action = 'delete-a');
        DELETE FROM b.kv WHERE key IN (SELECT key FROM temp.act WHERE action = 'delete-b');
        INSERT OR REPLACE INTO main.snapshot (key, digest)
          SELECT key, CASE action WHEN 'to-a' THEN db ELSE da END FROM temp.act
          WHERE action IN ('record', 'to-a', 'to-b');
        DELETE FROM main.snapshot WHERE key IN (SELECT key FROM temp.act WHERE action IN ('delete-a', 'delete-b', 'forget'));
        UPDATE main.cursors SET seq = (SELECT coalesce(max(seq), 0) FROM a.cloudsync_changes) WHERE side = 'a';
        UPDATE main.cursors SET seq = (SELECT coalesce(max(seq), 0) FROM b.cloudsync_changes) WHERE side = 'b';
        COMMIT;
        """
}
