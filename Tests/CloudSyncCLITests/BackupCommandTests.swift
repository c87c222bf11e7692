import CloudSync
import CloudSyncLocal
import CloudSyncTesting
import Foundation
import Testing

/// Backups through the built binary: `cloudsync snapshots`, and an independent restore written from
/// docs/backup-format.md alone (`scripts/backup_restore.py`, on PyNaCl) agreeing with `cloudsync restore`.
@Suite(.timeLimit(.minutes(10))) struct BackupCommandTests {
    let executable: String
    let directory: TemporaryDirectory
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    init() async throws {
        let workspace = try await BackupWorkspace(
            file: "nightly.yaml",
            pipeline: """
                version: 1
                name: nightly
                providers:
                  app: { type: sqlite, path: data/app.db, create: true }
                  vault: { type: directory, path: data/vault, create: true }
                  restored: { type: sqlite, path: data/restored.db, create: true }
                codecs:
                  sealed: { type: xchacha20poly1305, keys: [{ id: k1, file: keys/vault.key }] }
                store: { providers: [app] }
                jobs:
                  - { type: backup, name: backup, from: app, to: vault, codec: sealed, tags: [nightly] }
                  - { type: restore, name: restore, from: vault, to: restored, codec: sealed, snapshot: "${env:SNAPSHOT}", deletes: true, maxDeletes: 100% }

                """)
        executable = workspace.executable
        directory = workspace.directory
    }

    private func cloudsync(_ arguments: [String], snapshot: String = "latest") async throws -> ProcessResult {
        try await ProcessRunner.run(
            executable, arguments,
            environment: ProcessInfo.processInfo.environment.merging(["SNAPSHOT": snapshot]) { $1 })
    }

    private func contents(_ name: String) async throws -> [String: String] {
        let provider = try SQLiteProvider(id: name, path: directory.file("data/\(name).db"))
        let keys = try await listEveryKey(of: provider)
        let values = try await provider.get(keys).map { try $0.get() ?? "" }
        await provider.close()
        return Dictionary(uniqueKeysWithValues: zip(keys, values))
    }

    /// What the independent restore gives for `snapshot` (nil: the newest).
    private func pythonRestore(_ snapshot: String?) async throws -> [String: String] {
        let python = root + "/.build/pyenv/bin/python3"
        guard FileManager.default.isExecutableFile(atPath: python) else {
            Issue.record("PyNaCl's virtual environment is missing: run `make test`, which creates it")
            return [:]
        }
        let out = directory.file("python-\(snapshot ?? "latest").json")
        let result = try await ProcessRunner.run(
            python,
            [
                root + "/scripts/backup_restore.py", "--repository", directory.file("data/vault"), "--key-file",
                directory.file("keys/vault.key"), "--out", out,
            ] + (snapshot.map { ["--snapshot", $0] } ?? []))
        #expect(result.status == 0, "\(result.standardError)")
        return try JSONDecoder().decode([String: String].self, from: Data(contentsOf: URL(fileURLWithPath: out)))
    }

    /// One damaged snapshot object hides no other: `snapshots` lists the intact one and names the damaged one
    /// (exit 1), and the intact one restores.
    @Test func aDamagedSnapshotObjectIsNamedAndTheOthersListAndRestore() async throws {
        let file = directory.file("nightly.yaml")
        let app = try SQLiteProvider(id: "app", path: directory.file("data/app.db"))
        let state = (0..<50).map { KeyValue("k\($0)", "v\($0)") }
        _ = try await app.set(state)
        await app.close()
        for _ in 0..<2 { #expect(try await cloudsync(["run", file, "--job", "backup", "--quiet"]).status == 0) }
        let listed = try await cloudsync(["snapshots", file, "--repository", "vault", "--json"])
        let ids = try #require(
            try JSONSerialization.jsonObject(with: Data(listed.standardOutput.utf8)) as? [[String: Any]]
        ).compactMap { $0["id"] as? String }
        #expect(ids.count == 2)
        let damaged = directory.file("data/vault/cloudsync-repo.snapshot.\(ids[0])")
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: damaged)))
        bytes[bytes.count - 10] = bytes[bytes.count - 10] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        try Data(bytes).write(to: URL(fileURLWithPath: damaged))

        let after = try await cloudsync(["snapshots", file, "--repository", "vault", "--json"])
        #expect(after.status == 1)
        let intact = try #require(
            try JSONSerialization.jsonObject(with: Data(after.standardOutput.utf8)) as? [[String: Any]])
        #expect(intact.compactMap { $0["id"] as? String } == [ids[1]])
        #expect(
            after.standardError.contains("cloudsync-repo.snapshot.\(ids[0])")
                && after.standardError.contains("ERR_DECODE"))
        let restore = try await cloudsync(["run", file, "--job", "restore", "--quiet"], snapshot: ids[1])
        #expect(restore.status == 0, "\(restore.standardError)")
        #expect(try await contents("restored") == Dictionary(uniqueKeysWithValues: state.map { ($0.key, $0.value) }))

        // `repair snapshots` names it, and removes it once told to.
        let named = try await cloudsync(["repair", "snapshots", file, "--repository", "vault", "--json"])
        #expect(named.status == 64 && named.standardError.contains("--yes"))
        #expect(named.standardOutput.contains("cloudsync-repo.snapshot.\(ids[0])"))
        #expect(FileManager.default.fileExists(atPath: damaged))
        let removed = try await cloudsync(["repair", "snapshots", file, "--repository", "vault", "--yes"])
        #expect(removed.status == 0, "\(removed.standardError)")
        #expect(!FileManager.default.fileExists(atPath: damaged))
        #expect(try await cloudsync(["snapshots", file, "--repository", "vault"]).status == 0)
    }

    /// `unlock` on a repository without stale locks removes nothing; `--remove-all` asks for `--yes` first.
    @Test func unlockRemovesNothingLiveAndRemoveAllWantsConfirmation() async throws {
        let file = directory.file("nightly.yaml")
        #expect(try await cloudsync(["run", file, "--job", "backup", "--quiet"]).status == 0)
        let plain = try await cloudsync(["unlock", file, "--repository", "vault", "--json"])
        #expect(plain.status == 0, "\(plain.standardError)")
        let figures = try #require(
            try JSONSerialization.jsonObject(with: Data(plain.standardOutput.utf8)) as? [String: [Any]])
        #expect(figures["removed"]?.isEmpty == true && figures["kept"]?.isEmpty == true)
        let unconfirmed = try await cloudsync(["unlock", file, "--repository", "vault", "--remove-all"])
        #expect(unconfirmed.status == 64 && unconfirmed.standardError.contains("--yes"))
        #expect(try await cloudsync(["unlock", file, "--repository", "vault", "--remove-all", "--yes"]).status == 0)
    }

    /// `cloudsync restore` runs one restore without editing the file: into a directory the file does not name, into
    /// one of its providers for the keys asked for, or as a dry run writing nothing; the file's own jobs do not run.
    @Test func restoreIsOneCommandIntoADirectoryOrAProvider() async throws {
        let file = directory.file("nightly.yaml")
        let before = try String(contentsOfFile: file, encoding: .utf8)
        let app = try SQLiteProvider(id: "app", path: directory.file("data/app.db"))
        let state = (0..<40).map { KeyValue("k\($0)", "value ✓ \($0)") }
        _ = try await app.set(state)
        await app.close()
        #expect(try await cloudsync(["run", file, "--job", "backup", "--quiet"]).status == 0)

        let target = directory.file("out/here")
        let whole = try await cloudsync(["restore", file, "--repository", "vault", "--target", target, "--quiet"])
        #expect(whole.status == 0, "\(whole.standardError)")
        for item in state {
            #expect(try String(contentsOfFile: target + "/" + item.key, encoding: .utf8) == item.value)
        }
        #expect(try String(contentsOfFile: file, encoding: .utf8) == before)
        // The file's own restore job (into `restored`) did not run.
        #expect(try await contents("restored").isEmpty)

        let some = try await cloudsync([
            "restore", file, "--repository", "vault", "--to", "restored", "--keys", "k1*", "--report", "-", "--quiet",
        ])
        #expect(some.status == 0, "\(some.standardError)")
        #expect(
            try await contents("restored")
                == Dictionary(
                    uniqueKeysWithValues: state.filter { $0.key.hasPrefix("k1") }.map { ($0.key, $0.value) }))
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(some.standardOutput.utf8)) as? [String: Any])
        #expect((report["jobs"] as? [[String: Any]])?.map { $0["name"] as? String } == ["restore"])

        let dry = directory.file("out/dry")
        let dryRun = try await cloudsync([
            "restore", file, "--repository", "vault", "--target", dry, "--dry-run", "--quiet",
        ])
        #expect(dryRun.status == 0, "\(dryRun.standardError)")
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: dry)) ?? []).isEmpty)

        let both = try await cloudsync(["restore", file, "--repository", "vault", "--to", "restored", "--target", dry])
        #expect(both.status == 64 && both.standardError.contains("--target"))

        // --at chooses by time: the newest snapshot at or before it; none before, and a text that is no time, refused.
        let now = ISO8601DateFormatter().string(from: Date().addingTimeInterval(60))
        let at = try await cloudsync([
            "restore", file, "--repository", "vault", "--target", directory.file("out/at"), "--at", now, "--quiet",
        ])
        #expect(at.status == 0, "\(at.standardError)")
        #expect(try String(contentsOfFile: directory.file("out/at/k1"), encoding: .utf8) == "value ✓ 1")
        let tooEarly = try await cloudsync([
            "restore", file, "--repository", "vault", "--target", dry, "--at", "2001-01-01T00:00:00Z", "--quiet",
        ])
        #expect(tooEarly.status == 2 && tooEarly.standardError.contains("at or before"), "\(tooEarly.standardError)")
        let notATime = try await cloudsync([
            "restore", file, "--repository", "vault", "--target", dry, "--at", "yesterday",
        ])
        #expect(notATime.status == 64 && notATime.standardError.contains("ISO 8601"))
    }

    /// The snapshot ids `snapshots --json` lists, oldest first.
    private func snapshotIDs(_ file: String) async throws -> [String] {
        let listed = try await cloudsync(["snapshots", file, "--repository", "vault", "--json"])
        #expect(listed.status == 0, "\(listed.standardError)")
        let snapshots = try #require(
            try JSONSerialization.jsonObject(with: Data(listed.standardOutput.utf8)) as? [[String: Any]])
        return snapshots.compactMap { $0["id"] as? String }
    }

    /// `forget` is one command: a dry run names what would go (by id, in the JSON report) and removes nothing, no
    /// keep rule is refused, and a forget with --prune leaves the newest snapshot, which restores.
    @Test func forgetIsOneCommandWhoseDryRunNamesWhatWouldGo() async throws {
        let file = directory.file("nightly.yaml")
        let before = try String(contentsOfFile: file, encoding: .utf8)
        var state: [KeyValue] = []
        for round in 0..<3 {
            let app = try SQLiteProvider(id: "app", path: directory.file("data/app.db"))
            state = (0..<30).map { KeyValue("k\($0)", "round \(round) value \($0)") }
            _ = try await app.set(state)
            await app.close()
            #expect(try await cloudsync(["run", file, "--job", "backup", "--quiet"]).status == 0)
        }
        let ids = try await snapshotIDs(file)
        #expect(ids.count == 3)

        let dry = try await cloudsync([
            "forget", file, "--repository", "vault", "--keep-last", "1", "--prune", "--dry-run", "--json", "--quiet",
        ])
        #expect(dry.status == 0, "\(dry.standardError)")
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(dry.standardOutput.utf8)) as? [String: Any])
        let job = try #require((report["jobs"] as? [[String: Any]])?.first)
        let lists = job["keyLists"] as? [String: [String]]
        #expect(lists?["removed"] == Array(ids.prefix(2)) && lists?["kept"] == [ids[2]])
        #expect(try await snapshotIDs(file) == ids)

        for refused in [["--prune"], ["--keep-last", "x"], ["--keep-daily", "-1"]] {
            let result = try await cloudsync(["forget", file, "--repository", "vault"] + refused)
            #expect(result.status == 64 && result.standardError.contains("--keep"), "\(refused)")
        }
        // A value the file would read as a variable is refused, on either command, before anything runs.
        for (command, given) in [
            ("forget", ["--keep-last", "1", "--tag", "${env:HOME}"]), ("forget", ["--keep-within", "${env:HOME}"]),
            ("restore", ["--target", directory.file("out/x"), "--keys", "${env:HOME}"]),
        ] {
            let result = try await cloudsync([command, file, "--repository", "vault"] + given)
            #expect(result.status == 64 && result.standardError.contains("would read as a variable"), "\(given)")
        }
        #expect(try await snapshotIDs(file) == ids)

        let forget = try await cloudsync([
            "forget", file, "--repository", "vault", "--keep-last", "1", "--prune", "--quiet",
        ])
        #expect(forget.status == 0, "\(forget.standardError)")
        #expect(try await snapshotIDs(file) == [ids[2]])
        #expect(try String(contentsOfFile: file, encoding: .utf8) == before)
        let target = directory.file("out/forgotten")
        #expect(
            try await cloudsync(["restore", file, "--repository", "vault", "--target", target, "--quiet"]).status == 0)
        for item in state {
            #expect(try String(contentsOfFile: target + "/" + item.key, encoding: .utf8) == item.value)
        }
    }

    /// A snapshot of more trees than one object names (80,000 keys: about 10,000 trees) names lists of them; the
    /// independent restore follows the lists, and both restores give back every key.
    @Test func aSnapshotOfTensOfThousandsOfKeysNamesTreeListsBothRestoresFollow() async throws {
        let file = directory.file("nightly.yaml")
        let app = try SQLiteProvider(id: "app", path: directory.file("data/app.db"))
        let state = (0..<80_000).map { KeyValue("user/\($0)", "v\($0)") }
        for start in stride(from: 0, to: state.count, by: 10_000) {
            _ = try await app.set(Array(state[start..<(start + 10_000)]))
        }
        await app.close()
        let backup = try await cloudsync(["run", file, "--job", "backup", "--quiet"])
        #expect(backup.status == 0, "\(backup.standardError)")

        let python = root + "/.build/pyenv/bin/python3"
        let out = directory.file("python-many.json")
        let independent = try await ProcessRunner.run(
            python,
            [
                root + "/scripts/backup_restore.py", "--repository", directory.file("data/vault"), "--key-file",
                directory.file("keys/vault.key"), "--out", out,
            ])
        #expect(independent.status == 0, "\(independent.standardError)")
        #expect(independent.standardError.contains("1 levels of tree lists"), "\(independent.standardError)")
        let restoredByPython = try JSONDecoder().decode(
            [String: String].self, from: Data(contentsOf: URL(fileURLWithPath: out)))
        let expected = Dictionary(uniqueKeysWithValues: state.map { ($0.key, $0.value) })
        #expect(restoredByPython == expected)

        let restore = try await cloudsync(["restore", file, "--repository", "vault", "--to", "restored", "--quiet"])
        #expect(restore.status == 0, "\(restore.standardError)")
        #expect(try await contents("restored") == expected)
    }

    @Test func theIndependentRestoreAgreesWithRestoreOnEverySnapshotAndSnapshotsListsThem() async throws {
        let file = directory.file("nightly.yaml")
        let app = try SQLiteProvider(id: "app", path: directory.file("data/app.db"))
        var state = (0..<1_000).map { KeyValue("user\($0).settings", #"{"n":\#($0),"name":"Zoë \#($0)"}"#) }
        _ = try await app.set(state)
        #expect(try await cloudsync(["run", file, "--job", "backup", "--quiet"]).status == 0)
        for index in 0..<10 { state[index] = KeyValue(state[index].key, "changed \(index)") }
        _ = try await app.set(Array(state[0..<10]))
        _ = try await app.remove(state.suffix(5).map(\.key))
        state.removeLast(5)
        state += (0..<5).map { KeyValue("added\($0)", "new ✓ \($0)") }
        _ = try await app.set(Array(state.suffix(5)))
        await app.close()
        #expect(try await cloudsync(["run", file, "--job", "backup", "--quiet"]).status == 0)

        let listed = try await cloudsync(["snapshots", file, "--repository", "vault", "--json"])
        #expect(listed.status == 0, "\(listed.standardError)")
        let snapshots = try #require(
            try JSONSerialization.jsonObject(with: Data(listed.standardOutput.utf8)) as? [[String: Any]])
        #expect(snapshots.count == 2)
        #expect(snapshots.allSatisfy { $0["keys"] as? Int == 1_000 && $0["tags"] as? [String] == ["nightly"] })
        #expect(snapshots.allSatisfy { $0["pipeline"] as? String == "nightly" && $0["source"] as? String == "app" })
        let ids = snapshots.compactMap { $0["id"] as? String }
        let text = try await cloudsync(["snapshots", file, "--repository", "vault"])
        #expect(
            text.standardOutput.split(separator: "\n").map { String($0.prefix(8)) } == ids.map { String($0.prefix(8)) })

        for id in ids {
            let restore = try await cloudsync(["run", file, "--job", "restore", "--quiet"], snapshot: id)
            #expect(restore.status == 0, "\(restore.standardError)")
            let restored = try await contents("restored")
            #expect(try await pythonRestore(String(id.prefix(10))) == restored)
        }
        #expect(try await contents("restored") == Dictionary(uniqueKeysWithValues: state.map { ($0.key, $0.value) }))
        #expect(try await pythonRestore(nil) == (try await contents("restored")))
    }

    /// The format 2 repository the release before zstd wrote: the independent restore reads it, a backup through the
    /// binary upgrades it in place, and the independent restore then reads every snapshot of the mixed repository.
    @Test func theFormatTwoFixtureIsReadUpgradedAndStillReadByTheIndependentRestore() async throws {
        let fixture = root + "/Tests/Fixtures/backup-format2"
        let copy = directory.file("format2")
        try FileManager.default.copyItem(atPath: fixture, toPath: copy)
        try FileManager.default.copyItem(atPath: copy + "/latest", toPath: copy + "/source")
        // The key file must be the owner's alone, as every key file.
        chmod(copy + "/format2.key", 0o600)
        func independent(_ snapshot: String?) async throws -> [String: String] {
            let out = directory.file("format2-\(snapshot ?? "latest").json")
            let result = try await ProcessRunner.run(
                Repository.python,
                [
                    root + "/scripts/backup_restore.py", "--repository", copy + "/repository", "--key-file",
                    copy + "/format2.key", "--out", out,
                ] + (snapshot.map { ["--snapshot", $0] } ?? []))
            #expect(result.status == 0, "\(result.standardError)")
            return try JSONDecoder().decode([String: String].self, from: Data(contentsOf: URL(fileURLWithPath: out)))
        }
        var latest: [String: String] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: copy + "/latest") {
            latest[name] = try String(contentsOfFile: copy + "/latest/" + name, encoding: .utf8)
        }
        #expect(try await independent(nil) == latest)

        // Over a MiB, so it is stored in chunks.
        let large = (0..<60_000).map { #"{"user":\#($0),"theme":"dark"},"# }.joined()
        try large.write(toFile: copy + "/source/new.large", atomically: true, encoding: .utf8)
        let ran = try await ProcessRunner.run(executable, ["run", copy + "/format2.yaml", "--quiet"])
        #expect(ran.status == 0, "\(ran.standardError)")
        let config = try String(contentsOfFile: copy + "/repository/cloudsync-repo.config", encoding: .utf8)
        #expect(config.contains(#""format":3"#))
        latest["new.large"] = large
        #expect(try await independent(nil) == latest)
        let listed = try await ProcessRunner.run(
            executable, ["snapshots", copy + "/format2.yaml", "--repository", "repository", "--json"])
        let snapshots = try #require(
            try JSONSerialization.jsonObject(with: Data(listed.standardOutput.utf8)) as? [[String: Any]])
        #expect(snapshots.compactMap { $0["keys"] as? Int } == [41, 42, 43])
        let second = try #require(snapshots[1]["id"] as? String)
        latest["new.large"] = nil
        #expect(try await independent(String(second.prefix(12))) == latest)
    }

    /// Every index object deleted: a restore still gives back every key through the packs' headers, `repair index`
    /// rebuilds the index from them, and the restore then reads it.
    @Test func repairIndexRebuildsADeletedIndexSoTheRestoreWorksAgain() async throws {
        let file = directory.file("nightly.yaml")
        let app = try SQLiteProvider(id: "app", path: directory.file("data/app.db"))
        let state = (0..<300).map { KeyValue("k\($0)", "value \($0)") }
        _ = try await app.set(state)
        await app.close()
        #expect(try await cloudsync(["run", file, "--job", "backup", "--quiet"]).status == 0)
        let vault = directory.file("data/vault")
        let indexes = try FileManager.default.contentsOfDirectory(atPath: vault).filter { $0.contains(".index.") }
        #expect(!indexes.isEmpty)
        for name in indexes { try FileManager.default.removeItem(atPath: vault + "/" + name) }
        // The packs' own headers stand in for the lost index: the restore already gives back every key.
        let broken = try await cloudsync(["run", file, "--job", "restore", "--quiet"])
        #expect(broken.status == 0, "\(broken.standardError)")

        let repair = try await cloudsync(["repair", "index", file, "--repository", "vault", "--json"])
        #expect(repair.status == 0, "\(repair.standardError)")
        let figures = try #require(
            try JSONSerialization.jsonObject(with: Data(repair.standardOutput.utf8)) as? [String: Any])
        #expect(
            figures["blobsIndexed"] as? Int ?? 0 > 300 && (figures["packsNotIndexed"] as? [String])?.isEmpty == true)
        let restored = try await cloudsync(["run", file, "--job", "restore", "--quiet"])
        #expect(restored.status == 0, "\(restored.standardError)")
        #expect(try await contents("restored") == Dictionary(uniqueKeysWithValues: state.map { ($0.key, $0.value) }))
        let unknown = try await cloudsync(["repair", "index", file, "--repository", "vaul"])
        #expect(unknown.status == 64 && unknown.standardError.contains("did you mean 'vault'"))
    }

    @Test func aRepositoryOpenedWithAnotherKeyIsOneErrorNamingIt() async throws {
        let file = directory.file("nightly.yaml")
        let app = try SQLiteProvider(id: "app", path: directory.file("data/app.db"))
        _ = try await app.set([KeyValue("k", "v")])
        await app.close()
        #expect(try await cloudsync(["run", file, "--job", "backup", "--quiet"]).status == 0)
        _ = try await ProcessRunner.run(executable, ["keygen", "--out", directory.file("keys/other.key")])
        let other = try String(contentsOfFile: file, encoding: .utf8).replacingOccurrences(
            of: "keys/vault.key", with: "keys/other.key")
        try other.write(toFile: directory.file("other.yaml"), atomically: true, encoding: .utf8)
        let result = try await cloudsync(["snapshots", directory.file("other.yaml"), "--repository", "vault"])
        #expect(result.status == 2)
        #expect(result.standardError.contains("ERR_DECODE") && result.standardError.contains("vault"))
        #expect(result.standardError.split(separator: "\n").count <= 2, "\(result.standardError)")
        let unknown = try await cloudsync(["snapshots", file, "--repository", "vaul"])
        #expect(unknown.status == 64 && unknown.standardError.contains("did you mean 'vault'"))
    }
}
