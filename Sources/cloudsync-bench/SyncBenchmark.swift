// The sync benchmark (`cloudsync-bench --sync 1000000,10000000`): a sync job between two SQLite providers with 10%
// of the values changed, 5% of the keys missing on one side and 1% deleted since the last sync, run in a child process
// under GNU time so its peak memory (maximum resident set) is the job's own, beside the `sqlite3` shell doing the same repair in SQL.
// Up to 1,000,000 keys the same sync runs again with its state in PostgreSQL, beside the run with SQLite state.
import CloudSync
import CloudSyncLocal
import CloudSyncPipeline
import CloudSyncPostgres
import CloudSyncSQLite
import Foundation

/// Runs the sync benchmark when the arguments ask for it (`--sync SIZES`, or `--sync-child FILE` in the child it
/// starts), then exits; returns at once otherwise.
func syncBenchmark(_ arguments: [String]) async throws {
    if let index = arguments.firstIndex(of: "--sync-child"), index + 1 < arguments.count {
        exit(await runSyncChild(pipeline: arguments[index + 1]))
    }
    guard let index = arguments.firstIndex(of: "--sync") else { return }
    let sizes =
        index + 1 < arguments.count
        ? arguments[index + 1].split(separator: ",").compactMap { Int($0) } : [1_000_000, 10_000_000]
    let runs = arguments.firstIndex(of: "--runs").flatMap { $0 + 1 < arguments.count ? Int(arguments[$0 + 1]) : nil }
    print(machineLine(when: "at start"))
    var medians: [(keys: Int, run: ChildRun)] = []
    for size in sizes { medians.append((size, try await benchSync(keys: size, runs: max(1, runs ?? 3)))) }
    reportGrowth(medians)
    exit(0)
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
private func shell(_ command: String) throws {
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
    let a = directory + "/a.db"
    let b = directory + "/b.db"
    for path in [a, b] { await (try SQLiteProvider(path: path)).close() }
    let build = ContinuousClock.now
    for path in [a, b] {
        try shell("sqlite3 '\(path)' \"\(rows(count, where: "i % 20 != 1", version: "'v1'", updated: 0))\"")
    }
    // The PostgreSQL-state run starts from copies of the same two databases.
    let withPostgres = count <= 1_000_000
    if withPostgres { try shell("cp '\(a)' '\(directory)/pg-a.db' && cp '\(b)' '\(directory)/pg-b.db'") }
    let pipeline = try writeSyncPipeline("syncbench", a: a, b: b, state: directory + "/state", in: directory)
    let executable = Bundle.main.executablePath ?? CommandLine.arguments[0]
    let first = try runChild(executable, ["--sync-child", pipeline])
    try applyChanges(a: a, b: b, count: count)
    // What every timed run starts from: the prepared databases and state, copied back before each run.
    try shell(
        "mkdir '\(directory)/prepared' && cp -a '\(directory)'/a.db* '\(directory)'/b.db* '\(directory)/state' "
            + "'\(directory)/prepared/'")
    let prepared = ContinuousClock.now - build

    let script = directory + "/repair.sql"
    try """
    ATTACH '\(directory)/sql-a.db' AS a;
    BEGIN;
    INSERT OR REPLACE INTO main.kv (key, value, updated_at_ms)
      SELECT a.kv.key, a.kv.value, a.kv.updated_at_ms FROM a.kv LEFT JOIN main.kv AS b ON b.key = a.kv.key
      WHERE b.key IS NULL OR b.value <> a.kv.value;
    COMMIT;
    """.write(toFile: script, atomically: true, encoding: .utf8)
    var ours: [ChildRun] = []
    var theirs: [ChildRun] = []
    for run in 0..<runs {
        if run > 0 {
            try shell(
                "rm -rf '\(directory)'/a.db* '\(directory)'/b.db* '\(directory)/state' && "
                    + "cp -a '\(directory)'/prepared/* '\(directory)/'")
        }
        try shell(
            "cp '\(directory)/prepared/a.db' '\(directory)/sql-a.db' && "
                + "cp '\(directory)/prepared/b.db' '\(directory)/sql-b.db' && sync")
        ours.append(try runChild(executable, ["--sync-child", pipeline]))
        theirs.append(try runChild("/usr/bin/sqlite3", [directory + "/sql-b.db"], input: script))
        print(
            String(
                format: "  run %d: ours %.2f s (CPU %.2f s), sqlite3 %.2f s (CPU %.2f s)", run + 1, ours[run].seconds,
                ours[run].cpuSeconds, theirs[run].seconds, theirs[run].cpuSeconds))
    }
    let postgres = withPostgres ? try await benchPostgresState(count: count, runs: runs, in: directory) : nil
    report(
        count: count, prepared: prepared, first: first, ours: ChildRun.medianRun(ours),
        theirs: ChildRun.medianRun(theirs),
        postgres: postgres, runs: runs)
    return ChildRun.medianRun(ours)
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
        try shell("rm -f '\(a)'* '\(b)'* && cp '\(directory)/pg-a.db' '\(a)' && cp '\(directory)/pg-b.db' '\(b)'")
        let pipeline = try writeSyncPipeline(
            "syncbenchpg", a: a, b: b, state: "{ postgresql: \"${env:\(benchStateVariable)}\", schema: \(schema) }",
            in: directory)
        let executable = Bundle.main.executablePath ?? CommandLine.arguments[0]
        _ = try runChild(executable, ["--sync-child", pipeline])
        try applyChanges(a: a, b: b, count: count)
        try shell("sync")
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
      - { type: sync, name: sync }
    report: { path: \(directory)/\(name)-report.json }
    """.write(toFile: file, atomically: true, encoding: .utf8)
    return file
}

/// SQL inserting the benchmark's rows `0..<count` that `condition` (on `i`) keeps, at `version`.
private func rows(_ count: Int, where condition: String, version: String, updated: Int) -> String {
    "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < \(count - 1)) "
        + "INSERT OR REPLACE INTO kv (key, value, updated_at_ms) SELECT printf('settings/item-%09d', i), "
        + "'{\\\"index\\\":' || i || ',\\\"version\\\":\\\"' || \(version) || "
        + "'\\\",\\\"padding\\\":\\\"0123456789abcdef0123456789abcdef\\\"}', \(updated) FROM n WHERE \(condition)"
}

/// The changes since the first sync, in SQL: 5% missing on b written to a, 10% changed on a, 1% deleted from b.
private func applyChanges(a: String, b: String, count: Int) throws {
    try shell(
        "sqlite3 '\(a)' \"\(rows(count, where: "i % 20 = 1 OR i % 10 = 2", version: "(CASE WHEN i % 10 = 2 THEN 'v2' ELSE 'v1' END)", updated: 1))\""
    )
    try shell("sqlite3 '\(b)' \"DELETE FROM kv WHERE CAST(substr(key, 15) AS INTEGER) % 100 = 3\"")
}

private func report(
    count: Int, prepared: Duration, first: ChildRun, ours: ChildRun, theirs: ChildRun, postgres: ChildRun?, runs: Int
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
