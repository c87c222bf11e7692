import CloudSync
import CloudSyncBackup
import CloudSyncPipeline
import Foundation

/// `restore`: writes a snapshot's keys (within `keys`) from a backup repository back into a provider.
struct RestoreJob: JobType {
    struct Configuration: Sendable {
        var from: String
        var to: String
        var codec: String
        var snapshot: String
        var keys: [String]?
        var overwrite: Overwrite
        var deletes: Bool
        var maxDeletes: DeleteLimit
    }

    static let restored = JobCount("restored", "keys written with the snapshot's value")
    static let unchanged = JobCount("unchanged", "keys left as they were (already the snapshot's value, or kept)")
    static let deleted = JobCount("deleted", "keys removed from `to` because the snapshot does not hold them")
    static let failed = JobCount("failed", "keys that could not be written or removed")
    static let heldBack = JobCount("heldBack", "removals not made because they were more than `maxDeletes` allows")

    let name = "restore"
    let summary = "write a backup snapshot's keys back into a provider"
    let fields = [
        JobField("from", .provider, required: true, summary: "the provider that keeps the repository"),
        JobField(
            "to", .providerOrStore, required: true,
            summary: "the provider written to, or store for the whole store (through its write mode and codec)"),
        JobField("codec", .codec, required: true, summary: "the codec whose key ring opens the repository"),
        JobField(
            "snapshot", .text, defaultValue: "latest",
            summary: "latest, a snapshot id or a unique prefix of one, or an ISO-8601 time (the newest snapshot at or "
                + "before it)"),
        keysField,
        overwriteField,
        JobField(
            "deletes", .boolean, defaultValue: "false",
            summary: "also remove keys of `to` (within `keys`) the snapshot does not hold, so `to` ends as it was"),
        JobField(
            "maxDeletes", .deleteLimit, defaultValue: "50%",
            summary: "with deletes, the most keys it may remove, as a count or a percentage of the keys `to` holds; "
                + "over it the job removes none and fails, and `cloudsync run --force` allows it once"),
    ]
    static let bytesRead = JobCount("bytesRead", "bytes of repository objects read, as stored")
    static let bytesWritten = JobCount("bytesWritten", "bytes of the values written to `to`")

    let counts = [restored, unchanged, deleted, failed, heldBack, bytesRead, bytesWritten]

    func configuration(from values: JobFieldValues) throws(JobConfigurationError) -> Configuration {
        let (from, to) = try values.twoProviders("a restore cannot write into the provider that keeps the repository")
        return Configuration(
            from: from, to: to, codec: values.text("codec") ?? "", snapshot: values.text("snapshot") ?? "latest",
            keys: values.list("keys"), overwrite: values.choice("overwrite", default: .always),
            deletes: values.boolean("deletes") ?? false, maxDeletes: values.deleteLimit("maxDeletes") ?? .standard)
    }

    func providers(of configuration: Configuration, store: [String]) -> [String] {
        [configuration.from] + (configuration.to == "store" ? store : [configuration.to])
    }

    func plan(_ configuration: Configuration, paths: PlanPaths) -> String {
        "restore snapshot \(configuration.snapshot) of the repository in \(configuration.from)"
            + "\(planKeys(configuration.keys)) into \(configuration.to) (overwrite \(configuration.overwrite.rawValue))"
            + (configuration.deletes
                ? ", removing keys the snapshot lacks (at most \(configuration.maxDeletes.description))" : "")
    }

