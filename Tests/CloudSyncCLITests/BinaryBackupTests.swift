import CloudSync
import CloudSyncLocal
import CloudSyncTesting
import Foundation
import Testing

/// Backups of a directory of files, binary ones included, through the built binary: stored as bytes, restored byte
/// for byte into a directory and by the independent restore, and named key by key where a provider takes only text.
@Suite(.timeLimit(.minutes(10))) struct BinaryBackupTests {
    let executable: String
    let directory: TemporaryDirectory
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    init() async throws {
        let workspace = try await BackupWorkspace(
            file: "files.yaml",
            pipeline: """
                version: 1
                name: files
                providers:
                  files: { type: directory, path: data/files }
                  vault: { type: directory, path: data/vault, create: true }
                  copy: { type: directory, path: data/copy, create: true }
                  text: { type: sqlite, path: data/text.db, create: true }
                codecs:
                  sealed: { type: xchacha20poly1305, keys: [{ id: k1, file: keys/vault.key }] }
                store: { providers: [files] }
                jobs:
                  - { type: backup, name: backup, from: files, to: vault, codec: sealed }
                  - { type: restore, name: toCopy, from: vault, to: copy, codec: sealed }
                  - { type: restore, name: toText, from: vault, to: text, codec: sealed }
                  - { type: restore, name: toCopyIfDifferent, from: vault, to: copy, codec: sealed, overwrite: ifDifferent }

                """, folders: ["data/files"])
        executable = workspace.executable
        directory = workspace.directory
    }

    /// Writes the source files: random bytes of many sizes (two over the chunking threshold), an empty file, text,
    /// and a large text file; their bytes by key.
    private func writeSource() throws -> [String: [UInt8]] {
        // Seeded, so a failure can be run again.
        var random = SeededRandom(seed: 58)
        var files: [String: [UInt8]] = [:]
        for index in 0..<40 {
            let size = Int.random(in: 0...(64 << 10), using: &random)
            files["blob\(index).bin"] = (0..<size).map { _ in UInt8.random(in: 0...255, using: &random) }
        }
        files["large.raw"] = (0..<(3 << 20)).map { _ in UInt8.random(in: 0...255, using: &random) }
        files["empty.bin"] = []
        files["notes.txt"] = Array("plain text, ✓ UTF-8\n".utf8)
        files["big.log"] = Array(
            (0..<120_000).map { "line \($0) of a long log\n" }.joined().utf8)
        for (key, bytes) in files {
            let path = directory.file("data/files/" + key)
            try FileManager.default.createDirectory(
                atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data(bytes).write(to: URL(fileURLWithPath: path))
        }
        return files
    }

    private func run(_ job: String) async throws -> (status: Int32, job: [String: Any]) {
        let result = try await ProcessRunner.run(
            executable, ["run", directory.file("files.yaml"), "--job", job, "--report", "-", "--quiet"])
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any],
            "\(result.standardError)")
        let jobs = report["jobs"] as? [[String: Any]] ?? []
        return (result.status, jobs.first ?? [:])
    }

    /// The keys whose bytes differ between two trees (or are in one only): short enough to print.
    private func differing(_ found: [String: [UInt8]], _ expected: [String: [UInt8]]) -> [String] {
        Set(found.keys).union(expected.keys).filter { found[$0] != expected[$0] }.sorted()
    }

    /// Every regular file under `folder`, by its path below it.
    private func tree(_ folder: String) throws -> [String: [UInt8]] {
        var found: [String: [UInt8]] = [:]
        let base = directory.file(folder)
        guard let walker = FileManager.default.enumerator(atPath: base) else { return [:] }
        for case let relative as String in walker {
            var isDirectory: ObjCBool = false
            let path = base + "/" + relative
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
                !relative.split(separator: "/").contains(where: { $0.hasPrefix(".") })
            else { continue }
            found[relative] = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        }
        return found
    }

    @Test func binaryFilesBackUpAsBytesAndRestoreByteForByte() async throws {
        let source = try writeSource()
        let backup = try await run("backup")
        let counts = backup.job["counts"] as? [String: Int] ?? [:]
        #expect(
            backup.status == 0 && counts["keys"] == source.count && counts["failed"] == 0,
            "\(counts) \(backup.job["failures"] ?? [])")

        // Packs and index objects are stored as bytes; the config and the snapshot as text.
        let vault = try tree("data/vault")
        let objects = vault.filter {
            $0.key.contains("cloudsync-repo.data.") || $0.key.contains("cloudsync-repo.index.")
        }
        #expect(!objects.isEmpty && objects.values.allSatisfy { $0.first == 0 })
        #expect(
            vault.filter { $0.key.contains("snapshot.") || $0.key.hasSuffix("config") }.values.allSatisfy {
                $0.first != 0 && String(validating: $0, as: UTF8.self) != nil
            })
        // Random bytes do not shrink: the repository is the files and a little, not a third more (base64).
        let stored = vault.values.reduce(0) { $0 + $1.count }
        let given = source.values.reduce(0) { $0 + $1.count }
        #expect(stored < given + given / 20, "\(stored) bytes stored for \(given)")

        let restored = try await run("toCopy")
        #expect(restored.status == 0, "\(restored.job)")
        #expect(differing(try tree("data/copy"), source) == [])
        // Again, writing only what differs: nothing, then the one file changed meanwhile.
        let again = try await run("toCopyIfDifferent")
        let againCounts = again.job["counts"] as? [String: Int] ?? [:]
        #expect(
            againCounts.filter { $0.key != "bytesRead" } == [
                "restored": 0, "unchanged": source.count, "deleted": 0,
                "failed": 0, "heldBack": 0, "bytesWritten": 0,
            ], "\(again.job)")
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: directory.file("data/copy/large.raw")))
        let repaired = try await run("toCopyIfDifferent")
        #expect((repaired.job["counts"] as? [String: Int])?["restored"] == 1, "\(repaired.job)")
        #expect(differing(try tree("data/copy"), source) == [])

        let python = root + "/.build/pyenv/bin/python3"
        if FileManager.default.isExecutableFile(atPath: python) {
            let result = try await ProcessRunner.run(
                python,
                [
                    root + "/scripts/backup_restore.py", "--repository", directory.file("data/vault"), "--key-file",
                    directory.file("keys/vault.key"), "--out-dir", directory.file("python"),
                ])
            #expect(result.status == 0, "\(result.standardError)")
            #expect(differing(try tree("python"), source) == [])
        } else {
            Issue.record("PyNaCl's virtual environment is missing: run `make test`, which creates it")
        }
    }

    /// SQLite stores text: the text files restore (the large one too), and each binary one fails alone, named.
    @Test func aProviderOfTextTakesTheTextAndNamesEveryBinaryKey() async throws {
        let source = try writeSource()
        #expect(try await run("backup").status == 0)
        let restored = try await run("toText")
        let counts = restored.job["counts"] as? [String: Int] ?? [:]
        let failures = restored.job["failures"] as? [[String: Any]] ?? []
        let text = source.filter { String(validating: $0.value, as: UTF8.self) != nil }
        #expect(restored.status == 1)
        #expect(counts["restored"] == text.count && counts["failed"] == source.count - text.count, "\(counts)")
        #expect(Set(failures.compactMap { $0["key"] as? String }) == Set(source.keys).subtracting(text.keys))
        #expect(failures.allSatisfy { $0["code"] as? String == "ERR_UNSUPPORTED" }, "\(failures.prefix(1))")

        let provider = try SQLiteProvider(id: "text", path: directory.file("data/text.db"))
        let keys = text.keys.sorted()
        let values = try await provider.get(keys).map { try $0.get().map { Array($0.utf8) } ?? [] }
        await provider.close()
        #expect(differing(Dictionary(uniqueKeysWithValues: zip(keys, values)), text) == [])
    }
}
