import CloudSync
import CloudSyncHTTP
import CloudSyncLocal
import CloudSyncS3
import CloudSyncTesting
import Foundation

/// Files in a migrate benchmark's source: `CLOUDSYNC_BENCH_FILES` when set (for a quick look), else `standard`.
private func fileCount(_ standard: Int) -> Int {
    ProcessInfo.processInfo.environment["CLOUDSYNC_BENCH_FILES"].flatMap(Int.init) ?? standard
}

/// A directory provider holding `count` keys of 1 KB under `root`, written in batches of 100.
private func sourceTree(_ root: String, count: Int) async throws -> DirectoryProvider {
    let source = try DirectoryProvider(id: "files", root: root)
    let kilobyte = String(repeating: "k", count: 1024)
    let keys = (0..<count).map { String(format: "settings.item.%06d", $0) }
    for start in stride(from: 0, to: count, by: 100) {
        _ = try await source.set(keys[start..<min(start + 100, count)].map { KeyValue($0, kilobyte) })
    }
    return source
}

/// Puts the machine in the same state before each timed run of either tool: nothing left to write back, and the
/// source tree's files out of the page cache.
///
/// rclone never flushes what it wrote, so without the `sync` the next run's first durable flush (ours) would write
/// back the previous run's copy too; and rclone drops the files it read from the cache, so without dropping them
/// first the run after rclone's would read from disk and the run after ours from memory.
private func startEven(source root: String) {
    sync()
    guard let files = FileManager.default.enumerator(atPath: root) else { return }
    for case let name as String in files {
        let descriptor = open("\(root)/\(name)", O_RDONLY | O_NOFOLLOW)
        guard descriptor >= 0 else { continue }
        _ = posix_fadvise(descriptor, 0, 0, POSIX_FADV_DONTNEED)
        close(descriptor)
    }
}

/// A directory → directory migrate through the store (durable: every batch synced before it counts) beside
/// `rclone copy` of the same tree, which does not fsync at all.
func benchDirectoryMigrate(_ context: BenchContext) async throws -> [BenchRow] {
    guard context.has("rclone") else {
        print("directory migrate: skipped (needs rclone: apt-get install rclone)")
        return []
    }
    let count = fileCount(100_000)
    let files = try context.directory("migrate-source")
    let source = try await sourceTree(files, count: count)
    var options = StoreOptions()
    options.timeout = nil
    // Every run writes a fresh tree, and all are removed only after both sides ran: ext4 skips inodes freed in the
    // last seconds when it allocates new ones, so a tree removed just before a run would slow that run's file
    // creation (by its own size, quadratically) whichever tool it measures.
    // The two sides take turns, run by run, so a change in the machine's load (disk writeback above all) falls on
    // both.
    let destination = "\(context.scratch.path)/migrate-destination"
    let copy = "\(context.scratch.path)/rclone-destination"
    var oursTimings: [Double] = []
    var peerTimings: [Double] = []
    // The floor beside the peer: a plain copy, and the same made durable (as ours is) by a sync after it.
    var copyTimings: [Double] = []
    var durableCopyTimings: [Double] = []
    for run in 0..<context.runs {
        let store = try CloudStore(
            providers: [source, try DirectoryProvider(id: "copy", root: "\(destination)-\(run)")], options: options)
        let timed = try await directoryMigrateRun(run, context, store: store, files: files, count: count, copy: copy)
        oursTimings.append(timed.ours)
        peerTimings.append(timed.rclone)
        copyTimings.append(timed.copy)
        durableCopyTimings.append(timed.durableCopy)
    }
    let ours = median(oursTimings)
    try context.shell("rm -rf '\(destination)'-* '\(copy)'-* '\(files)'")
    let measure = "migrate \(count.formatted()) × 1 KB directory → directory"
    return [
        BenchRow(
            measure: measure, unit: "s", ours: ours, peerName: "rclone copy", peer: median(peerTimings),
            target: .atMost(0.7), runs: context.runs),
        BenchRow(
            measure: measure, unit: "s", ours: ours, peerName: "cp -r (the floor, not durable)",
            peer: median(copyTimings), target: nil, runs: context.runs),
        BenchRow(
            measure: measure, unit: "s", ours: ours, peerName: "cp -r; sync (the durable floor)",
            peer: median(durableCopyTimings), target: nil, runs: context.runs),
    ]
}

