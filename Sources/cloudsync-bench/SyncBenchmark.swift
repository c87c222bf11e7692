// The sync benchmark (`cloudsync-bench --sync 1000000,10000000`): a sync job between two SQLite providers with 10%
// of the values changed, 5% of the keys missing on one side and 1% deleted since the last sync, run in a child process
// under GNU time so its peak memory (maximum resident set) is the job's own, beside the `sqlite3` shell doing the same repair in SQL.
// Up to 1,000,000 keys the same sync runs again with its state in PostgreSQL, beside the run with SQLite state.
import CloudSync
import CloudSyncLocal
import CloudSyncPipeline
import CloudSyncPostgres
import CloudSyncRunner
import CloudSyncSQLite
import Foundation

/// Runs the sync benchmark when the arguments ask for it (`--sync SIZES`, or `--sync-child FILE` in the child it
/// starts), then exits; returns at once otherwise.
func syncBenchmark(_ arguments: [String]) async throws {
    if let index = arguments.firstIndex(of: "--sync-child"), index + 1 < arguments.count {
        exit(await runSyncChild(pipeline: arguments[index + 1]))
    }
    let runs = arguments.firstIndex(of: "--runs").flatMap { $0 + 1 < arguments.count ? Int(arguments[$0 + 1]) : nil }
    // `--nights SIZES` runs only the nights beside their same-outcome peers (SyncScenarioBench.swift).
    if let index = arguments.firstIndex(of: "--nights"), index + 1 < arguments.count {
        exit(nightsBenchmark(sizes: arguments[index + 1].split(separator: ",").compactMap { Int($0) }, runs: runs))
    }
    guard let index = arguments.firstIndex(of: "--sync") else { return }
    let sizes =
        index + 1 < arguments.count
        ? arguments[index + 1].split(separator: ",").compactMap { Int($0) } : [1_000_000, 10_000_000]
    print(machineLine(when: "at start"))
    var medians: [(keys: Int, run: ChildRun)] = []
    var failed = false
    for size in sizes {
        // A size that fails (the machine ran out of something) is named with its error; the others still run.
        do {
            medians.append((size, try await benchSync(keys: size, runs: max(1, runs ?? 3))))
        } catch {
            failed = true
            print("sync bench at \(size) keys failed: \(error)")
        }
        fflush(nil)
    }
    reportGrowth(medians)
    let nights = nightsBenchmark(sizes: sizes, runs: runs)
    exit(failed || nights != 0 ? 1 : 0)
}

/// In the child: runs the pipeline's jobs, prints the sync job's counts, exits 0 when it ended `ok`.
private func runSyncChild(pipeline: String) async -> Int32 {
    do {
        let environment = ProcessInfo.processInfo.environment
        let spec = try PipelineLoader.load(
            path: pipeline, registry: BuiltInProviders.registry, environment: environment)
        let compiled = try PipelineCompiler.compile(spec, environment: environment)
        let outcome = try await PipelineRunner(compiled, options: RunOptions()).run()
        let counts = outcome.report.jobs.first?.counts ?? [:]
        print(counts.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))
        if let error = outcome.report.jobs.first?.error { print("error: \(error.code) \(error.message)") }
        return outcome.status == .ok ? 0 : 1
    } catch {
        print("error: \(error)")
        return 2
    }
}

/// Wall time, peak resident memory and output of one child process.
struct ChildRun {
    var seconds: Double
    var peakMegabytes: Double
    /// User plus system CPU seconds.
    var cpuSeconds: Double
    var output: String

    /// The run with the median wall time, its CPU and memory set to the medians of all.
    static func medianRun(_ runs: [ChildRun]) -> ChildRun {
        var middle = runs.sorted { $0.seconds < $1.seconds }[runs.count / 2]
        middle.cpuSeconds = cloudsync_bench.median(runs.map(\.cpuSeconds))
        middle.peakMegabytes = cloudsync_bench.median(runs.map(\.peakMegabytes))
        return middle
    }
}

