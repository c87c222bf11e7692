import CloudSync
import CloudSyncPipeline
import Foundation

/// `sync`: makes every listed provider hold the same keys and values, N-way, against a snapshot of what the last
/// sync left, so deletions propagate (within `maxDeletes`) and edits on several sides are conflicts.
///
/// It runs in four phases, each a method of ``SyncRun``: **list** (probe each provider, read its change feed or
/// listing into key order), **merge and decide** (walk the listings and the snapshot together, a page at a time; the
/// store's `syncPage` decides and writes each page), **delete** (the deletions collected, once their count is within
/// `maxDeletes`), and **record** (the snapshot rows, then the feed cursors of a clean run).
///
/// With `shards: N` (full comparisons only), each range lists, merges and decides its keys, committing its snapshot
/// rows and deletions with every page; once every range is done, the runner that started the run deletes and records
/// for the whole job (``finishSharded(_:in:summed:report:)``), so `maxDeletes` judges every deletion at once.
struct SyncJob: JobType {
    struct Configuration: Sendable {
        /// Nil for every provider of the store.
        var providers: [String]?
        var deletes: SyncDeletes
        var maxDeletes: DeleteLimit
        var incremental: Bool
        /// Read every copy, even of keys whose listed version tags vouch that nothing changed.
        var readUnchanged = false
        var shards = 1
    }

    static let keys = JobCount("keys", "keys compared")
    static let inSync = JobCount("inSync", "keys every provider already held alike")
    static let repaired = JobCount("repaired", "keys written to providers that lacked them or held another value")
    static let skipped = JobCount("skipped", "keys left alone: gone everywhere, or too large for a provider")
    static let failed = JobCount("failed", "keys that could not be read, decoded or written")
    static let queued = JobCount("queued", "keys some write of waits in the outbox")
    static let deleted = JobCount("deleted", "keys deleted everywhere because some provider deleted them")
    static let conflicts = JobCount("conflicts", "keys changed on several sides since the last sync")
    static let heldBack = JobCount(
        "heldBack", "deletions not made: a provider's copy changed since the snapshot, or its write may still land")
    static let changedSinceRead = JobCount(
        "changedSinceRead",
        "deletions a provider refused because another writer changed the key there after this sync read it; that "
            + "value stays, and the next sync sees it")
    /// Recorded by a sharded run's ranges, not reported: the snapshot rows they compared against (for `maxDeletes`'
    /// percentage) and the deletions they set aside.
    static let snapshotKeys = JobCount("snapshotKeys", "keys the last sync left")
    static let deletions = JobCount("deletions", "keys to delete")
    /// Key lists a sharded run's ranges hand the finishing step: conflicts and unlisted providers, each as JSON.
    static let conflictList = "sync.conflicts"
    static let unlistedList = "sync.unlisted"

    let name = "sync"
    let summary = "make every provider of the store hold the same keys and values, deletions included"
    let fields = [
        JobField("providers", .providers, summary: "a subset of the store's providers; default: all of them"),
        JobField(
            "deletes", .choice(SyncDeletes.allCases.map(\.rawValue)), defaultValue: "propagate",
            summary: "what to do with a key deleted on some providers since the last sync and unchanged on the "
                + "others: propagate (remove it everywhere) or ignore (copy it back, a plain union)"),
        JobField(
            "maxDeletes", .deleteLimit, defaultValue: "50%",
            summary: "the most keys one run may delete: a count, or a percentage of the keys the last sync left; "
                + "over it the job deletes nothing and fails, and `cloudsync run --force` allows it once"),
        JobField(
            "incremental", .boolean, defaultValue: "false",
            summary: "read only the keys changed since the last clean run where a provider offers a change feed "
                + "(sqlite, memory, googleDrive, cloudKit); the others are compared in full"),
        JobField(
            "readUnchanged", .boolean, defaultValue: "false",
            summary: "true reads and decodes every copy, even of keys whose listed version tags show no change since "
                + "a sync found them in sync (once after replacing a codec's key or changing the resolver: "
                + "`cloudsync run --read-unchanged` does so for one run)"),
        shardsField,
    ]
    /// The counts a report shows.
    static let reported = [
        keys, inSync, repaired, skipped, failed, queued, deleted, conflicts, heldBack, changedSinceRead,
    ]
    let counts = reported
    /// An unavailable provider is left out of the sync (`sync.unlisted`), not a reason to skip it.
    let checksAvailability = false

