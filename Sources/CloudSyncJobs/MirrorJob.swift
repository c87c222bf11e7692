import CloudSync
import CloudSyncPipeline

/// `mirror`: one-way; afterwards `to` holds exactly `from`'s keys (within `keys`) with `from`'s values, and `from`
/// is never written.
///
/// Both listings are walked together in key order, a page at a time, and only what differs is written. The job keeps
/// a snapshot in the state database ( `MirrorRow`: a digest of each value both sides held and the version tags
/// their listings gave, S3's ETag, Drive's checksum, CloudKit's `recordChangeTag`). A key whose tags on both sides
/// are the snapshot's is unchanged without a read; one whose source value has the snapshot's digest and whose
/// destination tag is the snapshot's needs no read at `to`; every other key is read on both sides and compared, so an
/// edit made at `to` behind the job's back, which changes its tag, is seen and undone, and a provider without tags
/// is always read. A value written to `to` has its tag recorded at once where the tag is known without a listing
/// (SQLite's, a digest of the stored value, with no codec in between); elsewhere the next run reads it once. Keys
/// only `to` holds are collected in a temporary table and removed once their count is known to be within
/// `maxDeletes`.
///
/// With `shards: N`, each range mirrors its keys and sets the keys only `to` holds aside in the shared state; once
/// every range is done, the runner that started the run judges them against `maxDeletes` as a whole and removes them.
struct MirrorJob: JobType {
    struct Configuration: Sendable, ShardedProviderPair {
        var from: String
        var to: String
        var keys: [String]?
        var deletes: Bool
        var maxDeletes: DeleteLimit
        var shards = 1
    }

    static let copied = JobCount("copied", "keys `to` lacked, written")
    static let updated = JobCount("updated", "keys `to` held with another value, rewritten")
    static let deleted = JobCount("deleted", "keys `from` no longer has, removed from `to`")
    static let unchanged = JobCount("unchanged", "keys `to` already held with `from`'s value: no write")
    static let failed = JobCount("failed", "keys that could not be read, decoded, written or removed")
    static let heldBack = JobCount("heldBack", "deletions not made because they were more than `maxDeletes` allows")
    static let changedSinceRead = JobCount(
        "changedSinceRead",
        "deletions `to` refused because another writer changed the key there after this run listed it; that value "
            + "stays until the next run")
    /// Keys `to` listed, recorded by a sharded run's ranges (not reported) for `maxDeletes`' percentage.
    static let destinationKeys = JobCount("destinationKeys", "keys `to` held")
    /// The list a sharded run's ranges set their keys only `to` holds aside in.
    static let deletionList = "deletions"

    let name = "mirror"
    let summary = "make one provider hold exactly another's keys and values, one way; the source is never written"
    let fields = [
        JobField("from", .provider, required: true, summary: "the provider mirrored; never written"),
        JobField("to", .provider, required: true, summary: "the provider made to match it"),
        keysField,
        JobField(
            "deletes", .boolean, defaultValue: "true",
            summary: "remove keys `from` does not have from `to` (within `keys`); false only adds and updates"),
        JobField(
            "maxDeletes", .deleteLimit, defaultValue: "50%",
            summary: "the most keys one run may remove from `to`: a count, or a percentage of the keys `to` held; "
                + "over it the job removes none and fails, and `cloudsync run --force` allows it once"),
        shardsField,
    ]
    let counts = [copied, updated, deleted, unchanged, failed, heldBack, changedSinceRead]

    func configuration(from values: JobFieldValues) throws(JobConfigurationError) -> Configuration {
        let (from, to) = try values.twoProviders("a mirror needs two different providers")
        return Configuration(
            from: from, to: to, keys: values.list("keys"), deletes: values.boolean("deletes") ?? true,
            maxDeletes: values.deleteLimit("maxDeletes") ?? .standard, shards: Int(values.number("shards") ?? 1))
    }

    func plan(_ configuration: Configuration, paths: PlanPaths) -> String {
        "mirror \(configuration.from) -> \(configuration.to)\(planKeys(configuration.keys)), "
            + (configuration.deletes
                ? "removing keys \(configuration.from) lacks (at most \(configuration.maxDeletes.description))"
                : "never removing")
            + (configuration.shards > 1 ? ", in \(configuration.shards) shards" : "")
    }