/// Starts `path` with `arguments` (standard input from `input` when given) under GNU `time`, which forks it from its
/// own small process: the child's peak memory is then its own. (A child spawned straight from this process would
/// inherit this process's high-water mark in `ru_maxrss` across its exec.)
func runChild(_ path: String, _ arguments: [String], input: String? = nil) throws -> ChildRun {
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("bench-\(UUID().uuidString)").path
    let outputPath = scratch + ".out"
    let timePath = scratch + ".time"
    defer {
        unlink(outputPath)
        unlink(timePath)
    }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    if let input { posix_spawn_file_actions_addopen(&actions, 0, input, O_RDONLY, 0) }
    posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    let timer = "/usr/bin/time"
    let argv = ([timer, "-f", "%e %M %U %S", "-o", timePath, path] + arguments).map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var pid: pid_t = 0
    let status = posix_spawn(&pid, timer, &actions, nil, argv, environ)
    guard status == 0 else { throw CloudSyncError(.config, "cannot start \(timer): error \(status)") }
    var exitStatus: Int32 = 0
    _ = waitpid(pid, &exitStatus, 0)
    let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
    guard exitStatus == 0 else {
        throw CloudSyncError(.config, "\(path) \(arguments) failed (\(exitStatus)): \(output)")
    }
    let figures =
        ((try? String(contentsOfFile: timePath, encoding: .utf8)) ?? "").split(separator: "\n").last?
        .split(separator: " ") ?? []
    guard figures.count == 4, let seconds = Double(figures[0]), let kilobytes = Double(figures[1]),
        let user = Double(figures[2]), let system = Double(figures[3])
    else {
        throw CloudSyncError(.config, "GNU time reported nothing for \(path)")
    }
    return ChildRun(seconds: seconds, peakMegabytes: kilobytes / 1024, cpuSeconds: user + system, output: output)
}

private func key(_ index: Int) -> String { String(format: "settings/item-%09d", index) }
private func value(_ index: Int, _ version: String) -> String {
    "{\"index\":\(index),\"version\":\"\(version)\",\"padding\":\"0123456789abcdef0123456789abcdef\"}"
}
// Index classes: 5% missing on b (written to a after the first sync), 10% changed on a, 1% deleted from b.
private func isMissing(_ index: Int) -> Bool { index % 20 == 1 }
private func isChanged(_ index: Int) -> Bool { index % 10 == 2 }
private func isDeleted(_ index: Int) -> Bool { index % 100 == 3 }

/// Runs `command` with `/bin/sh -c`; throws with its status when it fails.
func benchShell(_ command: String) throws {
    _ = try runChild("/bin/sh", ["-c", command])
}

/// One benchmark size: builds both databases with SQL, a first sync to make the snapshot, the changes, then `runs`
/// timed syncs, each on a fresh copy of the prepared files, taking turns with the `sqlite3` repair on its own copies;
/// returns our median run.
private func benchSync(keys count: Int, runs: Int) async throws -> ChildRun {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cloudsync-sync-bench-\(getpid())")
        .path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    // The PostgreSQL-state run starts from copies of the same two databases.
    let withPostgres = count <= 1_000_000
    let (pipeline, first, prepared) = try await prepareSync(count, withPostgres: withPostgres, in: directory)
    let script = directory + "/repair.sql"
    try """
    ATTACH '\(directory)/sql-a.db' AS a;
    BEGIN;
    INSERT OR REPLACE INTO main.kv (key, value, updated_at_ms)
      SELECT a.kv.key, a.kv.value, a.kv.updated_at_ms FROM a.kv LEFT JOIN main.kv AS b ON b.key = a.kv.key
      WHERE b.key IS NULL OR b.value <> a.kv.value;
    COMMIT;
    """.write(toFile: script, atomically: true, encoding: .utf8)
    let sameWork = directory + "/sync3.sql"
    try sameWorkSync(in: directory).write(toFile: sameWork, atomically: true, encoding: .utf8)
    let timed = try timedSyncs(
        count: count, runs: runs, pipeline: pipeline, repair: script, sameWork: sameWork, in: directory)
    let postgres = withPostgres ? try await benchPostgresState(count: count, runs: runs, in: directory) : nil
    report(
        count: count, prepared: prepared, first: first, ours: ChildRun.medianRun(timed.ours),
        theirs: ChildRun.medianRun(timed.theirs), same: ChildRun.medianRun(timed.same), agreement: timed.agreement,
        postgres: postgres, runs: runs)
    return ChildRun.medianRun(timed.ours)
}

