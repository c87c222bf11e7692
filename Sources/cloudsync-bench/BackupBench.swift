import CloudSync
import CloudSyncBackup
import CloudSyncCrypto
import CloudSyncLocal
import CloudSyncSodium
import Foundation

/// Backups beside restic (Debian's, a password file) on the same values written as files: a first backup, a second
/// with 1% of the values changed, a restore of the latest snapshot, and the bytes each repository holds; both
/// repositories are directories on the same disk.
func benchBackup(_ context: BenchContext) async throws -> [BenchRow] {
    guard context.has("restic") else {
        print("backup: skipped (needs restic: apt-get install restic)")
        return []
    }
    let count = ProcessInfo.processInfo.environment["CLOUDSYNC_BENCH_FILES"].flatMap(Int.init) ?? 100_000
    let files = try context.directory("backup-source")
    let source = try DirectoryProvider(id: "files", root: files)
    // Distinct values (restic would store equal files once, and so would we): 1 KB of hex from a seeded generator.
    var generator = SeededRandom(seed: 42)
    func value() -> String {
        var text = ""
        text.reserveCapacity(1024)
        for _ in 0..<64 { text += String(format: "%016llx", generator.next()) }
        return text
    }
    let keys = (0..<count).map { String(format: "settings.item.%06d", $0) }
    for start in stride(from: 0, to: count, by: 500) {
        _ = try await source.set(keys[start..<min(start + 500, count)].map { KeyValue($0, value()) })
    }
    let password = context.scratch.appendingPathComponent("restic-password").path
    try "bench-password\n".write(toFile: password, atomically: true, encoding: .utf8)
    let restic = "RESTIC_PASSWORD_FILE='\(password)' RESTIC_CACHE_DIR='\(context.scratch.path)/restic-cache' restic"
    let ring = try EnvelopeCodec(keys: [.raw(id: "k1", SecretBytes(copying: SecureRandom.bytes(count: 32)))])

    var ours: [[Double]] = [[], [], [], []]
    var peer: [[Double]] = [[], [], [], []]
    for run in 0..<context.runs {
        let figures = try await backupRun(
            run, context, source: source, files: files, ring: ring, restic: restic,
            // 1% of the values change between the two backups.
            change: { stride(from: run, to: count, by: 100).map { KeyValue(keys[$0], value()) } })
        for index in 0..<4 {
            ours[index].append(figures.ours[index])
            peer[index].append(figures.peer[index])
        }
    }
    try context.shell("rm -rf '\(files)'")
    return backupRows(count: count, ours: ours, peer: peer, runs: context.runs)
}

/// One run of the backup bench into fresh repositories, ours and restic's taking turns at each step, `change` applied
/// to the source between the two backups: each side's four figures, in the order of the rows.
private func backupRun(
    _ run: Int, _ context: BenchContext, source: DirectoryProvider, files: String, ring: EnvelopeCodec,
    restic: String, change: () -> [KeyValue]
) async throws -> (ours: [Double], peer: [Double]) {
    var options = StoreOptions()
    options.timeout = nil
    let vaultPath = try context.directory("backup-vault-\(run)")
    let resticPath = "\(context.scratch.path)/restic-repo-\(run)"
    let restoredPath = try context.directory("backup-restored-\(run)")
    let store = try CloudStore(
        providers: [
            source, try DirectoryProvider(id: "vault", root: vaultPath),
            try DirectoryProvider(id: "restored", root: restoredPath),
        ], options: options)
    try context.shell("\(restic) init --repo '\(resticPath)' -q")
    var ours: [Double] = []
    var peer: [Double] = []
    ours.append(try await timed(context) { try await backUp(store, ring) })
    peer.append(try timedShell(context, "\(restic) backup --repo '\(resticPath)' -q '\(files)'"))
    _ = try await source.set(change())
    ours.append(try await timed(context) { try await backUp(store, ring) })
    peer.append(try timedShell(context, "\(restic) backup --repo '\(resticPath)' -q '\(files)'"))
    ours.append(try await timed(context) { try await restoreLatest(store, ring) })
    peer.append(
        try timedShell(
            context, "\(restic) restore latest --repo '\(resticPath)' -q --target '\(restoredPath)-restic'"))
    ours.append(Double(try directoryBytes(vaultPath)) / 1_048_576)
    peer.append(Double(try directoryBytes(resticPath)) / 1_048_576)
    print(
        String(
            format: "  run %d: first %.2f / %.2f s, second %.2f / %.2f s, restore %.2f / %.2f s, %.1f / %.1f MiB",
            run + 1, ours[0], peer[0], ours[1], peer[1], ours[2], peer[2], ours[3], peer[3]))
    try context.shell("rm -rf '\(vaultPath)' '\(resticPath)' '\(restoredPath)' '\(restoredPath)-restic'")
    return (ours, peer)
}

