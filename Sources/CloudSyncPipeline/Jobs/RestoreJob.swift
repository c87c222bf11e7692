import CloudSync
import CloudSyncBackup
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
    }

    static let restored = JobCount("restored", "keys written with the snapshot's value")
    static let unchanged = JobCount("unchanged", "keys left as they were (already the snapshot's value, or kept)")
    static let failed = JobCount("failed", "keys that could not be written")

    let name = "restore"
    let summary = "write a backup snapshot's keys back into a provider"
    let fields = [
        JobField("from", .provider, required: true, summary: "the provider that keeps the repository"),
        JobField("to", .provider, required: true, summary: "the provider written to"),
        JobField("codec", .codec, required: true, summary: "the codec whose key ring opens the repository"),
        JobField(
            "snapshot", .text, defaultValue: "latest",
            summary: "latest, a snapshot id or a unique prefix of one, or an ISO-8601 time (the newest snapshot at or "
                + "before it)"),
        keysField,
        overwriteField,
    ]
    let counts = [restored, unchanged, failed]

    func configuration(from values: JobFieldValues) throws(JobConfigurationError) -> Configuration {
        let from = values.text("from") ?? ""
        let to = values.text("to") ?? ""
        guard from != to else {
            throw JobConfigurationError(
                field: "to", "a restore cannot write into the provider that keeps the repository")
        }
        return Configuration(
            from: from, to: to, codec: values.text("codec") ?? "", snapshot: values.text("snapshot") ?? "latest",
            keys: values.list("keys"), overwrite: values.choice("overwrite", default: .always))
    }

    func providers(of configuration: Configuration, store: [String]) -> [String] {
        [configuration.from, configuration.to]
    }

    func plan(_ configuration: Configuration, paths: PlanPaths) -> String {
        "restore snapshot \(configuration.snapshot) of the repository in \(configuration.from)"
            + "\(planKeys(configuration.keys)) into \(configuration.to) (overwrite \(configuration.overwrite.rawValue))"
    }

    func run(_ configuration: Configuration, in context: JobContext, report: inout JobReport)
        async throws(CloudSyncError)
    {
        let store = context.store
        let repository = try await context.backupRepository(
            in: configuration.from, codec: configuration.codec, create: false)
        let chosen = try Self.choose(configuration.snapshot, among: try await repository.snapshots(), in: repository)
        report.snapshot = chosen.id
        let filter = keyFilter(configuration.keys)
        let items = try await repository.restore(snapshot: chosen.id).filter { filter?($0.key) ?? true }
        let pageSize = context.pageSize(for: [configuration.to])
        for start in stride(from: 0, to: items.count, by: pageSize) {
            var page = Array(items[start..<min(start + pageSize, items.count)])
            if configuration.overwrite != .always {
                let current = try await store.read(page.map(\.key), from: configuration.to)
                let before = page.count
                page = zip(page, current).compactMap { configuration.overwrite.writes($0.value, over: $1) ? $0 : nil }
                report.add(before - page.count, to: Self.unchanged)
            }
            for (item, outcome) in zip(page, try await store.write(page, to: configuration.to)) {
                switch outcome {
                case .success: report.add(1, to: Self.restored)
                case .failure(let error):
                    report.record([KeyFailure(key: item.key, error: error)])
                    report.add(1, to: Self.failed)
                }
            }
            context.progress(min(start + pageSize, items.count), items.count)
        }
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