    func run(_ configuration: Configuration, in context: JobContext, report: inout JobReport)
        async throws(CloudSyncError)
    {
        let (from, to) = (configuration.from, configuration.to)
        let store = context.store
        let pageSize = context.pageSize(for: [from, to])
        let listing = TwoSidedListing(
            from: from, to: to, store: store, pageSize: pageSize, keys: configuration.keys, range: context.range)
        let setAside = context.setAside
        try await listing.prepare(providers: context.providers)
        let snapshot = MirrorSnapshot(state: context.state, job: context.jobName, from: from, to: to)
        let copier = RememberedCopy(from: from, to: to, snapshot: snapshot, comparesBeforeWriting: true)
        let extra = try KeySpill()
        var extraCount = 0
        var destinationKeys = 0
        var done = 0
        while !context.isInterrupted {
            let page = try await listing.nextPage()
            guard !page.isEmpty else { break }
            let before = counts.map { report[$0] }
            let listedBefore = report.entry.failures.count
            let listedAtDestination = page.filter(\.onDestination).count
            destinationKeys += listedAtDestination
            let onlyAtDestination = page.filter { !$0.onSource }.map(\.key)
            if configuration.deletes, !onlyAtDestination.isEmpty {
                if let setAside {
                    try setAside.add(onlyAtDestination, to: Self.deletionList)
                } else {
                    // With the tag listed, the removal can be made on the condition that nobody wrote it since.
                    try extra.add(
                        onlyAtDestination, versions: page.filter { !$0.onSource }.map(\.destinationVersion))
                }
                extraCount += onlyAtDestination.count
            }
            count(try await copier.copy(page.filter(\.onSource), in: context, report: &report), in: &report)
            done += page.count
            context.progress(done, nil)
            // A sharded run records the page; a runner that lost its range stops.
            var counted = [Self.destinationKeys: listedAtDestination]
            for (count, was) in zip(counts, before) { counted[count] = report[count] - was }
            if let last = page.last?.key,
                await !context.batchDone(
                    counted, through: last, failures: Array(report.entry.failures[listedBefore...]))
            {
                break
            }
        }
        guard !context.isInterrupted else {
            report.status = .interrupted
            return
        }
        // A sharded run removes once every range is done (``finishSharded``), where `maxDeletes` sees every key.
        guard setAside == nil else { return }
        try await removeExtra(
            extraCount, of: destinationKeys, configuration, snapshot: snapshot, pageSize: pageSize, in: context,
            report: &report
        ) { after, limit throws(CloudSyncError) in try extra.entries(after: after, limit: limit) }
    }

    /// Adds what one page of copies came to to the report's counts.
    private func count(_ tally: RememberedCopy.Tally, in report: inout JobReport) {
        report.add(tally.copied, to: Self.copied)
        report.add(tally.updated, to: Self.updated)
        report.add(tally.unchanged, to: Self.unchanged)
        report.add(tally.failed, to: Self.failed)
    }

    func finishSharded(
        _ configuration: Configuration, in context: JobContext, summed: [String: Int], report: inout JobReport
    ) async throws(CloudSyncError) {
        guard configuration.deletes, let setAside = context.setAside else { return }
        let snapshot = MirrorSnapshot(
            state: context.state, job: context.jobName, from: configuration.from, to: configuration.to)
        try await removeExtra(
            try setAside.count(of: Self.deletionList), of: summed[Self.destinationKeys.name] ?? 0, configuration,
            snapshot: snapshot, pageSize: context.pageSize(for: [configuration.from, configuration.to]), in: context,
            report: &report
        ) { after, limit throws(CloudSyncError) in
            try setAside.keys(of: Self.deletionList, after: after, limit: limit).map { ($0, nil) }
        }
    }

    /// Removes from `to` the `extraCount` keys only it holds, which `keys` hands out in pages in key order, once that
    /// many of the `destinationKeys` it held are within `maxDeletes` (or the run is forced).
    private func removeExtra(
        _ extraCount: Int, of destinationKeys: Int, _ configuration: Configuration, snapshot: MirrorSnapshot,
        pageSize: Int, in context: JobContext, report: inout JobReport,
        keys: (_ after: String?, _ limit: Int) throws(CloudSyncError) -> [(key: String, version: String?)]
    ) async throws(CloudSyncError) {
        let (from, to) = (configuration.from, configuration.to)
        let store = context.store
        guard configuration.deletes, extraCount > 0 else { return }
        guard
            report.allowsDeletions(
                extraCount, of: destinationKeys, in: to, limit: configuration.maxDeletes, forced: context.isForced,
                job: "mirror", heldBack: Self.heldBack, check: "that \(from) is the provider you meant")
        else { return }
        var lists = KeyLists()
        var after: String?
        while !context.isInterrupted {
            let entries = try keys(after, pageSize)
            guard let last = entries.last else { break }
            after = last.key
            var removed: [(key: String, row: MirrorRow?)] = []
            let keys = entries.map(\.key)
            // Each removed only as listed (or read): a value written to `to` since stays, for the next run to judge.
            for (key, outcome) in zip(
                keys, try await store.removeAsSeen(keys, versions: entries.map(\.version), from: to))
            {
                switch outcome {
                case .removed, .absent:
                    report.add(1, to: Self.deleted)
                    lists.add(key, to: Self.deleted)
                    removed.append((key, nil))
                case .changed:
                    report.add(1, to: Self.changedSinceRead)
                case .failed(let error):
                    report.record([KeyFailure(key: key, error: error)])
                    report.add(1, to: Self.failed)
                }
            }
            try snapshot.update(removed)
        }
        report.entry.keyLists = lists.lists
        if context.isInterrupted { report.status = .interrupted }
    }
}