/// Builds both databases of `count` keys in `directory` (and copies for the PostgreSQL-state run when
/// `withPostgres`), runs the first sync, makes the same-work peer's snapshot, applies the changes, and keeps
/// everything in `prepared/`: the sync's pipeline, its first run, and how long all that took.
private func prepareSync(_ count: Int, withPostgres: Bool, in directory: String) async throws
    -> (pipeline: String, first: ChildRun, prepared: Duration)
{
    let a = directory + "/a.db"
    let b = directory + "/b.db"
    for path in [a, b] { await (try SQLiteProvider(path: path)).close() }
    let build = ContinuousClock.now
    for path in [a, b] {
        try benchShell("sqlite3 '\(path)' \"\(rows(count, where: "i % 20 != 1", version: "'v1'", updated: 0))\"")
    }
    if withPostgres { try benchShell("cp '\(a)' '\(directory)/pg-a.db' && cp '\(b)' '\(directory)/pg-b.db'") }
    let pipeline = try writeSyncPipeline("syncbench", a: a, b: b, state: directory + "/state", in: directory)
    let executable = Bundle.main.executablePath ?? CommandLine.arguments[0]
    let first = try runChild(executable, ["--sync-child", pipeline])
    // The same-work peer's snapshot: every key's digest as the first sync left the two databases (alike).
    try benchShell(
        "sqlite3 '\(directory)/sync3-state.db' \"ATTACH '\(a)' AS a; CREATE TABLE snapshot (key TEXT PRIMARY KEY, "
            + "digest BLOB NOT NULL) WITHOUT ROWID; INSERT INTO snapshot SELECT key, sha3(value) FROM a.kv\"")
    try applyChanges(a: a, b: b, count: count)
    // What every timed run starts from: the prepared databases and state, copied back before each run.
    try benchShell(
        "mkdir '\(directory)/prepared' && cp -a '\(directory)'/a.db* '\(directory)'/b.db* '\(directory)/state' "
            + "'\(directory)/sync3-state.db' '\(directory)/prepared/'")
    return (pipeline, first, ContinuousClock.now - build)
}

/// `runs` timed runs, each from fresh copies of the prepared files: our sync, the `sqlite3` shell's `repair`
/// script, and its `sameWork` sync; whether the first run's end states agree with the same-work peer's (up to
/// 1,000,000 keys), else "".
private func timedSyncs(
    count: Int, runs: Int, pipeline: String, repair script: String, sameWork: String, in directory: String
) throws -> (ours: [ChildRun], theirs: [ChildRun], same: [ChildRun], agreement: String) {
    let executable = Bundle.main.executablePath ?? CommandLine.arguments[0]
    var ours: [ChildRun] = []
    var theirs: [ChildRun] = []
    var same: [ChildRun] = []
    var agreement = ""
    for run in 0..<runs {
        if run > 0 {
            try benchShell(
                "rm -rf '\(directory)'/a.db* '\(directory)'/b.db* '\(directory)/state' && "
                    + "cp -a '\(directory)'/prepared/* '\(directory)/'")
        }
        try benchShell(
            "cp '\(directory)/prepared/a.db' '\(directory)/sql-a.db' && "
                + "cp '\(directory)/prepared/b.db' '\(directory)/sql-b.db' && "
                + "cp '\(directory)/prepared/a.db' '\(directory)/sync3-a.db' && "
                + "cp '\(directory)/prepared/b.db' '\(directory)/sync3-b.db' && "
                + "cp '\(directory)/prepared/sync3-state.db' '\(directory)/sync3-run-state.db' && sync")
        ours.append(try runChild(executable, ["--sync-child", pipeline]))
        theirs.append(try runChild("/usr/bin/sqlite3", [directory + "/sql-b.db"], input: script))
        same.append(try runChild("/usr/bin/sqlite3", [directory + "/sync3-run-state.db"], input: sameWork))
        print(
            String(
                format: "  run %d: ours %.2f s (CPU %.2f s), sqlite3 repair %.2f s (CPU %.2f s), sqlite3 same-work "
                    + "sync %.2f s (CPU %.2f s)", run + 1, ours[run].seconds, ours[run].cpuSeconds, theirs[run].seconds,
                theirs[run].cpuSeconds, same[run].seconds, same[run].cpuSeconds))
        if run == 0 && count <= 1_000_000 { agreement = try compareWithSameWork(in: directory) }
    }
    return (ours, theirs, same, agreement)
}

