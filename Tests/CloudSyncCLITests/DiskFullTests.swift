import CloudSyncTesting
import Foundation
import Testing

/// Runs on a full disk (a small tmpfs; skipped where the test cannot mount one): every write that did not land is
/// named with a clear error, nothing is reported stored that is not, and nothing is lost — a run with room again
/// converges.
@Suite(.serialized, .timeLimit(.minutes(10))) struct DiskFullTests {
    let executable: String
    let directory: TemporaryDirectory

    init() throws {
        executable = try ProcessRunner.builtProduct("cloudsync")
        directory = try TemporaryDirectory()
    }

    /// Runs `body` with a tmpfs of `kilobytes` mounted at `path`, and unmounts it after, whether `body` threw or not;
    /// does nothing where this process may not mount.
    private func onTmpfs(_ path: String, kilobytes: Int, _ body: () async throws -> Void) async throws {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let mounted = try await run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(kilobytes)k", "tmpfs", path])
        guard mounted.status == 0 else { return }
        let outcome: Result<Void, any Error>
        do {
            try await body()
            outcome = .success(())
        } catch {
            outcome = .failure(error)
        }
        _ = try? await run("/bin/umount", [path])
        try outcome.get()
    }

    /// Runs a process from a thread of its own, leaving the concurrency pool to the tests running meanwhile.
    private func run(_ executable: String, _ arguments: [String]) async throws -> ProcessResult {
        try await ProcessRunner.run(executable, arguments)
    }

    static func items(_ count: Int) -> [String: String] {
        Dictionary(
            uniqueKeysWithValues: (0..<count).map {
                (String(format: "k%03d", $0), String(repeating: "v", count: 3000) + "\($0)")
            })
    }

    private func report(_ result: ProcessResult) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any])
    }

    /// A full disk under the state directory was ERR_CONFIG with the code repeated and the SQL in the message; it is
    /// ERR_QUOTA_EXCEEDED, and the error says the disk is full.
    @Test func aFullDiskUnderTheStateDirectoryIsQuotaExceeded() async throws {
        let mount = directory.file("full")
        try await onTmpfs(mount, kilobytes: 64) {
            // Fill it to the last block.
            #expect(FileManager.default.createFile(atPath: mount + "/fill", contents: nil))
            let filler = try #require(FileHandle(forWritingAtPath: mount + "/fill"))
            while (try? filler.write(contentsOf: Data(count: 4096))) != nil {}
            try? filler.close()
            let path = directory.file("p.yaml")
            try
                ("version: 1\nname: p\nstate: full/state\nproviders: { a: { type: memory } }\n"
                + "store: { providers: [a] }\njobs: [{ type: flush }]\n").write(
                    toFile: path, atomically: true, encoding: .utf8)
            let result = try await run(executable, ["run", path])
            #expect(result.status != 0)
            #expect(result.standardError.contains("Error: ERR_QUOTA_EXCEEDED: "), "\(result.standardError)")
            #expect(result.standardError.contains("the disk under it is full"), "\(result.standardError)")
            #expect(!result.standardError.contains("CREATE TABLE"), "\(result.standardError)")
            #expect(result.standardError.components(separatedBy: "ERR_").count == 2, "\(result.standardError)")
        }
    }

    @Test func directoryAndSQLiteProvidersOnAFullDiskSayWhatDidNotLand() async throws {
        let full = directory.file("full")
        try await onTmpfs(full, kilobytes: 256) {
            let items = Self.items(150)
            let file = directory.file("full.yaml")
            try """
            version: 1
            name: full
            providers:
              seed:
                type: memory
                items:
            \(items.sorted { $0.key < $1.key }.map { "      \($0.key): \($0.value)\n" }.joined())  files: { type: directory, path: full/files, create: true }
              db: { type: sqlite, path: full/db.sqlite, pageSize: 4096, create: true }
            store:
              providers: [files, db]
            jobs:
              - { type: migrate, name: toFiles, from: seed, to: files }
              - { type: migrate, name: toDb, from: seed, to: db }
              - { type: export, name: outFiles, from: files, path: out/files.json }
              - { type: export, name: outDb, from: db, path: out/db.json }

            """.write(toFile: file, atomically: true, encoding: .utf8)
            let result = try await run(executable, ["run", file, "--report", "-", "--quiet"])
            #expect(result.status == 1, "\(result.standardError)")
            let jobs = try report(result)["jobs"] as? [[String: Any]] ?? []
            for (index, name) in [(0, "files"), (1, "db")] {
                let counts = jobs[index]["counts"] as? [String: Int] ?? [:]
                let failures = jobs[index]["failures"] as? [[String: Any]] ?? []
                #expect(counts["failed", default: 0] > 0, "\(name): \(counts)")
                #expect(
                    counts["copied", default: 0] + counts["failed", default: 0] == items.count, "\(name): \(counts)")
                #expect(
                    failures.allSatisfy {
                        $0["code"] as? String == "ERR_QUOTA_EXCEEDED"
                            && ($0["message"] as? String ?? "").contains("full")
                            || ($0["message"] as? String ?? "").contains("No space left")
                    }, "\(name): \(failures.prefix(2))")
                // What the report says was copied is there, whole; nothing it says failed is.
                let exported = try itemsExported(directory.file("out/\(name).json"))
                let failedKeys = Set(failures.compactMap { $0["key"] as? String })
                #expect(exported.count == counts["copied"], "\(name): \(exported.count) exported, \(counts)")
                #expect(exported.allSatisfy { items[$0.key] == $0.value && !failedKeys.contains($0.key) }, "\(name)")
            }
            // With room again, a rerun stores everything.
            _ = try await run("/bin/mount", ["-o", "remount,size=8m", full])
            let rerun = try await run(executable, ["run", file, "--quiet"])
            #expect(rerun.status == 0, "\(rerun.standardError)")
            for name in ["files", "db"] {
                #expect(try itemsExported(directory.file("out/\(name).json")) == items, "\(name)")
            }
        }
    }

    @Test func writesTheOutboxCannotKeepOnAFullDiskAreNamed() async throws {
        let full = directory.file("state")
        try await onTmpfs(full, kilobytes: 128) {
            let items = Self.items(150)
            let input = directory.file("in.json")
            try JSONSerialization.data(withJSONObject: ["version": 1, "count": items.count, "items": items]).write(
                to: URL(fileURLWithPath: input))
            let file = directory.file("queue.yaml")
            try """
            version: 1
            name: queue
            state: state/queue
            providers:
              files: { type: directory, path: data/files, create: true }
              away: { type: s3, bucket: away, endpoint: "http://127.0.0.1:9", accessKeyId: a, secretAccessKey: b }
            store:
              providers: [files, away]
              writeMode: mirror
            jobs:
              - { type: import, path: in.json, to: store }

            """.write(toFile: file, atomically: true, encoding: .utf8)
            let result = try await run(executable, ["run", file, "--report", "-", "--quiet"])
            let parsed = try report(result)
            let job = (parsed["jobs"] as? [[String: Any]] ?? [])[0]
            let counts = job["counts"] as? [String: Int] ?? [:]
            let failures = job["failures"] as? [[String: Any]] ?? []
            let omitted = job["failuresOmitted"] as? Int ?? 0
            let pending = (parsed["outbox"] as? [String: Any])?["pendingAfter"] as? Int ?? -1
            // Every write to `away` is either queued (and counted) or named as not kept; none vanishes.
            #expect(counts["queued"] == pending, "\(counts), pendingAfter \(pending)")
            #expect(
                pending + failures.count + omitted == items.count, "\(counts), \(failures.count) + \(omitted) named")
            #expect(
                failures.allSatisfy {
                    ($0["message"] as? String ?? "").contains("outbox") && $0["provider"] as? String == "away"
                },
                "\(failures.prefix(2))")
            #expect(result.status != 0)
        }
    }

    private func itemsExported(_ path: String) throws -> [String: String] {
        let items = exportedItems(at: path)
        return try #require(items, "\(path)")
    }
}
