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
        /// Whether `incremental` is the default rather than the file's word: then a run reads change feeds only when
        /// every provider has a cursor, since a feed carries no version tags and a provider compared in full beside
        /// it would have every key it lists read.
        var incrementalByDefault = false
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
            "incremental", .boolean, defaultValue: "true",
            summary: "read only the keys changed since the last clean run from change feeds (sqlite, memory, "
                + "googleDrive, cloudKit): by default when every provider has one, with `true` also each that has "
                + "one beside others compared in full; false compares every provider in full (the default with "
                + "`shards`)"),
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
        let shards = Int(values.number("shards") ?? 1)
        let configuration = Configuration(
            providers: values.list("providers"), deletes: values.choice("deletes", default: SyncDeletes.propagate),
            maxDeletes: values.deleteLimit("maxDeletes") ?? .standard,
            // A sharded sync compares in full unless told otherwise, which is refused below.
            incremental: values.boolean("incremental") ?? (shards <= 1),
            incrementalByDefault: values.boolean("incremental") == nil && shards <= 1,
            readUnchanged: values.boolean("readUnchanged") ?? false, shards: shards)
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
            + (configuration.incremental
                ? ", incremental from change feeds where every provider offers one"
                : ", every provider compared in full")
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
