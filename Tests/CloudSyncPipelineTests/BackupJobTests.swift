import CloudSync
import CloudSyncBackup
import CloudSyncCrypto
import CloudSyncLocal
import CloudSyncSodium
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncJobs
@testable import CloudSyncPipeline
@testable import CloudSyncRunner

/// `backup` and `restore` as a user runs them: a SQLite source, a directory repository, snapshots restored to any
/// point, and nothing of the key set readable in the repository's files.
@Suite struct BackupJobTests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.file("keys"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: directory.file("data"), withIntermediateDirectories: true)
        // A key file as `cloudsync keygen` writes it: one line of base64 holding 32 bytes.
        try (Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString() + "\n").write(
            toFile: directory.file("keys/backup.key"), atomically: true, encoding: .utf8)
        chmod(directory.file("keys/backup.key"), 0o600)
    }

    private func run(_ jobs: String, force: Bool = false, sourceCodec: Bool = false) async throws -> RunReport {
        let source = """
            version: 1
            name: backups
            providers:
              app: { type: sqlite, path: data/app.db, create: true\(sourceCodec ? ", codec: sealed" : "") }
              vault: { type: directory, path: data/vault, create: true }
              restored: { type: sqlite, path: data/restored.db, create: true }
            codecs:
              sealed: { type: xchacha20poly1305, keys: [{ id: k1, file: keys/backup.key }] }
            store: { providers: [app] }
            jobs:
            \(jobs)
            """
        let spec = try PipelineLoader.load(
            source: source, file: "p.yaml", directory: directory.path, registry: BuiltInProviders.registry,
            environment: [:])
        var options = RunOptions()
        options.force = force
        return try await PipelineRunner(try PipelineCompiler.compile(spec, environment: [:]), options: options)
            .run().report
    }

    private func sqlite(_ name: String) throws -> SQLiteProvider {
        try SQLiteProvider(id: name, path: directory.file("data/\(name).db"))
    }

    private func contents(_ name: String) async throws -> [KeyValue] {
        let provider = try sqlite(name)
        let keys = try await listEveryKey(of: provider)
        let values = try await provider.get(keys).map { try $0.get() ?? "" }
        await provider.close()
        return zip(keys, values).map { KeyValue($0, $1) }
    }

    @Test func snapshotsRestoreEachStateAndTheRepositoryRevealsNoKeyName() async throws {
        let app = try sqlite("app")
        var state = (0..<200).map {
            KeyValue("settings.user\($0)", #"{"n":\#($0),"theme":"dark","updatedAt":"2026-11-01T10:00:00Z"}"#)
        }
        _ = try await app.set(state)
        let first = try await run(
            "  - { type: backup, name: nightly, from: app, to: vault, codec: sealed, tags: [nightly] }")
        let firstJob = try #require(first.jobs.first)
        #expect(firstJob.status == .ok, "\(firstJob)")
        #expect(firstJob.counts["keys"] == 200 && firstJob.counts["new"] == 200)
        #expect(firstJob.counts["bytesRead"] == state.reduce(0) { $0 + $1.value.utf8.count })
        let firstSnapshot = try #require(firstJob.snapshot)
        let firstState = state

        state[3] = KeyValue(state[3].key, "changed")
        _ = try await app.set([state[3]])
        _ = try await app.remove([state[199].key])
        state.removeLast()
        await app.close()
        let second = try await run("  - { type: backup, name: nightly, from: app, to: vault, codec: sealed }")
        #expect(second.jobs.first?.counts["new"] == 1 && second.jobs.first?.counts["unchanged"] == 198)
        // Only the changed value was read: the others' tags had not moved.
        #expect(second.jobs.first?.counts["bytesRead"] == "changed".utf8.count)

        // The first snapshot, by a prefix of its id, gives back the first state exactly; latest gives the second.
        let older = try await run(
            "  - { type: restore, from: vault, to: restored, codec: sealed, snapshot: \(firstSnapshot.prefix(8)) }")
        #expect(older.jobs.first?.status == .ok && older.jobs.first?.snapshot == firstSnapshot)
        #expect(older.jobs.first?.counts["bytesWritten"] == firstState.reduce(0) { $0 + $1.value.utf8.count })
        #expect((older.jobs.first?.counts["bytesRead"] ?? 0) > 0)
        #expect(try await contents("restored").sorted { $0.key < $1.key } == firstState.sorted { $0.key < $1.key })
        let restored = try sqlite("restored")
        _ = try await restored.remove(try await listEveryKey(of: restored))
        await restored.close()
        _ = try await run("  - { type: restore, from: vault, to: restored, codec: sealed }")
        #expect(try await contents("restored").sorted { $0.key < $1.key } == state.sorted { $0.key < $1.key })

        // No file name or byte of the repository holds a key name or a value.
        let vault = directory.file("data/vault")
        for file in try FileManager.default.subpathsOfDirectory(atPath: vault) {
            let bytes = (try? String(contentsOfFile: vault + "/" + file, encoding: .utf8)) ?? ""
            #expect(
                !file.contains("settings") && !bytes.contains("settings.") && !bytes.contains("\"dark\""), "\(file)")
        }
    }

    @Test func aSnapshotSelectorThatMatchesNothingSaysSo() async throws {
        let app = try sqlite("app")
        _ = try await app.set([KeyValue("k", "v")])
        await app.close()
        _ = try await run("  - { type: backup, from: app, to: vault, codec: sealed }")
        let report = try await run("  - { type: restore, from: vault, to: restored, codec: sealed, snapshot: ffff }")
        #expect(report.jobs.first?.status == .error)
        #expect(report.jobs.first?.error?.code == "ERR_CONFIG")
        #expect(report.jobs.first?.error?.message.contains("no snapshot") == true)
    }

    private func directoryBytes(_ path: String) throws -> Int {
        try FileManager.default.subpathsOfDirectory(atPath: path).reduce(0) { total, file in
            let attributes = try FileManager.default.attributesOfItem(atPath: path + "/" + file)
            return total
                + ((attributes[.type] as? FileAttributeType) == .typeRegular ? (attributes[.size] as? Int ?? 0) : 0)
        }
    }

    @Test func forgetAndPruneShrinkTheRepositoryVerifyNamesADamagedPackAndRestoreDeletesWhatTheSnapshotLacks()
        async throws
    {
        let app = try sqlite("app")
        var state = (0..<300).map {
            KeyValue(
                "settings.user\($0)", #"{"n":\#($0),"theme":"dark","pad":"\#(String(repeating: "p", count: 300))"}"#)
        }
        _ = try await app.set(state)
        #expect(try await run("  - { type: backup, from: app, to: vault, codec: sealed }").jobs[0].status == .ok)
        for index in 0..<10 { state[index] = KeyValue(state[index].key, "changed \(index)") }
        _ = try await app.set(Array(state[0..<10]))
        _ = try await app.remove(state.suffix(5).map(\.key))
        state.removeLast(5)
        let added = (0..<5).map { KeyValue("settings.new\($0)", "fresh \($0)") }
        _ = try await app.set(added)
        state += added
        await app.close()
        #expect(try await run("  - { type: backup, from: app, to: vault, codec: sealed }").jobs[0].status == .ok)
        let vault = directory.file("data/vault")
        let before = try directoryBytes(vault)

        let forget = try await run(
            "  - { type: forget, repository: vault, codec: sealed, keep: { last: 1 }, prune: true }")
        let forgetJob = forget.jobs[0]
        #expect(forgetJob.status == .ok, "\(forgetJob)")
        #expect(forgetJob.counts["kept"] == 1 && forgetJob.counts["removed"] == 1)
        #expect((forgetJob.counts["objectsDeleted"] ?? 0) > 0 && (forgetJob.counts["bytesFreed"] ?? 0) > 0)
        let after = try directoryBytes(vault)
        #expect(after < before, "\(before) -> \(after)")

        // The restore target holds keys the snapshot never had: `deletes` removes them.
        let restoredProvider = try sqlite("restored")
        _ = try await restoredProvider.set([KeyValue("stray.one", "x"), KeyValue("stray.two", "y")])
        await restoredProvider.close()
        let restore = try await run(
            "  - { type: restore, from: vault, to: restored, codec: sealed, deletes: true, maxDeletes: 10 }")
        #expect(restore.jobs[0].status == .ok && restore.jobs[0].counts["deleted"] == 2, "\(restore.jobs[0])")
        #expect(try await contents("restored").sorted { $0.key < $1.key } == state.sorted { $0.key < $1.key })

        let clean = try await run("  - { type: verify, repository: vault, codec: sealed, readData: all }")
        #expect(clean.jobs[0].status == .ok && clean.jobs[0].counts["failed"] == 0, "\(clean.jobs[0])")
        let pack = try #require(
            try FileManager.default.subpathsOfDirectory(atPath: vault).first { $0.contains("data.") })
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: vault + "/" + pack)))
        bytes[bytes.count / 2] = bytes[bytes.count / 2] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        try Data(bytes).write(to: URL(fileURLWithPath: vault + "/" + pack))
        let damaged = try await run("  - { type: verify, repository: vault, codec: sealed, readData: all }")
        #expect(damaged.jobs[0].status == .failed && damaged.jobs[0].counts["failed"] == 1)
        let named = damaged.jobs[0].failures.map(\.key)
        #expect(named.count == 1 && pack.hasSuffix(named.first ?? "?"), "\(named) for \(pack)")
    }

    @Test func aRestoreThatWouldDeleteMoreThanMaxDeletesDeletesNoneAndFails() async throws {
        let app = try sqlite("app")
        _ = try await app.set([KeyValue("k", "v")])
        await app.close()
        _ = try await run("  - { type: backup, from: app, to: vault, codec: sealed }")
        let restored = try sqlite("restored")
        _ = try await restored.set((0..<10).map { KeyValue("other\($0)", "x") })
        await restored.close()
        let report = try await run("  - { type: restore, from: vault, to: restored, codec: sealed, deletes: true }")
        #expect(report.jobs[0].status == .failed && report.jobs[0].error?.code == "ERR_TOO_MANY_DELETES")
        #expect(report.jobs[0].counts["heldBack"] == 10 && report.jobs[0].counts["deleted"] == 0)
        #expect(try await contents("restored").count == 11)
    }

    @Test func forgetRefusesAKeepPolicyThatKeepsNothingWhenTheFileIsChecked() throws {
        #expect {
            _ = try PipelineLoader.load(
                source: """
                    version: 1
                    name: p
                    providers: { vault: { type: directory, path: v, create: true } }
                    codecs: { sealed: { type: xchacha20poly1305, keys: [{ id: k1, file: keys/backup.key }] } }
                    store: { providers: [vault] }
                    jobs:
                      - { type: forget, repository: vault, codec: sealed, keep: { dayly: 7 } }
                      - { type: forget, repository: vault, codec: sealed, keep: { within: 3 days } }
                      - { type: forget, repository: vault, codec: sealed, keep: {} }
                    """, file: "p.yaml", directory: directory.path, registry: BuiltInProviders.registry,
                environment: [:])
        } throws: { error in
            let text = "\(error)"
            return text.contains("p.yaml:7:") && text.contains("did you mean `daily`") && text.contains("p.yaml:8:")
                && text.contains("within") && text.contains("p.yaml:9:") && text.contains("keeps nothing")
        }
    }

    @Test func aSnapshotIsChosenByLatestUniquePrefixOrTimeAndAnAmbiguousPrefixSaysHowMany() async throws {
        let store = try CloudStore(providers: [MemoryProvider(id: "vault")])
        let ring = try EnvelopeCodec(keys: [.raw(id: "k1", SecretBytes(copying: SecureRandom.bytes(count: 32)))])
        let repository = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: true)
        func snapshot(_ id: String, _ time: String) -> SnapshotSummary {
            let date = ISO8601DateFormatter().date(from: time)!
            return SnapshotSummary(
                id: id, time: Int64(date.timeIntervalSince1970 * 1000), source: "app", pipeline: "p", tags: [],
                keys: 1, bytes: 1, host: "h")
        }
        let all = [
            snapshot("ab12", "2026-11-01T02:30:00Z"), snapshot("ab34", "2026-11-02T02:30:00Z"),
            snapshot("cd56", "2026-11-03T02:30:00Z"),
        ]
        #expect(try RestoreJob.choose("latest", among: all, in: repository).id == "cd56")
        #expect(try RestoreJob.choose("AB3", among: all, in: repository).id == "ab34")
        #expect(try RestoreJob.choose("2026-11-02T12:00:00Z", among: all, in: repository).id == "ab34")
        #expect(try RestoreJob.choose("2026-11-02T02:30:00Z", among: all, in: repository).id == "ab34")
        #expect {
            _ = try RestoreJob.choose("ab", among: all, in: repository)
        } throws: { error in
            let error = error as? CloudSyncError
            return error?.code == .config && error?.message.contains("2 snapshots") == true
        }
        #expect {
            _ = try RestoreJob.choose("2026-10-01T00:00:00Z", among: all, in: repository)
        } throws: { error in (error as? CloudSyncError)?.message.contains("at or before") == true }
    }

    @Test func theSecondBackupOfATaggedSourceInOneRunReadsNoValue() async throws {
        let source = """
            version: 1
            name: tagged
            providers:
              seed: { type: memory, items: { a: "1", b: "2", c: "3" } }
              vault: { type: directory, path: data/vault, create: true }
            codecs:
              sealed: { type: xchacha20poly1305, keys: [{ id: k1, file: keys/backup.key }] }
            store: { providers: [seed] }
            jobs:
              - { type: backup, name: first, from: seed, to: vault, codec: sealed }
              - { type: backup, name: second, from: seed, to: vault, codec: sealed }
            """
        let spec = try PipelineLoader.load(
            source: source, file: "p.yaml", directory: directory.path, registry: BuiltInProviders.registry,
            environment: [:])
        // The last progress each job told: keys of the source's own count (a memory provider counts cheaply).
        let progress = Protected<[String: String]>([:])
        var options = RunOptions()
        options.onProgress = { job, done, total, unit in
            progress.withLock { $0[job] = "\(done)/\(total.map(String.init) ?? "?") \(unit)" }
        }
        let report = try await PipelineRunner(try PipelineCompiler.compile(spec, environment: [:]), options: options)
            .run().report
        #expect(report.jobs.map(\.status) == [.ok, .ok])
        #expect(report.jobs[0].counts["unread"] == 0 && report.jobs[0].counts["new"] == 3)
        #expect(report.jobs[1].counts["unread"] == 3 && report.jobs[1].counts["unchanged"] == 3)
        #expect(report.jobs[0].counts["bytesRead"] == 3 && report.jobs[1].counts["bytesRead"] == 0)
        // The second read nothing but still went through every key: its progress counts keys listed, not read.
        #expect(progress.withLock { $0 } == ["first": "3/3 keys", "second": "3/3 keys"])
    }

    /// A snapshot whose trees cannot be read does not know which keys it held: its restore names the lost tree, fails,
    /// and removes nothing, even with `deletes`.
    @Test func aRestoreThatLostATreeNamesItAndRemovesNothing() async throws {
        let app = try sqlite("app")
        _ = try await app.set((0..<30).map { KeyValue("k\($0)", "v\($0)") })
        await app.close()
        #expect(try await run("  - { type: backup, from: app, to: vault, codec: sealed }").jobs[0].status == .ok)
        let vault = directory.file("data/vault")
        let packs = try FileManager.default.contentsOfDirectory(atPath: vault).filter { $0.contains(".data.") }
        #expect(packs.count == 1)
        let pack = URL(fileURLWithPath: vault + "/" + packs[0])
        var bytes = try [UInt8](Data(contentsOf: pack))
        bytes[bytes.count - 30] ^= 0x40
        try Data(bytes).write(to: pack)
        let restored = try sqlite("restored")
        _ = try await restored.set([KeyValue("stray", "x")])
        await restored.close()

        let report = try await run(
            "  - { type: restore, from: vault, to: restored, codec: sealed, deletes: true, maxDeletes: 100% }")
        #expect(report.jobs[0].status == .failed && report.jobs[0].counts["deleted"] == 0, "\(report.jobs[0])")
        #expect(report.jobs[0].failures.contains { $0.message.contains("tree") && $0.code == "ERR_DECODE" })
        #expect(try await contents("restored") == [KeyValue("stray", "x")])
    }

    @Test func aSnapshotThatMissedKeysIsMarkedAndARestoreWithDeletesRemovesNothingUnlessForced() async throws {
        // The source is sealed by the codec; one value is not an envelope, so it cannot be read.
        let key = try String(contentsOfFile: directory.file("keys/backup.key"), encoding: .utf8)
        let codec = try EnvelopeCodec(
            keys: [
                .raw(
                    id: "k1",
                    SecretBytes(
                        copying: [UInt8](Data(base64Encoded: key.trimmingCharacters(in: .whitespacesAndNewlines))!)))
            ])
        let app = try sqlite("app")
        _ = try await app.set(try (0..<20).map { KeyValue("k\($0)", try codec.encode("v\($0)", key: "k\($0)")) })
        _ = try await app.set([KeyValue("broken", "not an envelope")])
        await app.close()
        let backup = try await run("  - { type: backup, from: app, to: vault, codec: sealed }", sourceCodec: true)
        #expect(backup.jobs[0].status == .failed && backup.jobs[0].counts["failed"] == 1)
        #expect(backup.jobs[0].failures.map(\.key) == ["broken"])

        let restored = try sqlite("restored")
        _ = try await restored.set([KeyValue("stray", "x")])
        await restored.close()
        let restore = "  - { type: restore, from: vault, to: restored, codec: sealed, deletes: true, maxDeletes: 100% }"
        let refused = try await run(restore)
        #expect(refused.jobs[0].status == .failed && refused.jobs[0].error?.code == "ERR_TOO_MANY_DELETES")
        #expect(refused.jobs[0].error?.message.contains("left out 1 keys") == true)
        #expect(refused.jobs[0].counts["restored"] == 20 && refused.jobs[0].counts["deleted"] == 0)
        #expect(try await contents("restored").count == 21)
        let forced = try await run(restore, force: true)
        #expect(forced.jobs[0].status == .ok && forced.jobs[0].counts["deleted"] == 1)
    }
}
