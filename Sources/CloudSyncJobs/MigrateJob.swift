import CloudSync
import CloudSyncPipeline

/// `migrate`: copies keys from one provider to another, decoding with the source's codec and encoding with the
/// destination's; the source is never changed.
struct MigrateJob: JobType {
    struct Configuration: Sendable, ShardedProviderPair {
        var from: String
        var to: String
        var keys: [String]?
        var continueOnError: Bool
        var overwrite: Overwrite
        var shards: Int
        var reshape: ReshapeSpec
        /// A migration's step rewriting keys within one provider; nil for a job's.
        var inPlace: InPlaceRewrite?
    }

    static let copied = JobCount("copied", "keys written to `to`")
    static let skipped = JobCount(
        "skipped",
        "keys not written: gone from `from` when read, (`overwrite: ifMissing`) already at `to`, or left out by "
            + "`filter`")
    static let unchanged = JobCount(
        "unchanged",
        "keys `to` already held with `from`'s value, so not written: their version tags on both sides are those the "
            + "last run saw, or (`overwrite: ifDifferent`, or a tag that moved) a read found the same value")
    static let failed = JobCount("failed", "keys that could not be read, decoded or written")
    static let queued = JobCount("queued", "always 0: a migration writes directly, never through the outbox")
    static let changedSincePlan = JobCount(
        "changedSincePlan",
        "keys a saved plan names whose source or destination changed since the plan, left untouched (`cloudsync "
            + "apply`; 0 otherwise)")

    let name = "migrate"
    let summary = "copy keys from one provider to another; the source is never changed"
    let fields = [
        JobField("from", .provider, required: true, summary: "the provider copied from"),
        JobField("to", .provider, required: true, summary: "the provider copied to"),
        keysField,
        JobField(
            "continueOnError", .boolean, defaultValue: "true",
            summary: "keep going past a failing key; false stops at the first failing batch"),
        overwriteField,
        shardsField,
        renameField,
        filterField,
        transformField,
    ]
    let counts = [copied, skipped, unchanged, failed, queued, changedSincePlan]

    func configuration(from values: JobFieldValues) throws(JobConfigurationError) -> Configuration {
        let (from, to) = try values.twoProviders("a migration needs two different providers")
        return Configuration(
            from: from, to: to, keys: values.list("keys"), continueOnError: values.boolean("continueOnError") ?? true,
            overwrite: values.choice("overwrite", default: Overwrite.always),
            shards: Int(values.number("shards") ?? 1), reshape: ReshapeSpec(values), inPlace: InPlaceRewrite(values))
    }

    func plan(_ configuration: Configuration, paths: PlanPaths) -> String {
        "copy \(configuration.from) -> \(configuration.to)\(planKeys(configuration.keys)), overwrite "
            + configuration.overwrite.rawValue
            + (configuration.continueOnError ? ", continue past failures" : ", stop at the first failure")
            + (configuration.shards > 1 ? ", in \(configuration.shards) shards" : "") + configuration.reshape.planText
    }

    func run(_ configuration: Configuration, in context: JobContext, report: inout JobReport)
        async throws(CloudSyncError)
    {
        switch context.savedPlan {
        case .write(let header, let path)?:
            let planned = try await context.writePlan(
                header, path: path, from: configuration.from, to: configuration.to, keys: configuration.keys,
                overwrite: configuration.overwrite, reshape: try configuration.reshape.reshape(),
                inPlace: configuration.inPlace, report: &report)
            report[Self.copied] = planned[.copy, default: 0] + planned[.overwrite, default: 0]
            report[Self.unchanged] = planned[.unchanged, default: 0]
            report[Self.skipped] = planned[.skip, default: 0]
            report[Self.failed] = planned[.fail, default: 0]
            return
        case .apply(let header, let path)?:
            let applied = try await context.applyPlan(
                header, path: path, from: configuration.from, to: configuration.to,
                reshape: try configuration.reshape.reshape(), inPlace: configuration.inPlace, report: &report)
            report[Self.copied] = applied.written
            report[Self.unchanged] = applied.alreadyApplied
            report[Self.skipped] = applied.notPlanned
            report[Self.failed] = applied.failed
            report[Self.changedSincePlan] = applied.changedSincePlan
            return
        case nil:
            // Listing a provider while rewriting it would meet keys under their new names again.
            if configuration.inPlace != nil { throw InPlaceRewrite.needsPlan }
        }
        if remembers(configuration, in: context) {
            try await copyRemembering(configuration, in: context, report: &report)
            return
        }
        let result = try await context.copy(
            from: configuration.from, to: configuration.to, keys: configuration.keys,
            continueOnError: configuration.continueOnError, overwrite: configuration.overwrite,
            reshape: try configuration.reshape.reshape(), report: &report)
        report[Self.copied] = result.copied
        report[Self.skipped] = result.skipped
        report[Self.unchanged] = result.unchanged
        report[Self.failed] = result.failed
    }
}

/// `keys`, as every job that selects keys declares it.
let keysField = JobField(
    "keys", .keys, summary: "a glob or a list of globs (`*`, `?`, `[a-z]`, `**`) selecting keys; default: every key")

/// `overwrite`, as `migrate` and `import` declare it.
let overwriteField = JobField(
    "overwrite", .choice(Overwrite.allCases.map(\.rawValue)), defaultValue: "always",
    summary: "always replace what the destination holds, only write keys it lacks (ifMissing), or only keys it lacks "
        + "or holds with another value (ifDifferent, which costs a read of the destination and no write per "
        + "unchanged key)")

/// ` keys a, b` for a plan line, or nothing for every key.
func planKeys(_ keys: [String]?) -> String { keys.map { " keys \($0.joined(separator: ", "))" } ?? "" }

extension JobContext {
    /// Copies `from` → `to` page by page through the store's migration, recording failures in `report`.
    ///
    /// `onLanded` hears, batch by batch, the keys `to` acknowledged holding with `from`'s value. Marks the report
    /// interrupted when the run was.
    func copy(
        from: String, to: String, keys: [String]?, continueOnError: Bool, overwrite: Overwrite,
        reshape: MigrationReshape = .none, report: inout JobReport, onLanded: (([LandedCopy]) async -> Void)? = nil
    ) async throws(CloudSyncError) -> MigrationCounts {
        let name = jobName
        let watcher = onProgress
        var failures: [KeyFailure] = []
        // How many of `failures` a sharded run has recorded with a batch already.
        var recorded = 0
        let result = try await store.maintenance.migrateByPage(
            from: from, to: to, filter: keyFilter(keys), continueOnError: continueOnError, overwrite: overwrite,
            reshape: reshape, range: range, onProgress: { done, total in watcher?(name, done, total, "keys") },
            onFailures: { failed in
                failures += failed.prefix(max(0, JobReport.failureListLimit + 1 - failures.count))
            }, onLanded: onLanded,
            onBatch: shardProgress == nil
                ? nil
                : { done, last in
                    let named = failures[recorded...].map(RunReport.Failure.init)
                    recorded = failures.count
                    return await batchDone(
                        [
                            MigrateJob.copied: done.copied, MigrateJob.skipped: done.skipped,
                            MigrateJob.unchanged: done.unchanged, MigrateJob.failed: done.failed,
                        ], through: last, failures: named)
                },
            shouldStop: { [interrupt] in interrupt.isRaised })
        report.record(failures)
        report.recordOmitted(max(0, result.failed - failures.count))
        if !result.completed && isInterrupted { report.status = .interrupted }
        return result
    }
}