    func run(_ configuration: Configuration, in context: JobContext, report: inout JobReport)
        async throws(CloudSyncError)
    {
        let repository = try await context.backupRepository(
            in: configuration.from, codec: configuration.codec, create: false)
        try await repository.withLock(exclusive: false) { _ throws(CloudSyncError) in
            let chosen = try Self.choose(
                configuration.snapshot, among: try await repository.snapshots(), in: repository)
            report.snapshot = chosen.id
            let filter = context.selecting(keyFilter(configuration.keys))
            var held: Set<String> = []
            var treesLost = 0
            var done = 0
            try await repository.restore(
                snapshot: chosen.id, pageSize: context.pageSize(for: [configuration.to]), keys: filter
            ) { item throws(CloudSyncError) in
                guard !context.isInterrupted else { return }
                switch item {
                case .values(let page):
                    held.formUnion(page.lazy.map(\.key))
                    try await write(page, configuration, in: context, report: &report)
                    done += page.count
                case .file(let key, let path, let size):
                    held.insert(key)
                    try await writeFile(key, path: path, size: size, configuration, in: context, report: &report)
                    done += 1
                case .unreadable(let key, let error):
                    // Left as `to` holds it: never removed for being absent from what could be read.
                    held.insert(key)
                    report.record([KeyFailure(key: key, error: error)])
                    report.add(1, to: Self.failed)
                    done += 1
                case .unreadableTree(let tree, let error):
                    // Which keys it held is not known: nothing is removed for being absent, and the job fails.
                    treesLost += 1
                    report.record([
                        KeyFailure(
                            key: "",
                            error: CloudSyncError(
                                error.code,
                                "tree \(tree.prefix(12)) of snapshot \(chosen.id.prefix(8)) cannot be read, so the keys "
                                    + "it held were not restored (the other trees' were): \(error.message)",
                                provider: configuration.from, key: error.key))
                    ])
                    report.add(1, to: Self.failed)
                }
                context.progress(done, chosen.keys)
            }
            report[Self.bytesRead] = repository.bytesRead
            if context.isInterrupted {
                report.status = .interrupted
            } else if configuration.deletes && treesLost == 0 {
                try await removeExtra(keeping: held, from: chosen, configuration, in: context, report: &report)
            }
        }
    }

    /// Writes one page of the snapshot into `to`, as `overwrite` allows.
    private func write(
        _ page: [KeyValue], _ configuration: Configuration, in context: JobContext, report: inout JobReport
    ) async throws(CloudSyncError) {
        let store = context.store
        let to = configuration.to
        var page = page
        if configuration.overwrite != .always {
            let keys = page.map(\.key)
            let current = to == "store" ? try await store.multiGet(keys) : try await store.read(keys, from: to)
            let before = page.count
            page = zip(page, current).compactMap { configuration.overwrite.writes($0.value, over: $1) ? $0 : nil }
            report.add(before - page.count, to: Self.unchanged)
        }
        let outcomes =
            to == "store"
            ? try await store.multiSet(page).map { $0.map { _ in () } } : try await store.write(page, to: to)
        report.count(outcomes, of: page.lazy.map(\.key), done: Self.restored, failed: Self.failed)
        for (item, outcome) in zip(page, outcomes) where (try? outcome.get()) != nil {
            report.add(item.value.utf8.count, to: Self.bytesWritten)
        }
    }

    /// Writes one value the restore handed over as a file (large, or not UTF-8 text): as a file where `to` stores
    /// files, else as a text value when it is text; a binary value for a provider that stores only text fails for its
    /// key, named, and the restore goes on.
    private func writeFile(
        _ key: String, path: String, size: Int, _ configuration: Configuration, in context: JobContext,
        report: inout JobReport
    ) async throws(CloudSyncError) {
        let store = context.store
        let to = configuration.to
        do throws(CloudSyncError) {
            if try await keeps(key, path: path, size: size, configuration, store: store) {
                report.add(1, to: Self.unchanged)
                return
            }
            if to == "store" {
                do throws(CloudSyncError) {
                    try await store.putFile(key, from: path)
                } catch  where error.code == .unsupported {
                    try await store.set(try Self.text(of: path, key: key, size: size, provider: to), forKey: key)
                }
            } else if try store.storesFiles(to) {
                try await store.putFile(key, from: path, to: to)
            } else {
                try await store.write(
                    [KeyValue(key, try Self.text(of: path, key: key, size: size, provider: to))], to: to)[0]
                    .get()
            }
            report.add(1, to: Self.restored)
            report.add(size, to: Self.bytesWritten)
        } catch {
            report.record([KeyFailure(key: key, error: error)])
            report.add(1, to: Self.failed)
        }
    }

    /// The largest value handed over as a file that `overwrite: ifDifferent` compares with what `to` holds.
    static let comparedBytes = 16 << 20

    /// Whether `overwrite` leaves `key` as `to` holds it: `ifMissing` and it holds one, or `ifDifferent` and it holds
    /// these very bytes (up to ``comparedBytes``).
    private func keeps(
        _ key: String, path: String, size: Int, _ configuration: Configuration, store: CloudStore
    ) async throws(CloudSyncError) -> Bool {
        let to = configuration.to
        switch configuration.overwrite {
        case .always: return false
        case .ifMissing:
            if to == "store" { return try await store.get(key) != nil }
            if try store.storesFiles(to) { return try await store.fileSize(key, on: to) != nil }
            return try await store.read([key], from: to)[0] != nil
        case .ifDifferent:
            // Compared in memory, so only up to a bound: a larger value is written again.
            guard size <= Self.comparedBytes else { return false }
            let restored = try? RegularFile.read(path, maximumBytes: size)
            let files = to == "store" ? false : try store.storesFiles(to)
            if !files {
                let current = to == "store" ? try await store.get(key) : try await store.read([key], from: to)[0]
                return current.map { restored?.elementsEqual($0.utf8) ?? false } ?? false
            }
            guard try await store.fileSize(key, on: to) == Int64(size) else { return false }
            let current = try await store.getBytes(key, from: to, maxBytes: size)
            return current.map { restored?.elementsEqual($0) ?? false } ?? false
        }
    }

