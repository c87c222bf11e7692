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
            from: from, to: to, store: store, pageSize: pageSize, filter: keyFilter(configuration.keys),
            range: context.range)
        let setAside = context.setAside
        try await listing.prepare(providers: context.providers)
        let snapshot = MirrorSnapshot(state: context.state, job: context.jobName, from: from, to: to)
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
            try await mirrorPage(
                page.filter(\.onSource), from: from, to: to, snapshot: snapshot, in: context, report: &report)
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

    /// What one page found and did, for the snapshot: each key's new row, or nil to forget it.
    private typealias RowChanges = [(key: String, row: MirrorRow?)]

    /// A key read at the source that may have to be written: its listing entry, the value and its digest.
    private typealias Candidate = (entry: TwoSidedListing.Entry, value: String, digest: String)

    /// Makes `to` hold one page of `from`'s keys: skips keys whose tags on both sides match the snapshot, reads the
    /// rest at `from`, reads at `to` only what the snapshot cannot vouch for, and writes what differs.
    private func mirrorPage(
        _ entries: [TwoSidedListing.Entry], from: String, to: String, snapshot: MirrorSnapshot,
        in context: JobContext, report: inout JobReport
    ) async throws(CloudSyncError) {
        guard !entries.isEmpty else { return }
        let rows = try snapshot.rows(entries.map(\.key))
        var changes: RowChanges = []
        // Both tags as the snapshot saw them: nobody wrote either side since the job made them agree.
        var toRead: [TwoSidedListing.Entry] = []
        for entry in entries {
            if entry.onDestination, let row = rows[StoreKey(entry.key)], let source = entry.sourceVersion,
                let destination = entry.destinationVersion, row.sourceVersion == source,
                row.destinationVersion == destination
            {
                report.add(1, to: Self.unchanged)
            } else {
                toRead.append(entry)
            }
        }
        let candidates = try await readSource(
            toRead, from: from, rows: rows, in: context, changes: &changes, report: &report)
        let writes = try await differing(candidates, at: to, in: context, changes: &changes, report: &report)
        try await write(writes, to: to, in: context, changes: &changes, report: &report)
        try snapshot.update(changes)
    }

    /// Reads `entries` at the source; answers the keys that may differ at the destination, having counted those the
    /// snapshot still vouches for (the destination's tag unchanged, the source's value the same) and failures.
    private func readSource(
        _ entries: [TwoSidedListing.Entry], from: String, rows: [StoreKey: MirrorRow], in context: JobContext,
        changes: inout RowChanges, report: inout JobReport
    ) async throws(CloudSyncError) -> [Candidate] {
        let sourceValues = try await context.store.readEach(entries.map(\.key), from: from)
        var candidates: [Candidate] = []
        for (entry, read) in zip(entries, sourceValues) {
            let value: String
            switch read {
            case .failure(let error):
                report.record([KeyFailure(key: entry.key, error: error)])
                report.add(1, to: Self.failed)
                continue
            case .success(nil):
                // Gone from `from` since it was listed: the next run sees whether `to` should lose it.
                changes.append((entry.key, nil))
                continue
            case .success(let read?): value = read
            }
            let digest = SyncFingerprint.digest(of: value)
            let row = rows[StoreKey(entry.key)]
            // The destination's tag as the snapshot saw it, and the same value at the source: `to` still holds it.
            if entry.onDestination, let row, row.digest == digest, let destination = entry.destinationVersion,
                row.destinationVersion == destination
            {
                report.add(1, to: Self.unchanged)
                if row.sourceVersion != entry.sourceVersion {
                    changes.append(
                        (
                            entry.key,
                            MirrorRow(
                                digest: digest, sourceVersion: entry.sourceVersion, destinationVersion: destination)
                        ))
                }
                continue
            }
            candidates.append((entry, value, digest))
        }
        return candidates
    }

    /// Reads at `to` the candidates it lists and answers those to write, each saying whether it replaces a value;
    /// one whose destination could not be read (other than undecodable) is left alone, since writing could replace a
    /// value no one has seen.
    private func differing(
        _ candidates: [Candidate], at to: String, in context: JobContext, changes: inout RowChanges,
        report: inout JobReport
    ) async throws(CloudSyncError) -> [(candidate: Candidate, update: Bool)] {
        let held = candidates.filter(\.entry.onDestination).map(\.entry.key)
        let heldValues = try await context.store.readEach(held, from: to)
        var destination: [StoreKey: Result<String?, CloudSyncError>] = [:]
        for (key, value) in zip(held, heldValues) { destination[StoreKey(key)] = value }
        var writes: [(candidate: Candidate, update: Bool)] = []
        for candidate in candidates {
            let (entry, value, digest) = candidate
            switch destination[StoreKey(entry.key)] {
            case .success(let current?)? where current.utf8.elementsEqual(value.utf8):
                report.add(1, to: Self.unchanged)
                changes.append(
                    (
                        entry.key,
                        MirrorRow(
                            digest: digest, sourceVersion: entry.sourceVersion,
                            destinationVersion: entry.destinationVersion)
                    ))
            case .failure(let error)? where error.code != .decode:
                report.record([KeyFailure(key: entry.key, error: error)])
                report.add(1, to: Self.failed)
                changes.append((entry.key, nil))
            case .some(.success(.some)), .some(.failure): writes.append((candidate, true))
            case .some(.success(nil)), nil: writes.append((candidate, false))
            }
        }
        return writes
    }

    /// Writes `writes` to `to` and records, for each that landed, the tag the destination answered for the new value
    /// (or its digest, where that is its tag); with neither, the tag is unknown until it is listed again, and the next
    /// run reads the key there once.
    private func write(
        _ writes: [(candidate: Candidate, update: Bool)], to: String, in context: JobContext,
        changes: inout RowChanges, report: inout JobReport
    ) async throws(CloudSyncError) {
        guard !writes.isEmpty else { return }
        let store = context.store
        let tagIsDigest = try store.listsWrittenValuesDigests(on: to)
        let values = writes.map { KeyValue($0.candidate.entry.key, $0.candidate.value) }
        for (write, outcome) in zip(writes, try await store.writeVersioned(values, to: to)) {
            let (entry, _, digest) = write.candidate
            switch outcome {
            case .success(let version):
                report.add(1, to: write.update ? Self.updated : Self.copied)
                changes.append(
                    (
                        entry.key,
                        MirrorRow(
                            digest: digest, sourceVersion: entry.sourceVersion,
                            destinationVersion: version ?? (tagIsDigest ? digest : nil))
                    ))
            case .failure(let error):
                report.record([KeyFailure(key: entry.key, error: error)])
                report.add(1, to: Self.failed)
                changes.append((entry.key, nil))
            }
        }
    }
}

/// A mirror job's rows in the state database.
///
/// They are kept under a name that holds both providers: renaming either side starts a snapshot afresh rather than trusting one about other data. Without a state database (a dry run of a pipeline
/// that never ran) there are no rows, and every key is read on both sides.
struct MirrorSnapshot {
    let state: (any PipelineState)?
    let job: String

    init(state: (any PipelineState)?, job: String, from: String, to: String) {
        self.state = state
        self.job = "\(job)\u{1F}\(from)\u{1F}\(to)"
    }

    func rows(_ keys: [String]) throws(CloudSyncError) -> [StoreKey: MirrorRow] {
        try state?.mirrorRows(of: job, keys: keys) ?? [:]
    }

    func update(_ rows: [(key: String, row: MirrorRow?)]) throws(CloudSyncError) {
        try state?.updateMirrorRows(of: job, rows)
    }
}
