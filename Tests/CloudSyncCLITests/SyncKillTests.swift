import CloudSync
import CloudSyncLocal
import CloudSyncSQLite
import CloudSyncTesting
import Foundation
import Testing

/// A sync killed with SIGKILL part of the way through leaves a snapshot the next run can trust.
@Suite(.timeLimit(.minutes(10))) struct SyncKillTests {
    @Test func aSyncKilledMidRunLeavesASnapshotTheNextRunsTrust() async throws {
        let executable = try ProcessRunner.builtProduct("cloudsync")
        let directory = try TemporaryDirectory()
        let count = 2500
        let items = (0..<count).map { "      k\($0): v\($0)\n" }.joined()
        let file = directory.file("killed.yaml")
        try
            ("version: 1\nname: killed\nproviders:\n  seed:\n    type: memory\n    items:\n\(items)"
            + "  files: { type: directory, path: data/files, create: true }\n"
            + "store:\n  providers: [seed, files]\njobs:\n  - { type: sync, name: nightly, maxDeletes: 10 }\n")
            .write(toFile: file, atomically: true, encoding: .utf8)
        let process = try RunningProcess(
            executable, ["run", file, "--quiet", "--report", directory.file("killed.json")])
        // Past the first page (1,000 keys, whose snapshot rows commit after its writes), then SIGKILL.
        let files = directory.file("data/files")
        try await process.signal(SIGKILL, once: { RunningProcess.entries(in: files) >= 1300 }, within: 60)
        #expect(await process.exited().status == SIGKILL, "the run was killed, not ended")

        /// Key files, leaving out a temporary file the killed write may have left.
        func keyFiles() throws -> Int {
            try FileManager.default.contentsOfDirectory(atPath: directory.file("data/files")).filter {
                !$0.hasPrefix(".")
            }.count
        }
        func run() async throws -> [String: Any] {
            let result = try await ProcessRunner.run(executable, ["run", file, "--report", "-", "--quiet"])
            #expect(result.status == 0, "\(result.standardError)")
            let report = try #require(
                try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any])
            return try #require((report["jobs"] as? [[String: Any]])?.first)
        }
        #expect(try keyFiles() < count, "the run was killed before it finished")
        // The next run finishes the copy and deletes nothing.
        let resumed = try await run()
        #expect((resumed["counts"] as? [String: Int])?["deleted"] == 0)
        #expect((resumed["sync"] as? [String: Any])?["firstRun"] as? Bool == true, "the killed run never finished")
        #expect(try keyFiles() == count)
        // A deletion after that propagates: exactly the deleted keys, none of those the killed run touched.
        for index in [3, 1100, 2400] {
            try FileManager.default.removeItem(atPath: directory.file("data/files/k\(index)"))
        }
        let after = try await run()
        #expect((after["counts"] as? [String: Int])?["deleted"] == 3)
        #expect((after["sync"] as? [String: Any])?["deletions"] as? [String] == ["k1100", "k2400", "k3"])
    }

    /// An incremental sync killed part of the way through leaves the last clean run's cursors, so the next
    /// incremental run reads the same changes again and finishes the job.
    @Test func anIncrementalSyncKilledMidRunIsFinishedByTheNextIncrementalRun() async throws {
        let executable = try ProcessRunner.builtProduct("cloudsync")
        let directory = try TemporaryDirectory()
        // Enough keys that the run is still going when the watcher, polling a fresh connection, sees it under way.
        let count = 60_000
        let source = try SQLiteProvider(id: "src", path: directory.file("data/src.db"))
        _ = try await source.set((0..<count).map { KeyValue("k\($0)", "v\($0)") })
        await source.close()
        let file = directory.file("incremental.yaml")
        try """
        version: 1
        name: incremental
        providers:
          src: { type: sqlite, path: data/src.db }
          dst: { type: sqlite, path: data/dst.db, create: true }
        store: { providers: [src, dst] }
        jobs:
          - { type: sync, name: nightly, maxDeletes: 10, incremental: true }
        """.write(toFile: file, atomically: true, encoding: .utf8)
        func run() async throws -> [String: Any] {
            let result = try await ProcessRunner.run(executable, ["run", file, "--report", "-", "--quiet"])
            #expect(result.status == 0, "\(result.standardError)")
            let report = try #require(
                try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any])
            return try #require((report["jobs"] as? [[String: Any]])?.first)
        }
        func modes(_ job: [String: Any]) -> [String: String]? {
            (job["sync"] as? [String: Any])?["modes"] as? [String: String]
        }
        let first = try await run()
        #expect(modes(first) == ["src": "full", "dst": "full"])
        let second = try await run()
        #expect(modes(second) == ["src": "incremental", "dst": "incremental"])

        // Every value edited and three keys removed on the source, then a run killed part of the way through.
        let editor = try SQLiteProvider(id: "src", path: directory.file("data/src.db"))
        _ = try await editor.set((0..<count).map { KeyValue("k\($0)", "w\($0)") })
        _ = try await editor.remove(["k3", "k1100", "k2400"])
        await editor.close()
        let process = try RunningProcess(
            executable, ["run", file, "--quiet", "--report", directory.file("killed.json")])
        /// Edited values and keys the destination holds, read by a connection of its own.
        let path = directory.file("data/dst.db")
        let destination: @Sendable () throws -> (edited: Int, total: Int) = {
            let watcher = try SQLiteDatabase(path: path, options: SQLiteDatabase.Options(readOnly: true))
            defer { watcher.close() }
            return try watcher.read { db in
                (
                    try db.query("SELECT count(*) FROM kv WHERE value LIKE 'w%'") { Int($0.int64(0)) }.first ?? 0,
                    try db.query("SELECT count(*) FROM kv") { Int($0.int64(0)) }.first ?? 0
                )
            }
        }
        // Killed as soon as its first edits land.
        try await process.signal(SIGKILL, once: { try destination().edited > 0 }, within: 60)
        #expect(await process.exited().status == SIGKILL, "the run was killed, not ended")
        #expect(try destination().edited < count - 3, "the run was killed before it finished")

        // The next run starts from the cursors of the last clean run: still incremental, and it finishes the job.
        let resumed = try await run()
        #expect(modes(resumed) == ["src": "incremental", "dst": "incremental"])
        #expect((resumed["counts"] as? [String: Int])?["deleted"] == 3)
        let (edited, total) = try destination()
        #expect(edited == count - 3 && total == count - 3)
        let quiet = try await run()
        #expect((quiet["counts"] as? [String: Int])?["deleted"] == 0)
        #expect((quiet["counts"] as? [String: Int])?["repaired"] == 0)
    }
}
