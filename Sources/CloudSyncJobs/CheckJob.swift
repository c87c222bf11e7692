import CloudSync
import CloudSyncPipeline

/// `check`: compares two providers key by key, by decoded value, as rclone's `check` does; changes nothing.
///
/// Both listings are walked together in key order, a page at a time, so neither side is ever held whole. Values
/// compare as plaintext: two providers with different codecs (or one encrypted, one not) still match.
struct CheckJob: JobType {
    struct Configuration: Sendable, ShardedProviderPair {
        var from: String
        var to: String
        var keys: [String]?
        var oneWay: Bool
        var shards = 1
    }

    static let match = JobCount("match", "keys both hold with the same value")
    static let differ = JobCount("differ", "keys both hold with different values")
    static let missingOnDestination = JobCount("missingOnDestination", "keys only `from` holds")
    static let missingOnSource = JobCount("missingOnSource", "keys only `to` holds (not looked for with `oneWay`)")
    static let failed = JobCount("failed", "keys that could not be read or decoded on a side")

    let name = "check"
    let summary =
        "compare two providers' keys and decoded values; fails when anything differs or is missing (in a dry run, "
        + "after jobs that touch them, reports what it finds instead)"
    let fields = [
        JobField("from", .provider, required: true, summary: "the provider that holds what should be"),
        JobField("to", .provider, required: true, summary: "the provider compared with it"),
        keysField,
        JobField(
            "oneWay", .boolean, defaultValue: "false",
            summary: "only look for `from`'s keys in `to`: keys only `to` holds are not counted"),
        shardsField,
    ]
    let counts = [match, differ, missingOnDestination, missingOnSource, failed]

    func configuration(from values: JobFieldValues) throws(JobConfigurationError) -> Configuration {
        let (from, to) = try values.twoProviders("a check needs two different providers")
        return Configuration(
            from: from, to: to, keys: values.list("keys"), oneWay: values.boolean("oneWay") ?? false,
            shards: Int(values.number("shards") ?? 1))
    }

    func plan(_ configuration: Configuration, paths: PlanPaths) -> String {
        "compare \(configuration.from) with \(configuration.to)\(planKeys(configuration.keys)) by decoded value"
            + (configuration.oneWay ? ", one way (keys only in \(configuration.to) ignored)" : "")
            + (configuration.shards > 1 ? ", in \(configuration.shards) shards" : "")
    }

    func run(_ configuration: Configuration, in context: JobContext, report: inout JobReport)
        async throws(CloudSyncError)
    {
        let (from, to) = (configuration.from, configuration.to)
        let store = context.store
        let listing = TwoSidedListing(
            from: from, to: to, store: store, pageSize: context.pageSize(for: [from, to]),
            keys: configuration.keys, range: context.range)
        try await listing.prepare(providers: context.providers)
        var lists = KeyLists()
        var done = 0
        while !context.isInterrupted {
            let page = try await listing.nextPage()
            guard !page.isEmpty else { break }
            let wanted = configuration.oneWay ? page.filter(\.onSource) : page
            let listedBefore = report.entry.failures.count
            let counted = try await compare(
                wanted, from: from, to: to, oneWay: configuration.oneWay, in: context, lists: &lists, report: &report)
            for (count, value) in counted { report.add(value, to: count) }
            done += page.count
            context.progress(done, nil)
            // A sharded run records the page as done; a runner that lost its range stops.
            if let last = page.last?.key,
                await !context.batchDone(
                    counted, through: last, failures: Array(report.entry.failures[listedBefore...]))
            {
                break
            }
        }
        report.entry.keyLists = lists.lists
        if context.isInterrupted {
            report.status = .interrupted
        } else if context.isDryRun && Self.followsJobsTouching([from, to], in: context) {
            // The jobs before it in the file made none of their writes: it reports what it finds, and judges nothing.
        } else {
            failIfAnythingDiffers(&report)
        }
    }

    /// Whether a job before this one in the file (other than a check) reads or writes one of `providers`: in a dry
    /// run, what this check finds then is not what the real run's check would.
    static func followsJobsTouching(_ providers: [String], in context: JobContext) -> Bool {
        let jobs = context.compiled.spec.jobs
        guard let position = jobs.firstIndex(where: { $0.name == context.jobName }) else { return false }
        return jobs[..<position].contains { earlier in
            earlier.type != "check"
                && !Set(earlier.job.providers(store: context.storeProviders)).isDisjoint(with: providers)
        }
    }

    /// Reads one page's keys on both sides and counts each: the same value, different values, missing on one side
    /// (keys only at the destination ignored one way), or failed; differing and missing keys are listed.
    private func compare(
        _ entries: [TwoSidedListing.Entry], from: String, to: String, oneWay: Bool, in context: JobContext,
        lists: inout KeyLists, report: inout JobReport
    ) async throws(CloudSyncError) -> [JobCount: Int] {
        let sourceValues = try await context.store.readEach(entries.filter(\.onSource).map(\.key), from: from)
        let destinationValues = try await context.store.readEach(
            entries.filter(\.onDestination).map(\.key), from: to)
        var counted: [JobCount: Int] = [:]
        var sourceIndex = 0
        var destinationIndex = 0
        for entry in entries {
            // A key listed but gone when read counts as missing on that side.
            var left: Result<String?, CloudSyncError> = .success(nil)
            var right: Result<String?, CloudSyncError> = .success(nil)
            if entry.onSource {
                left = sourceValues[sourceIndex]
                sourceIndex += 1
            }
            if entry.onDestination {
                right = destinationValues[destinationIndex]
                destinationIndex += 1
            }
            switch (left, right) {
            case (.failure(let error), _), (_, .failure(let error)):
                report.record([KeyFailure(key: entry.key, error: error)])
                counted[Self.failed, default: 0] += 1
            case (.success(let a?), .success(let b?)):
                if a.utf8.elementsEqual(b.utf8) {
                    counted[Self.match, default: 0] += 1
                } else {
                    counted[Self.differ, default: 0] += 1
                    lists.add(entry.key, to: Self.differ)
                }
            case (.success(.some), .success(nil)):
                counted[Self.missingOnDestination, default: 0] += 1
                lists.add(entry.key, to: Self.missingOnDestination)
            case (.success(nil), .success(.some)):
                guard !oneWay else { continue }
                counted[Self.missingOnSource, default: 0] += 1
                lists.add(entry.key, to: Self.missingOnSource)
            case (.success(nil), .success(nil)):
                continue
            }
        }
        return counted
    }

    func finishSharded(
        _ configuration: Configuration, in context: JobContext, summed: [String: Int], report: inout JobReport
    ) async throws(CloudSyncError) {
        failIfAnythingDiffers(&report)
    }

    /// Failed when anything differs or is missing.
    private func failIfAnythingDiffers(_ report: inout JobReport) {
        if report[Self.differ] + report[Self.missingOnDestination] + report[Self.missingOnSource] > 0 {
            report.status = .failed
        }
    }
}
