import CloudSync
import CloudSyncTesting
import Foundation
import Testing

/// Dry runs of a pipeline reading a SQLite database while another process keeps rewriting it: each reads one
/// consistent state of the file, never crashes, and never calls the healthy database damaged.
@Suite(.enabled(if: StressSize.isEnabled, "a stress suite: CLOUDSYNC_STRESS=1 or full"))
struct DryRunBesideWriterStressTests {
    let executable: String
    let directory: TemporaryDirectory
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    init() throws {
        executable = try ProcessRunner.builtProduct("cloudsync")
        directory = try TemporaryDirectory()
    }

    /// Keys in every state the writer leaves: more than one listing page (1000), so a dry run that did not read
    /// through one transaction would mix two states.
    static let keysPerState = 1500

    /// Rewrites the database in a loop, one transaction at a time, each replacing every key with a new generation's,
    /// opening and closing the database each time (so each close checkpoints the log into the file and removes it).
    static let writer = """
        import os, sqlite3, sys
        path, count, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3]
        setup = sqlite3.connect(path, isolation_level=None)
        setup.execute("PRAGMA journal_mode = WAL")
        setup.execute("CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL, "
                      "updated_at_ms INTEGER NOT NULL) WITHOUT ROWID")
        setup.execute("BEGIN IMMEDIATE")
        setup.executemany("INSERT INTO kv VALUES (?, ?, 0)", [("g0-%05d" % i, "v" * (1 + i % 700)) for i in range(count)])
        setup.execute("COMMIT")
        setup.close()
        print("ready", flush=True)
        generation = 1
        while not os.path.exists(stop):
            db = sqlite3.connect(path, isolation_level=None, timeout=30)
            db.execute("BEGIN IMMEDIATE")
            db.execute("DELETE FROM kv")
            db.executemany("INSERT INTO kv VALUES (?, ?, 0)",
                           [("g%d-%05d" % (generation, i), "w" * (1 + (i + generation) % 700)) for i in range(count)])
            db.execute("COMMIT")
            db.close()
            generation += 1
        print("generations", generation, flush=True)
        """

    @Test func dryRunsBesideAWriterReadOneStateAndNeverCrash() async throws {
        let python = root + "/.build/pyenv/bin/python3"
        try #require(
            FileManager.default.isExecutableFile(atPath: python),
            "the tests' Python environment is missing: run make test")
        let (ready, writer, failures) = try await offPool { try dryRunsBesideAWriter(python: python) }
        #expect(ready == "ready", "the writer printed \(ready ?? "nothing")")
        #expect(writer.status == 0, "the writer: \(writer.standardError)")
        #expect(failures.isEmpty, "\(failures.count) of \(Self.runs) dry runs: \(failures.prefix(5))")
    }

    static let runs = 60

    /// Runs the dry runs beside the writer (on a thread of its own: it blocks); returns the writer's first line, how
    /// it ended, and a line for each dry run that went wrong.
    private func dryRunsBesideAWriter(python: String) throws -> (String?, ProcessResult, [String]) {
        try FileManager.default.createDirectory(atPath: directory.file("data"), withIntermediateDirectories: true)
        let file = directory.file("beside.yaml")
        try """
        version: 1
        name: beside
        providers:
          shared: { type: sqlite, path: data/shared.db }
          copy: { type: memory }
        store:
          providers: [shared]
        jobs:
          - { type: migrate, from: shared, to: copy }

        """.write(toFile: file, atomically: true, encoding: .utf8)
        let stop = directory.file("stop")
        let writer = try RunningProcess(
            niced,
            ["-n", "10", python, "-c", Self.writer, directory.file("data/shared.db"), "\(Self.keysPerState)", stop])
        let ready = writer.nextLine(timeout: .seconds(60))
        let runs = Self.runs
        let failures = Protected<[String]>([])
        let next = Protected(0)
        let workers = DispatchGroup()
        for _ in 0..<3 {
            workers.enter()
            Thread.detachNewThread {
                defer { workers.leave() }
                while true {
                    let attempt = next.withLock { value -> Int in
                        defer { value += 1 }
                        return value
                    }
                    guard attempt < runs else { return }
                    if let failure = dryRun(file) { failures.withLock { $0.append("dry run \(attempt): \(failure)") } }
                }
            }
        }
        workers.wait()
        FileManager.default.createFile(atPath: stop, contents: nil)
        return (ready, writer.wait(), failures.withLock { $0 })
    }

    /// One dry run; nil when it exited 0 having read exactly one state's keys.
    private func dryRun(_ file: String) -> String? {
        let result: ProcessResult
        do {
            result = try ProcessRunner.runBlocking(
                niced, ["-n", "10", executable, "run", file, "--dry-run", "--report", "-", "--quiet"])
        } catch {
            return "could not start: \(error)"
        }
        let report = try? JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any]
        let job = ((report?["jobs"] as? [[String: Any]]) ?? []).first
        let counts = job?["counts"] as? [String: Int] ?? [:]
        let expected = ["copied": Self.keysPerState, "skipped": 0, "failed": 0]
        guard result.status != 0 || counts.filter({ expected[$0.key] != nil }) != expected else { return nil }
        let error = (job?["error"] as? [String: Any])?["message"] as? String ?? ""
        return "exit \(result.status), counts \(counts.sorted { $0.key < $1.key }), error \(error.prefix(300)), "
            + "stderr \(result.standardError.prefix(300))"
    }
}
