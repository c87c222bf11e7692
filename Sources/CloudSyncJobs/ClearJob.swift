import CloudSync
import CloudSyncPipeline

/// `clear`: removes every key from one provider, or from the whole store; refused unless confirmed.
struct ClearJob: JobType {
    struct Configuration: Sendable {
        /// Nil for the whole store (`provider: all`).
        var provider: String?
        var confirm: Bool
        var shards: Int
    }

    static let removed = JobCount("removed", "keys removed")
    static let failed = JobCount("failed", "keys that could not be removed")
    static let queued = JobCount("queued", "removals waiting in the outbox for a provider that could not take them")

    let name = "clear"
    let summary = "remove every key from one provider or the whole store"
    let fields = [
        JobField("provider", .providerOrAll, required: true, summary: "the provider to empty, or all for the store"),
        JobField(
            "confirm", .boolean, defaultValue: "false",
            summary: "run without `--yes`; without either the job is refused"),
        shardsField,
    ]
    let counts = [removed, failed, queued]

    func configuration(from values: JobFieldValues) throws(JobConfigurationError) -> Configuration {
        let provider = values.text("provider")
        let shards = Int(values.number("shards") ?? 1)
        if provider == "all" && shards > 1 {
            throw JobConfigurationError(
                field: "shards", "only a clear of one provider splits into shards; name the provider, or remove shards")
        }
        return Configuration(
            provider: provider == "all" ? nil : provider, confirm: values.boolean("confirm") ?? false, shards: shards)
    }

    func sharding(of configuration: Configuration) -> JobSharding? {
        configuration.provider.map { JobSharding(shards: configuration.shards, source: $0) }
    }

    func providers(of configuration: Configuration, store: [String]) -> [String] {
        configuration.provider.map { [$0] } ?? store
    }

    func plan(_ configuration: Configuration, paths: PlanPaths) -> String {
        "remove every key from \(configuration.provider ?? "all providers")"
            + (configuration.confirm ? " (confirmed)" : " (needs --yes)")
    }

    func run(_ configuration: Configuration, in context: JobContext, report: inout JobReport)
        async throws(CloudSyncError)
    {
        guard configuration.confirm || context.isConfirmed else {
            throw CloudSyncError(
                .config, "clear removes data: refused without `confirm: true` in the job or --yes on the command line")
        }
        guard let provider = configuration.provider else {
            let result = try await context.store.clear()
            report.record(result.failed)
            report[Self.removed] = result.removed
            report[Self.failed] = result.failed.count
            report[Self.queued] = result.queued
            return
        }
        // Listing continues after the last key seen, so removals behind the cursor do not disturb it.
        try await context.forEachPageInRange(of: provider, pageSize: context.pageSize(for: [provider])) {
            (keys) throws(CloudSyncError) in
            var removed = 0
            var failed = 0
            let listedBefore = report.entry.failures.count
            for (key, result) in zip(keys, try await context.store.remove(keys, from: provider)) {
                if case .failure(let error) = result {
                    report.record([KeyFailure(key: key, error: error)])
                    failed += 1
                } else {
                    removed += 1
                }
            }
            report.add(removed, to: Self.removed)
            report.add(failed, to: Self.failed)
            return await context.batchDone(
                [Self.removed: removed, Self.failed: failed], through: keys.last ?? "",
                failures: Array(report.entry.failures[listedBefore...]))
        }
    }
}
