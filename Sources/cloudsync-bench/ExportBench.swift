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
    func pipeline(_ name: String, job: String) throws -> String {
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
    let executable = Bundle.main.executablePath ?? CommandLine.arguments[0]
    var rows: [BenchRow] = []
    for sealed in [false, true] {
        let codec = sealed ? ", codec: vault" : ""
        let file = sealed ? "export-sealed.json" : "export.json"
        let export = try pipeline(
            sealed ? "export-sealed" : "export", job: "{ type: export, from: source, path: \(file)\(codec) }")
        let load = try pipeline(
            sealed ? "import-sealed" : "import", job: "{ type: import, path: \(file), to: target }")
        var exports: [ChildRun] = []
        var imports: [ChildRun] = []
        for _ in 0..<context.runs {
            exports.append(try runChild(executable, ["--sync-child", export]))
            try? FileManager.default.removeItem(atPath: directory + "/target-\(sealed ? "import-sealed" : "import").db")
            imports.append(try runChild(executable, ["--sync-child", load]))
        }
        let kind = sealed ? "encrypted" : "plain"
        rows.append(
            BenchRow(
                measure: "export \(count.formatted()) × 1 KB sqlite → file, \(kind): CPU s", unit: "s",
                ours: median(exports.map(\.cpuSeconds)), peerName: sealed ? nil : "sqlite3 -json",
                peer: nil, target: nil, runs: context.runs))
        rows.append(
            .peakMemory("export \(count.formatted()) × 1 KB, \(kind): peak memory", of: exports, runs: context.runs))
        rows.append(
            BenchRow(
                measure: "import \(count.formatted()) × 1 KB file → sqlite, \(kind): CPU s", unit: "s",
                ours: median(imports.map(\.cpuSeconds)), peerName: nil, peer: nil, target: nil, runs: context.runs))
        rows.append(
            .peakMemory("import \(count.formatted()) × 1 KB, \(kind): peak memory", of: imports, runs: context.runs))
    }
    // The peers: the same rows out as JSON and back in, by the sqlite3 shell.
    var shellExports: [ChildRun] = []
    var shellImports: [ChildRun] = []
    let script = directory + "/import.sql"
    try """
    CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL, updated_at_ms INTEGER NOT NULL);
    INSERT OR REPLACE INTO kv SELECT json_extract(value, '$.key'), json_extract(value, '$.value'), 0
      FROM json_each(readfile('\(directory)/shell.json'));
    """.write(toFile: script, atomically: true, encoding: .utf8)
    for _ in 0..<context.runs {
        let dump = try runChild(
            "/bin/sh",
            ["-c", "sqlite3 -json '\(source)' 'SELECT key, value FROM kv ORDER BY key' > '\(directory)/shell.json'"])
        shellExports.append(dump)
        try? FileManager.default.removeItem(atPath: directory + "/shell-target.db")
        shellImports.append(try runChild("/usr/bin/sqlite3", [directory + "/shell-target.db"], input: script))
    }
    rows[0].peer = median(shellExports.map(\.cpuSeconds))
    rows[0].target = .atMost(3.0)
    rows[2].peerName = "sqlite3 json_each"
    rows[2].peer = median(shellImports.map(\.cpuSeconds))
    rows[2].target = .atMost(3.0)
    try context.shell("rm -rf '\(directory)'")
    return rows
}