/// The same-work peer: the sync's three-way decision in SQL, run by the `sqlite3` shell on its own copies
/// (`sync3-a.db`, `sync3-b.db`, and its state, the main database, holding each key's digest as last synced).
///
/// Like the sync, it reads and hashes every value of both sides (SHA-3, the shell's own), compares each key with
/// its snapshot, copies new and changed values either way (the first side winning a conflict, as the sync's default
/// resolver does), deletes on one side what the other deleted and left unchanged, and records the new digests. It
/// leaves out what SQL cannot do: several providers, tags that spare reads, limits on deletions, a report.
private func sameWorkSync(in directory: String) -> String {
    """
    ATTACH '\(directory)/sync3-a.db' AS a;
    ATTACH '\(directory)/sync3-b.db' AS b;
    BEGIN;
    CREATE TEMP TABLE changed AS
      SELECT coalesce(k.key, s.key) AS key, k.da AS da, k.db AS db, s.digest AS ds FROM (
        SELECT coalesce(x.key, y.key) AS key, sha3(x.value) AS da, sha3(y.value) AS db
        FROM a.kv AS x FULL JOIN b.kv AS y ON y.key = x.key
      ) AS k FULL JOIN main.snapshot AS s ON s.key = k.key
      WHERE NOT (k.da IS NOT NULL AND k.da IS k.db AND k.da IS s.digest);
    CREATE TEMP TABLE act AS SELECT key, da, db, \(sqlSyncDecision)
      FROM changed;
    INSERT OR REPLACE INTO b.kv (key, value, updated_at_ms)
      SELECT x.key, x.value, x.updated_at_ms FROM temp.act JOIN a.kv AS x ON x.key = act.key WHERE action = 'to-b';
    INSERT OR REPLACE INTO a.kv (key, value, updated_at_ms)
      SELECT y.key, y.value, y.updated_at_ms FROM temp.act JOIN b.kv AS y ON y.key = act.key WHERE action = 'to-a';
    DELETE FROM a.kv WHERE key IN (SELECT key FROM temp.act WHERE action = 'delete-a');
    DELETE FROM b.kv WHERE key IN (SELECT key FROM temp.act WHERE action = 'delete-b');
    INSERT OR REPLACE INTO main.snapshot (key, digest)
      SELECT key, CASE action WHEN 'to-a' THEN db ELSE da END FROM temp.act WHERE action IN ('record', 'to-a', 'to-b');
    DELETE FROM main.snapshot
      WHERE key IN (SELECT key FROM temp.act WHERE action IN ('delete-a', 'delete-b', 'forget'));
    COMMIT;
    """
}

/// A sync's decision of one key in SQL, for both SQL peers.
///
/// From the digests of its value on each side (`da`, `db`; NULL where the side holds none) and in the snapshot
/// (`ds`): which side's value wins, what is deleted, or that the key is only recorded (the first side winning a
/// conflict, as the sync's default resolver does).
let sqlSyncDecision = """
    CASE
        WHEN da IS NOT NULL AND da IS db THEN 'record'
        WHEN db IS NULL AND da IS NOT NULL AND da IS ds THEN 'delete-a'
        WHEN da IS NULL AND db IS NOT NULL AND db IS ds THEN 'delete-b'
        WHEN da IS NULL AND db IS NULL THEN 'forget'
        WHEN db IS NOT NULL AND (da IS NULL OR da IS ds) THEN 'to-a'
        ELSE 'to-b' END AS action
    """

/// Whether the sync left both databases holding what the same-work peer left in its copies: "agree", or how many
/// rows of each side are not in the other's.
private func compareWithSameWork(in directory: String) throws -> String {
    var differing: [String] = []
    for side in ["a", "b"] {
        let count = try rowsDiffering(directory + "/sync3-\(side).db", "\(directory)/\(side).db")
        if count != "0" { differing.append("\(side): \(count) rows") }
    }
    return differing.isEmpty ? "agree" : "DIFFER (" + differing.joined(separator: ", ") + ")"
}