    func configuration(from values: JobFieldValues) throws(JobConfigurationError) -> Configuration {
        let configuration = Configuration(
            providers: values.list("providers"), deletes: values.choice("deletes", default: SyncDeletes.propagate),
            maxDeletes: values.deleteLimit("maxDeletes") ?? .standard,
            incremental: values.boolean("incremental") ?? false,
            readUnchanged: values.boolean("readUnchanged") ?? false, shards: Int(values.number("shards") ?? 1))
        if configuration.shards > 1 && configuration.incremental {
            throw JobConfigurationError(
                field: "shards",
                "a sync split into shards compares every key in full (a change feed has one cursor for the whole "
                    + "provider); remove `incremental` or `shards`")
        }
        return configuration
    }

    /// Ranges of the first provider's keys (the store's first when the job names none); a range's run covers every
    /// provider's keys and the snapshot's rows in it.
    func sharding(of configuration: Configuration) -> JobSharding? {
        JobSharding(shards: configuration.shards, source: configuration.providers?.first ?? "")
    }

    func prepareSharded(_ configuration: Configuration, in context: JobContext) throws(CloudSyncError) {
        // Deletions an earlier run left (one that stopped, or one whose deletions maxDeletes refused) are not this
        // run's: the ranges collect their own.
        try context.state?.clearDeletions(of: context.jobName)
    }

    func providers(of configuration: Configuration, store: [String]) -> [String] {
        configuration.providers ?? store
    }

    func plan(_ configuration: Configuration, paths: PlanPaths) -> String {
        "sync every key across " + (configuration.providers?.joined(separator: ", ") ?? "the store's providers")
            + (configuration.deletes == .propagate
                ? ", deletions propagate (at most \(configuration.maxDeletes.description))"
                : ", deletions ignored (union)")
            + (configuration.incremental ? ", incremental from change feeds" : "")
            + (configuration.readUnchanged ? ", reading every copy" : "")
            + (configuration.shards > 1 ? ", in \(configuration.shards) shards" : "")
    }

    func run(_ configuration: Configuration, in context: JobContext, report: inout JobReport)
        async throws(CloudSyncError)
    {
        let run = try SyncRun(configuration, ids: configuration.providers ?? context.storeProviders, context: context)
        try await run.list()
        try await run.mergeAndDecide(into: &report)
        guard !context.isInterrupted else {
            report.status = .interrupted
            return
        }
        // A range of a sharded run hands what it saw to the finishing step, which deletes and records.
        if run.isRange {
            report.entry.sync = nil
            report.entry.keyLists = run.rangeLists
            return
        }
        guard try await run.delete(into: &report), !context.isInterrupted else {
            if context.isInterrupted { report.status = .interrupted }
            return
        }
        try run.record(report)
    }

    /// Deletes what every range set aside, within `maxDeletes` judged on the whole job, and marks the job synced.
    func finishSharded(
        _ configuration: Configuration, in context: JobContext, summed: [String: Int], report: inout JobReport
    ) async throws(CloudSyncError) {
        var context = context
        context.setAside = nil
        let run = try SyncRun(
            configuration, ids: configuration.providers ?? context.storeProviders, context: context, finishing: true)
        try run.adopt(
            snapshotKeys: summed[Self.snapshotKeys.name] ?? 0, deletions: summed[Self.deletions.name] ?? 0,
            lists: report.entry.keyLists ?? [:])
        report.entry.keyLists = nil
        defer { report.entry.sync = run.details }
        guard try await run.delete(into: &report), !context.isInterrupted else {
            if context.isInterrupted { report.status = .interrupted }
            try? context.state?.clearDeletions(of: context.jobName)
            return
        }
        try run.record(report)
    }
}

/// One run of a sync job: what its phases share.
final class SyncRun {
    /// Keys per page a sync reads, compares and writes; each page's snapshot rows commit together.
    static let pageSize = 1000
    /// Snapshot rows and deletions a sync collects before committing them (or after a second).
    static let commitRows = 20_000

    /// When the rows a phase collected are due to commit: every ``commitRows`` rows, or a second after the last
    /// commit (each commit costs fsyncs; a run that stops loses at most what it collected since).
    struct CommitPacing {
        private let clock: any StoreClock
        private var last: Int64

