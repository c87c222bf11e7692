import CloudSync
import CloudSyncBackup
import CloudSyncPipeline

/// `forget`: removes the snapshots of a backup repository its keep policy does not keep and, with `prune`, the data
/// no remaining snapshot needs (``BackupRepository/forget(policy:tags:dryRun:)``, ``BackupRepository/prune(maxUnused:holding:)``).
struct ForgetJob: JobType {
    struct Configuration: Sendable {
        var repository: String
        var codec: String
        var keep: KeepPolicy
        var tags: [String]
        var prune: Bool
        var maxUnused: Double
    }

    static let kept = JobCount("kept", "snapshots kept")
    static let removed = JobCount("removed", "snapshots removed")
    static let objectsDeleted = JobCount("objectsDeleted", "repository objects deleted by the prune (packs, indexes)")
    static let bytesFreed = JobCount("bytesFreed", "bytes the repository holds fewer after the prune")

    let name = "forget"
    let summary = "remove backup snapshots outside a keep policy and, with prune, the data none still needs"
    let fields = [
        JobField("repository", .provider, required: true, summary: "the provider that keeps the repository"),
        JobField("codec", .codec, required: true, summary: "the codec whose key ring opens the repository"),
        JobField(
            "keep", .keepPolicy, required: true,
            summary: "the snapshots kept, with restic's meanings, per pipeline and source: last, hourly, daily, "
                + "weekly, monthly, yearly (counts) and within (a duration before the newest, like 30d)"),
        JobField("tags", .words, summary: "only snapshots carrying every one of these tags are considered"),
        JobField(
            "prune", .boolean, defaultValue: "false",
            summary: "then delete the data no snapshot needs, under the repository's exclusive lock"),
        JobField(
            "maxUnused", .text, defaultValue: "5%",
            summary: "how much unneeded data a prune may leave in packs it keeps whole, as a percentage of the "
                + "repository; 0% rewrites every pack holding any"),
    ]
    static let bytesRead = JobCount("bytesRead", "bytes of repository objects read, as stored")
    static let bytesWritten = JobCount(
        "bytesWritten", "bytes of repository objects written (the packs and index a prune rewrites, and its lock)")

    let counts = [kept, removed, objectsDeleted, bytesFreed, bytesRead, bytesWritten]

    func configuration(from values: JobFieldValues) throws(JobConfigurationError) -> Configuration {
        let text = values.text("maxUnused") ?? "5%"
        guard text.hasSuffix("%"), let percent = Double(text.dropLast()), (0...100).contains(percent) else {
            throw JobConfigurationError(
                field: "maxUnused", "`maxUnused` must be a percentage from 0% to 100% like \"5%\"; found \"\(text)\"")
        }
        return Configuration(
            repository: values.text("repository") ?? "", codec: values.text("codec") ?? "",
            keep: values.keepPolicy("keep") ?? KeepPolicy(), tags: values.list("tags") ?? [],
            prune: values.boolean("prune") ?? false, maxUnused: percent / 100)
    }

    func providers(of configuration: Configuration, store: [String]) -> [String] { [configuration.repository] }

    func plan(_ configuration: Configuration, paths: PlanPaths) -> String {
        let keep = configuration.keep
        var rules: [String] = []
        for (name, count) in [
            ("last", keep.last), ("hourly", keep.hourly), ("daily", keep.daily), ("weekly", keep.weekly),
            ("monthly", keep.monthly), ("yearly", keep.yearly),
        ] where count > 0 {
            rules.append("\(name) \(count)")
        }
        if let within = keep.within { rules.append("within \(within)") }
        return "forget snapshots of the repository in \(configuration.repository) outside keep "
            + rules.joined(separator: ", ")
            + (configuration.tags.isEmpty ? "" : " (tagged \(configuration.tags.joined(separator: ", ")))")
            + (configuration.prune ? ", then prune what none needs" : "")
    }

    func run(_ configuration: Configuration, in context: JobContext, report: inout JobReport)
        async throws(CloudSyncError)
    {
        let repository = try await context.backupRepository(
            in: configuration.repository, codec: configuration.codec, create: false)
        try await repository.withLock(exclusive: configuration.prune && !context.isDryRun) {
            lock throws(CloudSyncError) in
            let forgotten = try await repository.forget(
                policy: configuration.keep, tags: configuration.tags, dryRun: context.isDryRun)
            report[Self.kept] = forgotten.kept.count
            report[Self.removed] = forgotten.removed.count
            // The snapshots by id (what `restore --snapshot` takes), oldest first: a dry run's list of what would go.
            report.entry.keyLists = [
                Self.kept.name: forgotten.kept.prefix(JobReport.failureListLimit).map(\.id),
                Self.removed.name: forgotten.removed.prefix(JobReport.failureListLimit).map(\.id),
            ]
            guard configuration.prune && !context.isDryRun else { return }
            let pruned = try await repository.prune(maxUnused: configuration.maxUnused, holding: lock) { done, total in
                context.progress(done, total, unit: "packs")
            }
            report[Self.objectsDeleted] = pruned.objectsDeleted
            report[Self.bytesFreed] = pruned.bytesFreed
        }
        report[Self.bytesRead] = repository.bytesRead
        report[Self.bytesWritten] = repository.bytesWritten
    }
}