    /// The text of a restored value's file; `ERR_UNSUPPORTED` naming the key when it is not UTF-8 text.
    private static func text(of path: String, key: String, size: Int, provider: String) throws(CloudSyncError)
        -> String
    {
        let file = try? RegularFile.read(path, maximumBytes: size)
        guard let file, let text = String(validating: file, as: UTF8.self) else {
            throw CloudSyncError(
                .unsupported,
                "\(key) holds \(size) bytes that are not UTF-8 text (a binary file), and \(provider) stores only text; "
                    + "restore it into a provider that stores files (a directory, s3, googleDrive or cloudKit)",
                provider: provider, key: key)
        }
        return text
    }

    /// Removes the keys of `to` within `keys` that the snapshot does not hold, unless they are more than
    /// `maxDeletes` allows (then none, and the job fails naming the count).
    ///
    /// A snapshot that left out keys it could not read is no record of what the source lacked, so it removes
    /// nothing from it unless `--force` says so.
    private func removeExtra(
        keeping held: Set<String>, from snapshot: SnapshotSummary, _ configuration: Configuration,
        in context: JobContext, report: inout JobReport
    ) async throws(CloudSyncError) {
        let store = context.store
        let to = configuration.to
        let filter = context.selecting(keyFilter(configuration.keys))
        let present =
            try await (to == "store" ? store.allKeys().keys : store.listKeys(of: to)).filter { filter?($0) ?? true }
        let extra = present.filter { !held.contains($0) }
        guard !extra.isEmpty else { return }
        if snapshot.missed > 0 && !context.isForced {
            report[Self.heldBack] = extra.count
            report.status = .failed
            report.error = RunReport.Failure(
                key: "", provider: to, code: ErrorCode.tooManyDeletes.rawValue,
                message:
                    "snapshot \(snapshot.id.prefix(8)) left out \(snapshot.missed) keys its backup could not read, so "
                    + "the \(extra.count) keys of \(to) it lacks may be among them; the restore removed none; restore "
                    + "from a whole snapshot, or run again with --force to remove them anyway")
            return
        }
        guard
            report.allowsDeletions(
                extra.count, of: present.count, in: to, limit: configuration.maxDeletes, forced: context.isForced,
                job: "restore", heldBack: Self.heldBack, check: "that the snapshot is the one you meant")
        else { return }
        let outcomes =
            to == "store"
            ? try await store.multiRemove(extra).map { $0.map { _ in () } } : try await store.remove(extra, from: to)
        report.count(outcomes, of: extra, done: Self.deleted, failed: Self.failed)
    }

    /// The snapshot `selector` names: `latest`, an id or a unique prefix of one, or an ISO-8601 time (the newest at or
    /// before it); `ERR_CONFIG` saying which when none or several match.
    static func choose(_ selector: String, among snapshots: [SnapshotSummary], in repository: BackupRepository)
        throws(CloudSyncError) -> SnapshotSummary
    {
        let place = "the backup repository in \(repository.provider)"
        if selector == "latest" {
            guard let last = snapshots.last else {
                throw CloudSyncError(.config, "\(place) holds no snapshot yet", provider: repository.provider)
            }
            return last
        }
        let time = ISO8601DateFormatter().date(from: selector)
        if let time {
            let limit = Int64((time.timeIntervalSince1970 * 1000).rounded(.down))
            guard let newest = snapshots.last(where: { $0.time <= limit }) else {
                throw CloudSyncError(
                    .config, "\(place) holds no snapshot taken at or before \(selector)", provider: repository.provider)
            }
            return newest
        }
        let matching = snapshots.filter { $0.id.hasPrefix(selector.lowercased()) }
        guard matching.count == 1 else {
            throw CloudSyncError(
                .config,
                matching.isEmpty
                    ? "no snapshot of \(place) has an id starting \(selector); `latest`, an id or a time selects one"
                    : "\(matching.count) snapshots of \(place) have ids starting \(selector); give more of the id",
                provider: repository.provider)
        }
        return matching[0]
    }
}
