import CloudSyncLocal
import Foundation

/// `export` and `import` of 100,000 × 1 KB from and into the sqlite provider, plain and encrypted, each a `cloudsync
/// run` of its own in a child process (so its CPU time and peak memory are the job's), beside the `sqlite3` shell
/// writing the same rows as JSON (`-json`) and reading them back (`json_each(readfile(…))`).
func benchExport(_ context: BenchContext) async throws -> [BenchRow] {
    guard context.has("sqlite3") else {
        print("export: skipped (needs the sqlite3 shell: apt-get install sqlite3)")
        return []
    }
    let count = 100_000
    let directory = try context.directory("export")
    let source = directory + "/source.db"
    await (try SQLiteProvider(path: source)).close()
    try context.shell(
        "sqlite3 '\(source)' \"WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < \(count - 1)) "
            + "INSERT INTO kv (key, value, updated_at_ms) SELECT printf('settings/item-%06d', i), "
            + "printf('%06d', i) || replace(hex(zeroblob(1018)), '00', 'x'), 0 FROM n\"")
    try Data(repeating: 7, count: 32).base64EncodedString().write(
        toFile: directory + "/bench.key", atomically: true, encoding: .utf8)
    var rows: [BenchRow] = []
    for sealed in [false, true] {
        rows += try exportRows(sealed: sealed, count: count, in: directory, runs: context.runs)
    }
    let (shellExports, shellImports) = try shellPeerRuns(source: source, in: directory, runs: context.runs)
    rows[0].peer = median(shellExports.map(\.cpuSeconds))
    rows[0].target = .atMost(3.0)
    rows[2].peerName = "sqlite3 json_each"
    rows[2].peer = median(shellImports.map(\.cpuSeconds))
    rows[2].target = .atMost(3.0)
    try context.shell("rm -rf '\(directory)'")
    return rows
}

/// Writes the pipeline `name` (the source database, a target database of its own, the `vault` codec) with its one
/// `job` into `directory`; returns its path.
private func exportPipeline(_ name: String, job: String, in directory: String) throws -> String {
    let path = directory + "/\(name).yaml"
    try """
    version: 1
    name: \(name)
    state: state-\(name)
    providers:
      source: { type: sqlite, path: source.db }
      target: { type: sqlite, path: target-\(name).db, create: true }
    codecs:
      vault: { type: xchacha20poly1305, keys: [{ id: bench, file: bench.key }] }
    store:
      providers: [source]
    jobs:
      - \(job)
    report: { path: report-\(name).json }
    """.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

/// `runs` exports of the `count` keys to a file, and imports of that file into a fresh target, plain or `sealed`,
/// each a child run: their CPU seconds and peak memory, in four rows.
private func exportRows(sealed: Bool, count: Int, in directory: String, runs: Int) throws -> [BenchRow] {
    let executable = Bundle.main.executablePath ?? CommandLine.arguments[0]
    let codec = sealed ? ", codec: vault" : ""
    let file = sealed ? "export-sealed.json" : "export.json"
    let export = try exportPipeline(
        sealed ? "export-sealed" : "export", job: "{ type: export, from: source, path: \(file)\(codec) }",
        in: directory)
    let load = try exportPipeline(
        sealed ? "import-sealed" : "import", job: "{ type: import, path: \(file), to: target }", in: directory)
    var exports: [ChildRun] = []
    var imports: [ChildRun] = []
    for _ in 0..<runs {
        exports.append(try runChild(executable, ["--sync-child", export]))
        try? FileManager.default.removeItem(atPath: directory + "/target-\(sealed ? "import-sealed" : "import").db")
        imports.append(try runChild(executable, ["--sync-child", load]))
    }
    let kind = sealed ? "encrypted" : "plain"
    return [
        BenchRow(
            measure: "export \(count.formatted()) × 1 KB sqlite → file, \(kind): CPU s", unit: "s",
            ours: median(exports.map(\.cpuSeconds)), peerName: sealed ? nil : "sqlite3 -json",
            peer: nil, target: nil, runs: runs),
        .peakMemory("export \(count.formatted()) × 1 KB, \(kind): peak memory", of: exports, runs: runs),
        BenchRow(
            measure: "import \(count.formatted()) × 1 KB file → sqlite, \(kind): CPU s", unit: "s",
            ours: median(imports.map(\.cpuSeconds)), peerName: nil, peer: nil, target: nil, runs: runs),
        .peakMemory("import \(count.formatted()) × 1 KB, \(kind): peak memory", of: imports, runs: runs),
    ]
}

/// The peers: the same rows out of `source` as JSON and back into a fresh database, by the sqlite3 shell, `runs`
/// times each.
private func shellPeerRuns(source: String, in directory: String, runs: Int) throws -> (
    exports: [ChildRun], imports: [ChildRun]
) {
    var shellExports: [ChildRun] = []
    var shellImports: [ChildRun] = []
    let script = directory + "/import.sql"
    try """
    CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL, updated_at_ms INTEGER NOT NULL);
    INSERT OR REPLACE INTO kv SELECT json_extract(value, '$.key'), json_extract(value, '$.value'), 0
      FROM json_each(readfile('\(directory)/shell.json'));
    """.write(toFile: script, atomically: true, encoding: .utf8)
    for _ in 0..<runs {
        let dump = try runChild(
            "/bin/sh",
            ["-c", "sqlite3 -json '\(source)' 'SELECT key, value FROM kv ORDER BY key' > '\(directory)/shell.json'"])
        shellExports.append(dump)
        try? FileManager.default.removeItem(atPath: directory + "/shell-target.db")
        shellImports.append(try runChild("/usr/bin/sqlite3", [directory + "/shell-target.db"], input: script))
    }
    return (shellExports, shellImports)
}
