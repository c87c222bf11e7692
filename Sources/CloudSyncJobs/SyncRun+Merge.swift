import CloudSync
import CloudSyncPipeline
import Foundation

/// One page of the merged walk: its keys with their baselines, and each listing's version tag of each key (nil where
/// it has none or lacks the key), positionally by source.
struct MergedPage {
    private(set) var items: [SyncItem] = []
    private(set) var tagColumns: [[String?]]
    /// The tags each listing gave the key being taken, positionally by source (nil where it lacks the key).
    var headTags: [String?]
    /// Keys taken whose listed tags their baselines record, counted in sync without joining a page: not yet counted
    /// in the report.
    var vouched = 0

    init(sources: Int, capacity: Int) {
        items.reserveCapacity(capacity)
        tagColumns = [[String?]](repeating: [], count: sources)
        headTags = [String?](repeating: nil, count: sources)
    }

    /// Adds `item` with ``headTags``.
    mutating func append(_ item: SyncItem) {
        items.append(item)
        for index in tagColumns.indices { tagColumns[index].append(headTags[index]) }
    }

    /// The tags by provider id, as `syncPage` takes them.
    func tags(of sources: [OrderedKeys]) -> [String: [String?]] {
        Dictionary(uniqueKeysWithValues: zip(sources.map(\.id), tagColumns))
    }

    mutating func clear() {
        items.removeAll(keepingCapacity: true)
        for index in tagColumns.indices { tagColumns[index].removeAll(keepingCapacity: true) }
    }
}

extension SyncRun {
    /// Walks every provider's keys and the snapshot together in key order, a page at a time; the store decides and
    /// writes each page, and the snapshot rows and deletions it leaves commit every few pages (each commit costs
    /// fsyncs; the providers' writes always land before the rows that describe them).
    func mergeAndDecide(into report: inout JobReport) async throws(CloudSyncError) {
        let snapshot = SnapshotRows(
            state: changedOnly ? nil : state, job: job, pageSize: pageSize, range: context.range)
        pacing = CommitPacing(clock: context.clock)
        var page = MergedPage(sources: sources.count, capacity: pageSize)
        vouches = !isRange && !(configuration.readUnchanged || context.readsUnchanged) && outboxIsEmpty
        sourceIDs = sources.map(\.id)
        // A page still read ahead is waited for on every way out, so the state database is left alone after.
        do throws(CloudSyncError) {
            while !lostRange, !context.isInterrupted, try await takeNext(from: snapshot, into: &page) {
                if page.items.count == pageSize {
                    try await decide(&page, into: &report)
                } else if page.vouched >= pageSize {
                    countVouched(&page, into: &report)
                }
            }
            if !page.items.isEmpty, !context.isInterrupted, !lostRange { try await decide(&page, into: &report) }
            countVouched(&page, into: &report)
        } catch {
            await settle(snapshot)
            throw error
        }
        await settle(snapshot)
        try commitProgress()
        report.entry.sync = details
    }

    /// Nothing waits in the store's outbox, where a write would stand for a copy no listing shows.
    private var outboxIsEmpty: Bool { context.store.maintenance.nothingQueued }

    /// Counts the keys `page` took in sync by their tags, and says how far the walk is; stops such counting once a
    /// write waits in the outbox (asked every page's worth of keys, as `syncPage` asks it of every page).
    private func countVouched(_ page: inout MergedPage, into report: inout JobReport) {
        guard page.vouched > 0 else { return }
        report.add(page.vouched, to: SyncJob.keys)
        report.add(page.vouched, to: SyncJob.inSync)
        page.vouched = 0
        if vouches, !outboxIsEmpty { vouches = false }
        context.progress(report[SyncJob.keys], nil)
    }