        init(clock: any StoreClock) {
            self.clock = clock
            last = clock.nowMilliseconds()
        }

        func isDue(rows: Int) -> Bool { rows >= SyncRun.commitRows || clock.nowMilliseconds() - last >= 1_000 }
        mutating func committed() { last = clock.nowMilliseconds() }
    }
    /// The most keys a report lists of a sync's deletions or conflicts.
    static let listLimit = 100

    let configuration: SyncJob.Configuration
    let ids: [String]
    let context: JobContext
    let job: String
    let state: (any PipelineState)?
    let firstRun: Bool
    let pageSize: Int
    private var unlisted: [String: CloudSyncError] = [:]
    private var sources: [OrderedKeys] = []
    private var modes: [String: String] = [:]
    private var fullBecause: [String: String] = [:]
    private var newCursors: [String: String] = [:]
    /// Every listed provider reads from its feed: the keys changed anywhere are all there is to compare.
    private var changedOnly = false
    private var snapshotKeys = 0
    private var deletionCount = 0
    private var deletionKeys: [String] = []
    private var conflicts: [RunReport.Conflict] = []
    /// Provider ids whose keys are unknown (not store keys).
    private var unknown: Set<String> = []

    /// A range of a sharded run (its runner set a range and where to set keys aside).
    let isRange: Bool

    /// `finishing`: the step after a sharded run's ranges, which keeps the deletions they collected.
    init(_ configuration: SyncJob.Configuration, ids: [String], context: JobContext, finishing: Bool = false)
        throws(CloudSyncError)
    {
        self.configuration = configuration
        self.ids = ids
        self.context = context
        job = context.jobName
        state = context.state
        firstRun = !((try state?.hasSynced(job)) ?? false)
        pageSize = context.pageSize(for: ids, floor: Self.pageSize)
        isRange = context.setAside != nil
        // The ranges of one sharded run share the job's deletions; the run clears them when it starts.
        if !isRange && !finishing { try state?.clearDeletions(of: job) }
    }

    /// What a range hands the finishing step besides its counts: its conflicts and unlisted providers, as JSON.
    var rangeLists: [String: [String]] {
        let encoder = JSONEncoder.sorted
        let encode: (any Encodable) -> String = { String(decoding: (try? encoder.encode($0)) ?? Data(), as: UTF8.self) }
        return [
            SyncJob.conflictList: conflicts.map(encode),
            SyncJob.unlistedList: details.unlisted.map(encode),
        ]
    }

    /// Takes over what a sharded run's ranges found, for the deletions and the record of the whole job.
    func adopt(snapshotKeys: Int, deletions: Int, lists: [String: [String]]) throws(CloudSyncError) {
        self.snapshotKeys = snapshotKeys
        deletionCount = deletions
        let decoder = JSONDecoder()
        conflicts = (lists[SyncJob.conflictList] ?? []).compactMap {
            try? decoder.decode(RunReport.Conflict.self, from: Data($0.utf8))
        }
        for failure in (lists[SyncJob.unlistedList] ?? []).compactMap({
            try? decoder.decode(RunReport.Failure.self, from: Data($0.utf8))
        }) {
            guard let id = failure.provider, unlisted[id] == nil else { continue }
            unlisted[id] = CloudSyncError(ErrorCode(rawValue: failure.code), failure.message, provider: id)
        }
        unknown = Set(unlisted.keys)  // provider ids, not store keys
        deletionKeys = try state?.deletions(of: job, after: nil, limit: Self.listLimit).map(\.key) ?? []
    }

    // MARK: List