/// One run of the directory migrate bench, the source tree made even before each side: ours through `store`
/// (`files` → `copy`), `rclone copy`, `cp -r`, and `cp -r` then `sync`, each into a tree of its own under `copy`.
private func directoryMigrateRun(
    _ run: Int, _ context: BenchContext, store: CloudStore, files: String, count: Int, copy: String
) async throws -> (ours: Double, rclone: Double, copy: Double, durableCopy: Double) {
    startEven(source: files)
    let ours = seconds(
        try await context.clock.measure {
            let migrated = try await StoreMaintenance(store).migrate(from: "files", to: "copy").copied.count
            guard migrated == count else { fatalError("migrated \(migrated) of \(count)") }
        })
    startEven(source: files)
    let rclone = seconds(
        try context.clock.measure {
            try context.shell("RCLONE_CONFIG=/dev/null rclone copy '\(files)' '\(copy)-\(run)'")
        })
    startEven(source: files)
    let plainCopy = seconds(try context.clock.measure { try context.shell("cp -r '\(files)' '\(copy)-cp-\(run)'") })
    startEven(source: files)
    let durableCopy = seconds(
        try context.clock.measure { try context.shell("cp -r '\(files)' '\(copy)-cps-\(run)' && sync") })
    print(
        String(
            format: "  run %d: ours %.2f s, rclone %.2f s, cp -r %.2f s, cp -r; sync %.2f s", run + 1, ours, rclone,
            plainCopy, durableCopy))
    return (ours, rclone, plainCopy, durableCopy)
}

/// A migrate of 2,000 files of 1 KB from a directory to a bucket of moto's S3 server on loopback, beside `rclone
/// copy` of the same files to another bucket of the same server; each run writes to fresh buckets.
func benchS3Migrate(_ context: BenchContext) async throws -> [BenchRow] {
    guard context.has("rclone"),
        let moto = try? MotoS3Server(
            repository: FileManager.default.currentDirectoryPath,
            buckets: (0..<context.runs).flatMap { ["bench-cloudsync-\($0)", "bench-rclone-\($0)"] })
    else {
        print("s3 migrate: skipped (needs .build/pyenv from scripts/python-env.sh and Debian's rclone)")
        return []
    }
    defer { moto.stop() }
    let endpoint = moto.endpoint

    let count = 2000
    let files = try context.directory("s3-source")
    let source = try await sourceTree(files, count: count)
    var options = StoreOptions()
    options.timeout = nil
    // The two take turns, run by run, each into a bucket of its own, so moto's state grows alike under both.
    var oursTimings: [Double] = []
    var peerTimings: [Double] = []
    for run in 0..<context.runs {
        let bucket = motoBucket(endpoint, "bench-cloudsync-\(run)", id: "bucket")
        let store = try CloudStore(providers: [source, bucket], options: options)
        oursTimings.append(
            seconds(
                try await context.clock.measure {
                    let migrated = try await StoreMaintenance(store).migrate(from: "files", to: "bucket").copied.count
                    guard migrated == count else { fatalError("migrated \(migrated) of \(count)") }
                }))
        peerTimings.append(
            seconds(
                try context.clock.measure {
                    try context.shell(
                        "\(rcloneOnMoto(endpoint)) rclone copy --transfers 16 '\(files)' moto:bench-rclone-\(run)"
                    )
                }))
    }
    let ours = median(oursTimings)
    let peer = median(peerTimings)
    return [
        BenchRow(
            measure: "migrate 2,000 × 1 KB directory → S3 (moto)", unit: "s", ours: ours, peerName: "rclone copy",
            peer: peer, target: .atMost(1.0), runs: context.runs)
    ]
}

/// moto's bucket `name` as the s3 provider `id` of a bench reaches it: path style, the benches' credentials.
func motoBucket(_ endpoint: URL, _ name: String, id: String) -> S3Provider {
    S3Provider(
        location: S3Location(endpoint: endpoint, bucket: name, region: "us-east-1", pathStyle: true),
        credentials: S3Credentials(accessKeyID: "bench", secretAccessKey: "bench"),
        transport: URLSessionTransport(maxConcurrency: 16), context: ProviderContext(providerID: id))
}

/// The start of a command line that runs rclone with a remote `moto:` on moto at `endpoint`, and none of the user's
/// rclone configuration or AWS certificate bundle.
func rcloneOnMoto(_ endpoint: URL) -> String {
    let environment = [
        "RCLONE_CONFIG_MOTO_TYPE": "s3", "RCLONE_CONFIG_MOTO_PROVIDER": "Other",
        "RCLONE_CONFIG_MOTO_ENDPOINT": endpoint.absoluteString, "RCLONE_CONFIG_MOTO_FORCE_PATH_STYLE": "true",
        "RCLONE_CONFIG_MOTO_ACCESS_KEY_ID": "bench", "RCLONE_CONFIG_MOTO_SECRET_ACCESS_KEY": "bench",
        "RCLONE_CONFIG_MOTO_REGION": "us-east-1", "RCLONE_CONFIG": "/dev/null",
    ]
    return "env -u AWS_CA_BUNDLE " + environment.map { "\($0.key)='\($0.value)'" }.joined(separator: " ")
}