    /// Adds the smallest key any listing or the snapshot holds next to `page`, with its snapshot row and each
    /// listing's tag, and moves past it everywhere; false once every one is exhausted.
    ///
    /// A key whose baseline records the tag every listing gives it now was found in sync when those tags were
    /// recorded and has not changed since anywhere: it is counted in sync at once, without a place in the page (so
    /// a night with few changes decides, and writes, a page per thousand changed keys, not one per thousand keys).
    /// ``StoreMaintenance/syncPage(_:among:unknown:deletes:listedTags:)`` makes the same test of every key it is
    /// given, among the providers still available; this one asks it of every listing, so it never vouches for more.
    private func takeNext(from snapshot: SnapshotRows, into page: inout MergedPage) async throws(CloudSyncError)
        -> Bool
    {
        for source in sources where source.needsRefill {
            await source.refill(from: context.store, pageSize: pageSize)
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
        guard let key = next else { return false }
        var baseline: SyncFingerprint?
        if let row = snapshot.head, StoreKey.bytesEqual(row.key, key) {
            baseline = row.fingerprint
            snapshotKeys += 1
            snapshot.advance()
        }
        for (index, source) in sources.enumerated() {
            if let head = source.head, StoreKey.bytesEqual(head, key) {
                page.headTags[index] = source.headVersion
                source.advance()
            } else {
                page.headTags[index] = nil
            }
        }
        if vouches, let baseline, baseline.recordsTags(of: sourceIDs, { page.headTags[$0] }) {
            page.vouched += 1
        } else {
            page.append(SyncItem(key: key, baseline: baseline))
        }
        return true
    }

    /// Has the store decide and write `page`, counts what it did, keeps its rows and deletions for the next commit
    /// and, in a range, records the page as done; empties the page.
    private func decide(_ page: inout MergedPage, into report: inout JobReport) async throws(CloudSyncError) {
        countVouched(&page, into: &report)
        let batch = try withBaselines(page.items)
        let before = SyncJob.reported.map { report[$0] }
        let listedBefore = report.entry.failures.count
        try requireAComparableProvider()
        let result = try await context.store.maintenance.syncPage(
            batch, among: ids, unknown: unknown, deletes: configuration.deletes,
            listedTags: configuration.readUnchanged || context.readsUnchanged ? [:] : page.tags(of: sources))
        page.clear()
        // A write its page queued stands for a copy no listing shows: from here on every key is read.
        if vouches, !outboxIsEmpty { vouches = false }
        leaveOut(result.leftOut, from: batch.first?.key ?? "")
        count(result, into: &report)
        pendingRows += result.snapshot
        pendingDeletions += result.deletions.map(\.key)
        if isRange {
            // A range commits every page before recording it, so a runner that takes it over resumes after rows
            // that are all there.
            try commitProgress()
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
        } else if pacing.isDue(rows: pendingRows.count + pendingDeletions.count, walked: report[SyncJob.keys]) {
            try commitProgress(walked: report[SyncJob.keys])
        }
        context.progress(report[SyncJob.keys], nil)
    }

    /// `batch` with each key's snapshot row, read by key when the run compares only the keys its feeds changed (the
    /// merge walked no snapshot then).
    private func withBaselines(_ batch: [SyncItem]) throws(CloudSyncError) -> [SyncItem] {
        guard changedOnly, let state else { return batch }
        var batch = batch
        var byKey: [StoreKey: SyncFingerprint] = [:]
        for row in try state.snapshotRows(of: job, keys: batch.map(\.key)) {
            byKey[StoreKey(row.key)] = row.fingerprint
        }
        for index in batch.indices { batch[index].baseline = byKey[StoreKey(batch[index].key)] }
        return batch
    }

    /// Adds what a page did to the report's counts, failures, conflicts and deletions.
    private func count(_ result: SyncPageResult, into report: inout JobReport) {
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
        deletionCount += result.deletions.count
        for item in result.deletions where deletionKeys.count < Self.listLimit { deletionKeys.append(item.key) }
    }

    /// Commits the snapshot rows and deletions collected since the last commit, at once; `walked`: the keys the
    /// merge has walked so far.
    private func commitProgress(walked: Int = 0) throws(CloudSyncError) {
        try state?.recordSyncProgress(of: job, snapshot: pendingRows, deletions: pendingDeletions)
        pendingRows.removeAll(keepingCapacity: true)
        pendingDeletions.removeAll(keepingCapacity: true)
        pacing.committed(walked: walked)
    }

    /// Waits for the pages still read ahead, of the snapshot and of every listing.
    private func settle(_ snapshot: SnapshotRows) async {
        await snapshot.settle()
        for source in sources { await source.settle() }
    }
}