    /// Probes each provider (under the store's deadline: a hung one is left out, not waited on) and prepares its
    /// keys in bytewise order: from its change feed since the last clean run, straight from a listing in key order,
    /// or sorted into a temporary table first.
    func list() async throws(CloudSyncError) {
        let store = context.store
        let incremental = configuration.incremental
        let storedCursors = incremental && !firstRun ? (try state?.syncCursors(of: job) ?? [:]) : [:]
        for id in ids {
            guard let provider = context.providers[id] else { continue }
            guard provider.capabilities.canList else {
                unlisted[id] = CloudSyncError(.unsupported, "this provider cannot list its keys", provider: id)
                continue
            }
            let availability = try await store.availability(of: id)
            guard availability.isAvailable else {
                unlisted[id] = CloudSyncError(
                    .noProvider, "it was unavailable (\(availability)); its keys were neither read nor deleted",
                    provider: id)
                continue
            }
            let source = OrderedKeys(id: id, readsAhead: true)
            source.begin(in: context.range, listing: provider.capabilities)
            if incremental {
                if let stored = storedCursors[id] {
                    switch await source.spillChanges(from: store, since: stored, pageSize: pageSize) {
                    case .read(let cursor):
                        modes[id] = "incremental"
                        newCursors[id] = cursor
                        sources.append(source)
                        continue
                    case .expired(let reason):
                        fullBecause[id] = "its cursor was refused: \(reason)"
                    case .failed:
                        // A provider that is really down fails its listing next, and is left out then.
                        fullBecause[id] = "its change feed failed: \(source.error?.message ?? "")"
                        source.clearError()
                    }
                }
                // The feed's position before the listing: whatever changes from here on, the next run reads.
                let cursor: String?
                do throws(CloudSyncError) {
                    cursor = try await store.changeFeedCursor(of: id)
                } catch {
                    cursor = nil
                    fullBecause[id] = "its change feed failed: \(error.message)"
                }
                if let cursor { newCursors[id] = cursor }
                if fullBecause[id] == nil {
                    fullBecause[id] =
                        cursor == nil
                        ? "it offers no change feed"
                        : firstRun || storedCursors.isEmpty ? "no earlier clean run left a cursor" : "it had no cursor"
                }
                modes[id] = "full"
            }
            if !provider.capabilities.listsInKeyOrder {
                await source.spillListing(from: store, pageSize: pageSize)
                if let error = source.error {
                    unlisted[id] = error
                    continue
                }
            }
            sources.append(source)
        }
        changedOnly = incremental && !sources.isEmpty && sources.allSatisfy { modes[$0.id] == "incremental" }
        unknown = Set(unlisted.keys)  // provider ids, not store keys
        // maxDeletes counts against the keys the last sync left, as a full run's merge counts them.
        if changedOnly { snapshotKeys = try state?.snapshotCount(of: job) ?? 0 }
    }

    // MARK: Merge and decide

