import CloudSync
import CloudSyncBackup
import CloudSyncCrypto
import CloudSyncLocal
import CloudSyncSodium
import CloudSyncTesting
import Foundation

/// Backups on a bad day: a prune's CPU growing linearly from 100,000 to 1,000,000 values, and a restore of 100,000
/// keys beside a damaged snapshot object and a damaged index object.
func benchBackupIncidents(_ context: BenchContext) async throws -> [BenchRow] {
    let bench = try IncidentBench(context)
    return [try await bench.pruneGrowth(), try await bench.restoreBesideDamage()]
}

private struct IncidentBench {
    let context: BenchContext
    let root: String
    let executable = Bundle.main.executablePath ?? CommandLine.arguments[0]

    init(_ context: BenchContext) throws {
        self.context = context
        root = try context.directory("backup-incidents")
        _ = try runChild("/usr/bin/sh", ["-c", "head -c 32 /dev/urandom | base64 > '\(root)/vault.key'"])
    }

    /// `count` distinct 1 KB values of hexadecimal text in a SQLite database (written in one pass: a million
    /// files would take longer to make than to back up).
    private func source(_ name: String, count: Int) async throws -> String {
        let path = "\(root)/\(name).db"
        try? FileManager.default.removeItem(atPath: path)
        let database = try SQLiteProvider(id: "app", path: path)
        var generator = SeededRandom(seed: UInt64(count))
        for start in stride(from: 0, to: count, by: 5_000) {
            _ = try await database.set(
                (start..<min(start + 5_000, count)).map { index in
                    var text = ""
                    text.reserveCapacity(1024)
                    for _ in 0..<64 { text += String(format: "%016llx", generator.next()) }
                    return KeyValue(String(format: "settings.item.%07d", index), text)
                })
        }
        await database.close()
        return path
    }

    /// A pipeline backing `database` up into a directory repository, and a forget and prune that keep two
    /// snapshots.
    private func pipeline(_ name: String, database: String) throws -> String {
        let path = "\(root)/\(name).yaml"
        try """
        version: 1
        name: \(name)
        providers:
          app: { type: sqlite, path: \(database) }
          vault: { type: directory, path: \(root)/\(name)-vault, create: true }
        codecs:
          sealed: { type: xchacha20poly1305, keys: [{ id: k1, file: \(root)/vault.key }] }
        store: { providers: [app] }
        jobs:
          - { type: backup, name: backup, from: app, to: vault, codec: sealed }
          - { type: forget, name: prune, repository: vault, codec: sealed, keep: { last: 2 }, prune: true }

        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    private func ours(_ pipeline: String, _ job: String) throws -> ChildRun {
        sync()
        let run = try runChild(executable, ["--pipeline-child", pipeline, "--job", job])
        guard run.output.isEmpty || !run.output.contains("\"status\" : \"failed\"") else {
            throw CloudSyncError(.provider, "the \(job) job of \(pipeline) failed: \(run.output.prefix(400))")
        }
        return run
    }

    /// Forget + prune with nothing to remove (two snapshots, both kept) at 100,000 and at
    /// `CLOUDSYNC_BENCH_PRUNE_VALUES` (default 1,000,000) values: CPU of the larger beside ten times the smaller's
    /// (linear growth is a ratio of 1).
    func pruneGrowth() async throws -> BenchRow {
        let larger = ProcessInfo.processInfo.environment["CLOUDSYNC_BENCH_PRUNE_VALUES"].flatMap(Int.init) ?? 1_000_000
        var figures: [Int: [Double]] = [:]
        for count in [100_000, larger] {
            let database = try await source("prune-\(count)", count: count)
            let pipeline = try pipeline("prune-\(count)", database: database)
            for _ in 0..<context.runs {
                try context.shell("rm -rf '\(root)/prune-\(count)-vault'")
                _ = try ours(pipeline, "backup")
                _ = try ours(pipeline, "backup")
                figures[count, default: []].append(try ours(pipeline, "prune").cpuSeconds)
            }
            try context.shell("rm -rf '\(root)/prune-\(count)'*")
        }
        let scale = Double(larger) / 100_000
        return BenchRow(
            measure: "forget + prune with nothing to remove, \(larger.formatted()) × 1 KB: CPU", unit: "s",
            ours: median(figures[larger] ?? []), peerName: "\(Int(scale)) × the same at 100,000",
            peer: median(figures[100_000] ?? []) * scale, target: .atMost(1.1), runs: context.runs)
    }

    /// Three snapshots (100,000 keys; a small other source; the 100,000 with 1% changed), then the first's snapshot
    /// object and the small one's index object damaged: keys of the newest snapshot restored equal, beside its keys.
    func restoreBesideDamage() async throws -> BenchRow {
        let count = 100_000
        let vault = try DirectoryProvider(id: "vault", root: "\(root)/damaged-vault")
        let store = try CloudStore(providers: [vault])
        let ring = try EnvelopeCodec(keys: [.raw(id: "k1", SecretBytes(copying: SecureRandom.bytes(count: 32)))])
        var state = (0..<count).map { KeyValue(String(format: "settings.item.%06d", $0), "value \($0) of round 0") }
        func backUp(_ items: [KeyValue], source: String) async throws -> (snapshot: String, objects: Set<String>) {
            let before = Set(try await listEveryKey(of: vault))
            let repository = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: true)
            let session = repository.startBackup()
            for start in stride(from: 0, to: items.count, by: 10_000) {
                _ = try await session.add(Array(items[start..<min(start + 10_000, items.count)]))
            }
            let result = try await session.finish(source: source, pipeline: "bench", time: Int64(before.count))
            return (result.snapshotID, Set(try await listEveryKey(of: vault)).subtracting(before))
        }
        let first = try await backUp(state, source: "app")
        let other = try await backUp((0..<50).map { KeyValue("other\($0)", "other value \($0)") }, source: "other")
        for index in stride(from: 0, to: count, by: 100) {
            state[index] = KeyValue(state[index].key, "value \(index) of round 1")
        }
        let newest = try await backUp(state, source: "app")
        let damaged = [
            BackupRepository.prefix + "snapshot." + first.snapshot,
            try other.objects.first { $0.hasPrefix(BackupRepository.prefix + "index.") }.orThrow("no index"),
        ]
        for name in damaged {
            var stored = try await store.getBytes(name, from: "vault", maxBytes: 64 << 20).orThrow(name)
            stored[stored.count / 2] ^= 0x40
            try await store.putBytes(stored, as: name, to: "vault")
        }
        let repository = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: false)
        let expected = Dictionary(uniqueKeysWithValues: state.map { ($0.key, $0.value) })
        var equal = 0
        try await repository.restore(snapshot: newest.snapshot, pageSize: 1_000) { item throws(CloudSyncError) in
            guard case .values(let page) = item else { return }
            equal += page.filter { expected[$0.key] == $0.value }.count
        }
        try context.shell("rm -rf '\(root)/damaged-vault'")
        return BenchRow(
            measure: "restore of \(count.formatted()) keys beside a damaged snapshot and index: keys restored equal",
            unit: "keys", ours: Double(equal), peerName: "keys in the snapshot", peer: Double(count),
            target: .atLeast(1.0), runs: 1)
    }
}

extension Optional {
    /// The value, or a bench error saying what was missing.
    fileprivate func orThrow(_ what: String) throws -> Wrapped {
        guard let self else { throw CloudSyncError(.provider, "the bench found no \(what)") }
        return self
    }
}
