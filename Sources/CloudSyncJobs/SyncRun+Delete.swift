import CloudSync
import CloudSyncPipeline
import Foundation

extension SyncRun {
    /// Deletes what was deleted since the last run, once the count is known to be within `maxDeletes` (or
    /// `--force` lets it through); returns false when the guard stopped it.
    func delete(into report: inout JobReport) async throws(CloudSyncError) -> Bool {
        // maxDeletes counts against the keys the last sync left, as a full run's merge counts them; a run that read
        // only change feeds walked no snapshot, and counts it only when it has a deletion to weigh (a count of every
        // row, which a quiet night should not pay).
        if changedOnly, deletionCount > 0 { snapshotKeys = try state?.snapshotCount(of: job) ?? 0 }
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