    /// Walks every provider's keys and the snapshot together in key order, a page at a time; the store decides and
    /// writes each page, and the snapshot rows and deletions it leaves commit every few pages (each commit costs
    /// fsyncs; the providers' writes always land before the rows that describe them).
    func mergeAndDecide(into report: inout JobReport) async throws(CloudSyncError) {
        let store = context.store
        let snapshot = SnapshotRows(
            state: changedOnly ? nil : state, job: job, pageSize: pageSize, range: context.range)
        var lostRange = false
        var pendingRows: [(key: String, fingerprint: SyncFingerprint?)] = []
        var pendingDeletions: [String] = []
        var pacing = CommitPacing(clock: context.clock)
        func commit() throws(CloudSyncError) {
            try state?.recordSyncProgress(of: job, snapshot: pendingRows, deletions: pendingDeletions)
            pendingRows.removeAll(keepingCapacity: true)
            pendingDeletions.removeAll(keepingCapacity: true)
            pacing.committed()
        }
        func process(_ batch: [SyncItem], tags: [String: [String?]], into report: inout JobReport)
            async throws(CloudSyncError)
        {
            var batch = batch
            if changedOnly, let state {
                let rows = try state.snapshotRows(of: job, keys: batch.map(\.key))
                var byKey: [StoreKey: SyncFingerprint] = [:]
                for row in rows { byKey[StoreKey(row.key)] = row.fingerprint }
                for index in batch.indices { batch[index].baseline = byKey[StoreKey(batch[index].key)] }
            }
            let before = SyncJob.reported.map { report[$0] }
            let listedBefore = report.entry.failures.count
            try requireAComparableProvider()
            let result = try await store.maintenance.syncPage(
                batch, among: ids, unknown: unknown, deletes: configuration.deletes,
                listedTags: configuration.readUnchanged || context.readsUnchanged ? [:] : tags)
            leaveOut(result.leftOut, from: batch.first?.key ?? "")
            report.add(result.keys, to: SyncJob.keys)
            report.add(result.inSync, to: SyncJob.inSync)
            report.add(result.repaired, to: SyncJob.repaired)
            report.add(result.skipped, to: SyncJob.skipped)
            report.add(result.queued, to: SyncJob.queued)
            report.add(result.failed.count, to: SyncJob.failed)
            report.add(result.conflicts.count, to: SyncJob.conflicts)
            report.add(result.heldBack.count, to: SyncJob.heldBack)
            report.record(result.failed)
            for conflict in result.conflicts where conflicts.count < Self.listLimit {
                conflicts.append(
                    RunReport.Conflict(
                        key: conflict.key, kind: conflict.kind.rawValue, editedOn: conflict.editedOn,
                        deletedOn: conflict.deletedOn))
            }
            pendingRows += result.snapshot
            pendingDeletions += result.deletions.map(\.key)
            deletionCount += result.deletions.count
            for item in result.deletions where deletionKeys.count < Self.listLimit { deletionKeys.append(item.key) }
            if isRange {
                // A range commits every page before recording it, so a runner that takes it over resumes after
                // rows that are all there.
                try commit()
                var counted = [
                    SyncJob.snapshotKeys: batch.filter { $0.baseline != nil }.count,
                    SyncJob.deletions: result.deletions.count,
                ]
                for (count, was) in zip(SyncJob.reported, before) { counted[count] = report[count] - was }
                if let last = batch.last?.key,
                    await !context.batchDone(
                        counted, through: last, failures: Array(report.entry.failures[listedBefore...]))
                {
                    lostRange = true
                }
            } else if pacing.isDue(rows: pendingRows.count + pendingDeletions.count) {
                try commit()
            }
            context.progress(report[SyncJob.keys], nil)
        }

        var batch: [SyncItem] = []
        batch.reserveCapacity(pageSize)
        // Each listing's version tag of each key of the page (nil where it has none or lacks the key): keys whose
        // snapshot rows record the same tags are in sync without being read.
        var tagColumns = [[String?]](repeating: [], count: sources.count)
        var tags: [String: [String?]] {
            Dictionary(uniqueKeysWithValues: zip(sources.map(\.id), tagColumns))
        }
        func clearTags() { for index in tagColumns.indices { tagColumns[index].removeAll(keepingCapacity: true) } }
        // A page still read ahead is waited for on every way out, so the state database is left alone after.
        do throws(CloudSyncError) {
            while !lostRange {
                if context.isInterrupted { break }
                for source in sources where source.needsRefill {
                    await source.refill(from: store, pageSize: pageSize)
                    if let error = source.error, unlisted[source.id] == nil {
                        unlisted[source.id] = error
                        unknown.insert(source.id)
                    }
                }
                if snapshot.needsRefill { try await snapshot.refill() }
                var next = snapshot.head?.key
                for source in sources {
                    guard let head = source.head else { continue }
                    if let smallest = next, !StoreKey.bytesPrecede(head, smallest) { continue }
                    next = head
                }
                guard let key = next else { break }
                var baseline: SyncFingerprint?
                if let row = snapshot.head, StoreKey.bytesEqual(row.key, key) {
                    baseline = row.fingerprint
                    snapshotKeys += 1
                    snapshot.advance()
                }
                for (index, source) in sources.enumerated() {
                    if let head = source.head, StoreKey.bytesEqual(head, key) {
                        tagColumns[index].append(source.headVersion)
                        source.advance()
                    } else {
                        tagColumns[index].append(nil)
                    }
                }
                batch.append(SyncItem(key: key, baseline: baseline))
                if batch.count == pageSize {
                    try await process(batch, tags: tags, into: &report)
                    batch.removeAll(keepingCapacity: true)
                    clearTags()
                }
            }
            if !batch.isEmpty, !context.isInterrupted, !lostRange {
                try await process(batch, tags: tags, into: &report)
            }
        } catch {
            await snapshot.settle()
            for source in sources { await source.settle() }
            throw error
        }
        await snapshot.settle()
        for source in sources { await source.settle() }
        try commit()
        report.entry.sync = details
    }

    /// Throws `ERR_NO_PROVIDER` naming why each provider was counted out, once none is left to compare.
    private func requireAComparableProvider() throws(CloudSyncError) {
        guard !ids.isEmpty, ids.allSatisfy({ unknown.contains($0) }) else { return }
        let reasons = ids.map { id in "\(id) (\(unlisted[id]?.message ?? "left out"))" }
        throw CloudSyncError(
            .noProvider,
            "no provider is left to compare: \(reasons.joined(separator: "; ")); the next run compares these "
                + "keys again")
    }