/// A restore of the latest snapshot of the repository in `vault`, written into `restored` 1,000 keys a batch.
private func restoreLatest(_ store: CloudStore, _ ring: EnvelopeCodec) async throws {
    let repository = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: false)
    let items = try await repository.restore(snapshot: try await repository.snapshots().last!.id)
    for start in stride(from: 0, to: items.count, by: 1000) {
        for outcome in try await store.write(Array(items[start..<min(start + 1000, items.count)]), to: "restored") {
            try outcome.get()
        }
    }
}

/// The backup bench's rows: first backup, second backup, restore and repository size, each beside restic's.
private func backupRows(count: Int, ours: [[Double]], peer: [[Double]], runs: Int) -> [BenchRow] {
    let size = "\(count.formatted()) × 1 KB"
    return [
        ("first backup of \(size) into a directory", "s", 1.0),
        ("second backup, 1% changed", "s", 0.5),
        ("restore of the latest snapshot", "s", 1.0),
        ("bytes a repository holds after both backups", "MiB", 1.1),
    ].enumerated().map { index, row in
        BenchRow(
            measure: row.0, unit: row.1, ours: median(ours[index]),
            peerName: index == 2 ? "restic restore" : index == 3 ? "restic repository" : "restic backup",
            peer: median(peer[index]), target: .atMost(row.2), runs: runs)
    }
}

/// One backup of every key of `files` into the repository in `vault`, as the `backup` job runs it: a shared lock,
/// the newest snapshot as the parent, pages of 1,000 keys of which only those whose listed version tag moved since
/// the parent are read, then the snapshot.
private func backUp(_ store: CloudStore, _ ring: EnvelopeCodec) async throws {
    let repository = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: true)
    let parent = try await repository.snapshots().last { $0.pipeline == "bench" && $0.source == "files" }
    let session = try await repository.startBackup(after: parent)
    try await repository.withLock(exclusive: false) { lock throws(CloudSyncError) in
        var cursor: String?
        repeat {
            let page = try await store.keyPage(of: "files", after: cursor, limit: 1000)
            cursor = page.nextCursor
            let keys = session.keysToRead(page.keys, versions: page.versions)
            var items: [KeyValue] = []
            items.reserveCapacity(keys.count)
            for (key, value) in zip(keys, try await store.read(keys, from: "files")) {
                if let value { items.append(KeyValue(key, value)) }
            }
            try await session.add(items)
            try await lock.refresh()
        } while cursor != nil
        _ = try await session.finish(
            source: "files", pipeline: "bench", time: store.clock.nowMilliseconds(), holding: lock)
    }
}

private func timed(_ context: BenchContext, _ body: () async throws -> Void) async throws -> Double {
    sync()
    return seconds(try await context.clock.measure { try await body() })
}

private func timedShell(_ context: BenchContext, _ command: String) throws -> Double {
    sync()
    return seconds(try context.clock.measure { try context.shell(command) })
}

/// The bytes of the regular files under `path`.
func directoryBytes(_ path: String) throws -> Int {
    guard let walker = FileManager.default.enumerator(atPath: path) else { return 0 }
    var total = 0
    for case let name as String in walker {
        var status = stat()
        if lstat("\(path)/\(name)", &status) == 0, status.st_mode & S_IFMT == S_IFREG { total += Int(status.st_size) }
    }
    return total
}