/// How many rows of the `kv` tables of the SQLite files `left` and `right` are not in the other's, as the `sqlite3`
/// shell counts them ("0" when both hold the same keys and values; a key with another value counts once on each
/// side).
func rowsDiffering(_ left: String, _ right: String) throws -> String {
    let query =
        "ATTACH '\(right)' AS o; SELECT (SELECT count(*) FROM (SELECT key, value FROM main.kv "
        + "EXCEPT SELECT key, value FROM o.kv)) + (SELECT count(*) FROM (SELECT key, value FROM o.kv EXCEPT "
        + "SELECT key, value FROM main.kv))"
    return try runChild("/usr/bin/sqlite3", [left, query]).output.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// The largest sync's peak memory against its budget, and each size's time against the size before it: a sync of
/// ten times the keys may take at most eleven times as long (linear, with a tenth to spare).
private func reportGrowth(_ medians: [(keys: Int, run: ChildRun)]) {
    let budget = 100.0
    if let largest = medians.max(by: { $0.keys < $1.keys }) {
        print(
            "sync: \(largest.keys) keys, peak memory \(String(format: "%.1f", largest.run.peakMegabytes)) MB "
                + "(target ≤ \(Int(budget)) MB): \(largest.run.peakMegabytes <= budget ? "met" : "NOT MET")")
    }
    for (smaller, larger) in zip(medians, medians.dropFirst()) where larger.keys > smaller.keys {
        let factor = Double(larger.keys) / Double(smaller.keys)
        let allowed = factor * 1.1
        let growth = larger.run.seconds / smaller.run.seconds
        print(
            "sync: \(larger.keys) keys took \(String(format: "%.2f", growth))× the time of \(smaller.keys) "
                + "(\(String(format: "%.0f", factor))× the keys; target ≤ \(String(format: "%.1f", allowed))×): "
                + (growth <= allowed ? "met" : "NOT MET"))
    }
}

/// The same sync with its state in PostgreSQL, `runs` times; returns the median run.
///
/// Each run starts from its own schema and fresh copies of the databases as they were before the first sync, makes
/// its snapshot with an untimed first sync, applies the changes, and settles the server (`CHECKPOINT`,
/// `VACUUM ANALYZE`) as the SQLite-state runs settle their copied files (`sync`), so no run pays for its setup's
/// writes.
private func benchPostgresState(count: Int, runs: Int, in directory: String) async throws -> ChildRun {
    let url = try await benchPostgres()
    let connection = try PostgresConnection.connectBlocking(url)
    defer { connection.closeBlocking() }
    var timed: [ChildRun] = []
    for run in 0..<runs {
        let schema = "sync_\(count)_\(getpid())_\(run)"
        let a = directory + "/pg-run-a.db"
        let b = directory + "/pg-run-b.db"
        try benchShell("rm -f '\(a)'* '\(b)'* && cp '\(directory)/pg-a.db' '\(a)' && cp '\(directory)/pg-b.db' '\(b)'")
        let pipeline = try writeSyncPipeline(
            "syncbenchpg", a: a, b: b, state: "{ postgresql: \"${env:\(benchStateVariable)}\", schema: \(schema) }",
            in: directory)
        let executable = Bundle.main.executablePath ?? CommandLine.arguments[0]
        _ = try runChild(executable, ["--sync-child", pipeline])
        try applyChanges(a: a, b: b, count: count)
        try benchShell("sync")
        try connection.blocking { session throws(PostgresError) in
            try session.executeScript("CHECKPOINT")
            try session.executeScript("VACUUM ANALYZE")
        }
        timed.append(try runChild(executable, ["--sync-child", pipeline]))
        try connection.blocking { session throws(PostgresError) in
            try session.executeScript("DROP SCHEMA \(schema) CASCADE")
        }
    }
    return ChildRun.medianRun(timed)
}

/// Writes the benchmark's pipeline `name` (a sync between SQLite files `a` and `b`, its state at `state`) into
/// `directory`; returns its path.
///
/// The sync compares in full (`incremental: false`), as the SQL beside it does: by default it would read only the
/// changes from the files' change feeds.
private func writeSyncPipeline(_ name: String, a: String, b: String, state: String, in directory: String) throws
    -> String
{
    let file = directory + "/\(name).yaml"
    try """
    version: 1
    name: \(name)
    state: \(state)
    providers:
      a: { type: sqlite, path: \(a) }
      b: { type: sqlite, path: \(b) }
    store:
      providers: [a, b]
    jobs:
      - { type: sync, name: sync, incremental: false }
    report: { path: \(directory)/\(name)-report.json }
    """.write(toFile: file, atomically: true, encoding: .utf8)
    return file
}

/// SQL inserting the benchmark's rows `0..<count` that `condition` (on `i`) keeps, at `version`.
func rows(_ count: Int, where condition: String, version: String, updated: Int) -> String {
    "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < \(count - 1)) "
        + "INSERT OR REPLACE INTO kv (key, value, updated_at_ms) SELECT printf('settings/item-%09d', i), "
        + "'{\\\"index\\\":' || i || ',\\\"version\\\":\\\"' || \(version) || "
        + "'\\\",\\\"padding\\\":\\\"0123456789abcdef0123456789abcdef\\\"}', \(updated) FROM n WHERE \(condition)"
}

/// The changes since the first sync, in SQL: 5% missing on b written to a, 10% changed on a, 1% deleted from b.
private func applyChanges(a: String, b: String, count: Int) throws {
    try benchShell(
        "sqlite3 '\(a)' \"\(rows(count, where: "i % 20 = 1 OR i % 10 = 2", version: "(CASE WHEN i % 10 = 2 THEN 'v2' ELSE 'v1' END)", updated: 1))\""
    )
    try benchShell("sqlite3 '\(b)' \"DELETE FROM kv WHERE CAST(substr(key, 15) AS INTEGER) % 100 = 3\"")
}

private func report(
    count: Int, prepared: Duration, first: ChildRun, ours: ChildRun, theirs: ChildRun, same: ChildRun,
    agreement: String, postgres: ChildRun?, runs: Int
) {
    let expectedRepairs = (0..<count).filter { isMissing($0) || isChanged($0) }.count
    let expectedDeletes = (0..<count).filter(isDeleted).count
    print(
        "sync \(count) keys: setup \(String(format: "%.1f", Double(prepared.components.seconds))) s; first sync "
            + "(snapshot) \(String(format: "%.2f", first.seconds)) s, peak \(String(format: "%.1f", first.peakMegabytes)) MB"
    )
    print("  counts: \(ours.output.trimmingCharacters(in: .whitespacesAndNewlines))")
    print("  expected: repaired=\(expectedRepairs) deleted=\(expectedDeletes)")
    print("  medians of \(runs) runs")
    let label = "sync: \(count) keys, 10% changed 5% missing 1% deleted".padding(
        toLength: 52, withPad: " ", startingAt: 0)
    print(
        "\(label) \(String(format: "%7.2f", ours.seconds)) s  \(String(format: "%6.1f", ours.peakMegabytes)) MB  "
            + "sqlite3 \(String(format: "%6.2f", theirs.seconds)) s  \(String(format: "%5.1f", theirs.peakMegabytes)) MB  "
            + "ratio \(String(format: "%.2f", ours.seconds / theirs.seconds))  "
            + "(CPU \(String(format: "%.2f", ours.cpuSeconds)) s vs \(String(format: "%.2f", theirs.cpuSeconds)) s)")
    let sameLabel = "sync: \(count) keys, beside the same-work SQL sync".padding(
        toLength: 52, withPad: " ", startingAt: 0)
    print(
        "\(sameLabel) \(String(format: "%7.2f", ours.seconds)) s  "
            + "sqlite3 \(String(format: "%6.2f", same.seconds)) s  \(String(format: "%5.1f", same.peakMegabytes)) MB  "
            + "ratio \(String(format: "%.2f", ours.seconds / same.seconds))  "
            + "(CPU \(String(format: "%.2f", ours.cpuSeconds)) s vs \(String(format: "%.2f", same.cpuSeconds)) s, "
            + "\(String(format: "%.2f", ours.cpuSeconds / same.cpuSeconds))×)"
            + (agreement.isEmpty ? "" : "; end states \(agreement)"))
    if let postgres {
        print("  PostgreSQL state counts: \(postgres.output.trimmingCharacters(in: .whitespacesAndNewlines))")
        let label = "sync: \(count) keys, state in PostgreSQL".padding(toLength: 52, withPad: " ", startingAt: 0)
        print(
            "\(label) \(String(format: "%7.2f", postgres.seconds)) s  \(String(format: "%6.1f", postgres.peakMegabytes)) MB  "
                + "SQLite state \(String(format: "%6.2f", ours.seconds)) s  "
                + "ratio \(String(format: "%.2f", postgres.seconds / ours.seconds)) (target ≤ 1.50)  "
                + "(CPU \(String(format: "%.2f", postgres.cpuSeconds)) s vs \(String(format: "%.2f", ours.cpuSeconds)) s)"
        )
    }
}