    /// Counts providers a page was decided without (they answered unavailable when it began) as unlisted from here
    /// on: the run reports them, their copies stay unknown for the rest of the walk, and the feed cursors do not
    /// advance past keys they did not take.
    private func leaveOut(_ answers: [String: Availability], from key: String) {
        for (id, answer) in answers where unlisted[id] == nil {
            unlisted[id] = CloudSyncError(
                .noProvider,
                "it became unavailable during the run (\(answer)); keys from \"\(key)\" on were compared without it "
                    + "and the next run compares them again",
                provider: id)
            unknown.insert(id)
        }
    }

    /// What the report says the job compared against, could not see, deleted and chose.
    var details: RunReport.SyncDetails {
        RunReport.SyncDetails(
            firstRun: firstRun, deletes: configuration.deletes.rawValue,
            maxDeletes: configuration.maxDeletes.description,
            unlisted: unlisted.sorted { $0.key < $1.key }.map { id, error in
                RunReport.Failure(key: "", provider: id, code: error.code.rawValue, message: error.message)
            }, conflicts: conflicts, deletions: deletionKeys,
            deletionsOmitted: max(0, deletionCount - deletionKeys.count),
            modes: configuration.incremental ? modes : nil,
            fullBecause: configuration.incremental ? fullBecause : nil)
    }

    // MARK: Delete

    /// Deletes what was deleted since the last run, once the count is known to be within `maxDeletes` (or
    /// `--force` lets it through); returns false when the guard stopped it.
    func delete(into report: inout JobReport) async throws(CloudSyncError) -> Bool {
        let allowed = configuration.maxDeletes.allowed(snapshotKeys: snapshotKeys)
        if deletionCount > allowed && !context.isForced {
            report.status = .failed
            report.error = RunReport.Failure(
                key: "", provider: nil, code: ErrorCode.tooManyDeletes.rawValue,
                message:
                    "this sync would delete \(deletionCount) of the \(snapshotKeys) keys the last sync left, more "
                    + "than maxDeletes (\(configuration.maxDeletes.description)) allows, so it deleted none; check "
                    + "the deletions listed in the report, then run again with --force to allow them once")
            return false
        }
        guard !context.isDryRun, let state else {
            report[SyncJob.deleted] = deletionCount
            return true
        }
        var after: String?
        // The rows of removed keys commit every few pages, as the merge's rows do: a row left by a run that stops
        // first names a key no provider holds, which the next sync drops without deleting anything.
        var removed: [(key: String, fingerprint: SyncFingerprint?)] = []
        var pacing = CommitPacing(clock: context.clock)
        func commit() throws(CloudSyncError) {
            try state.updateSnapshot(of: job, removed)
            removed.removeAll(keepingCapacity: true)
            pacing.committed()
        }
        do throws(CloudSyncError) {
            while !context.isInterrupted {
                let items = try state.deletions(of: job, after: after, limit: pageSize)
                guard let last = items.last else { break }
                after = last.key
                let result = try await context.store.maintenance.removeUnchanged(items, among: ids, unknown: unknown)
                report.add(result.removed.count, to: SyncJob.deleted)
                // A copy changed since the merge found the key deleted elsewhere is held back too: not removed, and
                // seen again by the next run.
                report.add(result.heldBack + result.changedSince, to: SyncJob.heldBack)
                report.add(result.changedSinceRead, to: SyncJob.changedSinceRead)
                report.add(result.queued, to: SyncJob.queued)
                report.add(result.failed.count, to: SyncJob.failed)
                report.record(result.failed)
                removed += result.removed.map { ($0, nil) }
                if pacing.isDue(rows: removed.count) { try commit() }
            }
        } catch {
            try? commit()
            throw error
        }
        try commit()
        try state.clearDeletions(of: job)
        return true
    }

    // MARK: Record

    /// Marks the job synced; the feed cursors taken before reading advance only past a run that left nothing to
    /// look at again (no failures, queued writes, held-back deletions or unlisted providers), so the next run sees
    /// again whatever was left.
    func record(_ report: JobReport) throws(CloudSyncError) {
        let clean =
            unlisted.isEmpty && report[SyncJob.failed] == 0 && report[SyncJob.queued] == 0
            && report[SyncJob.heldBack] == 0
        try state?.markSynced(
            job, at: iso8601(context.clock.nowMilliseconds()),
            cursors: configuration.incremental && clean && !context.isDryRun ? newCursors : nil)
    }
}
